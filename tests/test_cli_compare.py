"""``l0mem compare`` end to end: every exit code, the table, the JSON output."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from l0mem.audit.report import write_json
from l0mem.cli.compare import compare
from tests.support.cli import run_l0mem
from tests.support.widths import assert_whole_at
from tests.test_analysis import synthetic_report, synthetic_run

DATA = Path(__file__).parent / "data" / "reports"
BASELINE = str(DATA / "baseline.json")
ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str):
    return CliRunner().invoke(compare, list(args))


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert lines[0].startswith("l0mem compare: error: ")
    return lines[0]


def test_exit_0_when_nothing_regressed() -> None:
    result = _run(BASELINE, str(DATA / "current-same.json"))
    assert result.exit_code == 0, result.output
    assert "no regression" in result.stdout
    assert "sycl [affinity]" in result.stdout
    assert result.stderr == ""


def test_exit_1_on_regression_lists_them() -> None:
    result = _run(BASELINE, str(DATA / "current-regressed.json"))
    assert result.exit_code == 1
    assert "REGRESSION" in result.stdout
    assert "l0: verdict worse: clean -> mirror" in result.stdout
    assert "sycl-single: verdict worse: clean -> partial" in result.stdout
    assert "2 regression(s)" in result.stdout


def test_slope_tolerance_decides_a_same_verdict_rise(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    write_json(synthetic_report([synthetic_run(0.80)]), before)
    write_json(synthetic_report([synthetic_run(0.95)]), after)
    assert _run(str(before), str(after)).exit_code == 1
    assert _run(str(before), str(after), "--slope-tolerance", "200").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        [],
        [BASELINE],
        [BASELINE, BASELINE, "--slope-tolerance", "-5"],
        [BASELINE, BASELINE, "--slope-tolerance", "nan"],
    ],
)
def test_exit_2_on_bad_usage(args: list[str]) -> None:
    assert _run(*args).exit_code == 2


@pytest.mark.parametrize(
    ("current", "message"),
    [
        ("absent.json", "absent.json: no such file"),
        ("malformed.json", r"malformed.json: runs[1].samples[2].phase: expected one of"),
        ("schema-v2-both", "unsupported schema version"),
    ],
)
def test_exit_4_on_unreadable_input(current: str, message: str) -> None:
    if current == "schema-v2-both":
        result = _run(str(DATA / "schema-v2.json"), str(DATA / "schema-v2.json"))
    else:
        result = _run(BASELINE, str(DATA / current))
    assert result.exit_code == 4
    assert message in _one_line_error(result.stderr)
    assert result.stdout == ""


def test_exit_4_on_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{truncated")
    result = _run(str(bad), BASELINE)
    assert result.exit_code == 4
    assert "bad.json: not JSON" in _one_line_error(result.stderr)


def test_exit_5_when_no_runs_in_common() -> None:
    result = _run(BASELINE, str(DATA / "other-setups.json"))
    assert result.exit_code == 5
    assert "no set-up run in common" in _one_line_error(result.stderr)
    assert "only in current: l0-dmabuf" in result.stdout
    # Nothing was compared: a run missing now is not called a regression beside exit 5.
    assert "only in baseline: l0 (it had a verdict)" in result.stdout
    assert "REGRESSION" not in result.stdout


def _measured_nothing(path: Path, how: str) -> Path:
    report = synthetic_report([synthetic_run(1.0), synthetic_run(0.0, setup="l0", seed=2)])
    skipped = [
        dataclasses.replace(r, status="skipped", result=None, samples=[], devices=[], reason="x")
        for r in report.runs
    ]
    runs = {"no run": [], "all skipped": skipped}[how]
    write_json(dataclasses.replace(report, runs=runs), path)
    return path


@pytest.mark.parametrize("how", ["no run", "all skipped"])
@pytest.mark.parametrize("which", ["baseline", "current", "both"])
def test_a_report_that_measured_nothing_is_named_and_exit_5(
    how: str, which: str, tmp_path: Path
) -> None:
    # "runs": [] is what the audit writes when every discovery failed (exit 6).
    good = tmp_path / "good.json"
    write_json(synthetic_report([synthetic_run(1.0), synthetic_run(0.0, setup="l0", seed=2)]), good)
    empty = _measured_nothing(tmp_path / "empty.json", how)
    before = empty if which in ("baseline", "both") else good
    after = empty if which in ("current", "both") else good
    for flags in ([], ["-q"], ["--json", str(tmp_path / "c.json")]):
        result = _run(str(before), str(after), *flags)
        assert result.exit_code == 5, result.output
        line = _one_line_error(result.stderr)
        assert f"{empty} holds no measured set-up" in line, line
        assert result.stdout == ""


def test_exit_5_on_schema_major_mismatch() -> None:
    result = _run(BASELINE, str(DATA / "schema-v2.json"))
    assert result.exit_code == 5
    assert "schema major versions differ" in _one_line_error(result.stderr)


def test_missing_runs_fail_only_with_fail_on_missing(tmp_path: Path) -> None:
    fewer = tmp_path / "fewer.json"
    write_json(synthetic_report([synthetic_run(0.0, setup="l0", seed=3)]), fewer)
    allowed = _run(BASELINE, str(fewer), "--allow-unjudged")
    assert allowed.exit_code == 0
    assert "only in baseline: sycl [affinity]" in allowed.stdout
    strict = _run(BASELINE, str(fewer), "--fail-on-missing")
    assert strict.exit_code == 5
    assert "present in only one report" in _one_line_error(strict.stderr)


def test_a_judged_run_missing_now_is_a_regression_by_default(tmp_path: Path) -> None:
    fewer = tmp_path / "fewer.json"
    write_json(synthetic_report([synthetic_run(0.0, setup="l0", seed=3)]), fewer)
    result = _run(BASELINE, str(fewer))
    assert result.exit_code == 1, result.output
    assert "only in baseline: sycl [affinity] (REGRESSION: it had a verdict)" in result.stdout
    assert "judged run(s) missing" in result.stdout


@pytest.mark.parametrize("status", ["failed", "inconclusive"])
def test_a_verdict_lost_to_failure_or_noise_is_a_regression_by_default(
    tmp_path: Path, status: str
) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    write_json(synthetic_report([synthetic_run(0.0)]), before)
    if status == "failed":
        now = synthetic_run(0.0, status="failed", reason="DEVICE_LOST", steps=2)
    else:
        now = synthetic_run(0.0, noise_mib=500.0, seed=4)
    write_json(synthetic_report([now]), after)
    strict = _run(str(before), str(after))
    assert strict.exit_code == 1, strict.output
    assert "REGRESSION" in strict.stdout and "no verdict now: clean ->" in strict.stdout
    relaxed = _run(str(before), str(after), "--allow-unjudged")
    assert relaxed.exit_code == 0, relaxed.output
    assert "not judged" in relaxed.stdout


def test_an_inconclusive_baseline_is_not_judged_and_fails_unless_allowed(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    write_json(synthetic_report([synthetic_run(0.0, noise_mib=500.0, seed=4)]), before)
    write_json(synthetic_report([synthetic_run(1.0)]), after)
    strict = _run(str(before), str(after))
    assert strict.exit_code == 1, strict.output
    assert (
        "sycl: not judged: the baseline run has no verdict (inconclusive) -> mirror"
        in strict.stdout
    )
    assert "0 regression" not in strict.stdout and "no regression" not in strict.stdout
    assert "1 run(s) not judged" in strict.stdout and "--allow-unjudged" in strict.stdout
    # The table's result cell says what the answer says (it said REGRESSION).
    assert "REGRESSION" not in strict.stdout, strict.stdout
    relaxed = _run(str(before), str(after), "--allow-unjudged")
    assert relaxed.exit_code == 0, relaxed.output
    assert "not judged" in relaxed.stdout


def test_simulator_against_hardware_is_a_mismatch(tmp_path: Path) -> None:
    import dataclasses

    real = synthetic_report([synthetic_run(0.0)])
    sim = dataclasses.replace(real, fingerprint={"simulated": True})
    real_path, sim_path = tmp_path / "real.json", tmp_path / "sim.json"
    write_json(real, real_path)
    write_json(sim, sim_path)
    for pair in ((real_path, sim_path), (sim_path, real_path)):
        result = _run(*(str(p) for p in pair), "--allow-unjudged")
        assert result.exit_code == 5
        line = _one_line_error(result.stderr)
        assert re.search(r"sim\.json (comes )?from the simulated Level Zero driver", line), line
        assert re.search(r"real\.json (comes )?from hardware", line), line


def test_json_output(tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    result = _run(BASELINE, str(DATA / "current-regressed.json"), "--json", str(out))
    assert result.exit_code == 1
    data = json.loads(out.read_text())
    assert data["schema"] == "l0mem.compare/1"
    assert data["exit_code"] == 1 and data["regression"] is True
    assert data["allow_unjudged"] is False and data["lost"] == []
    assert data["slope_tolerance"] == 64.0 and data["fail_on_missing"] is False
    regressed = {c["setup"] for c in data["changes"] if c["regression"]}
    assert regressed == {"l0", "sycl-single"}


def test_unwritable_json_output_is_exit_4(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = _run(BASELINE, BASELINE, "--json", str(blocker / "cmp.json"))
    assert result.exit_code == 4
    assert "cannot write" in _one_line_error(result.stderr)


def test_help_documents_exit_codes() -> None:
    result = _run("--help")
    assert result.exit_code == 0
    for line in (
        "0     no regression",
        "1     a regression",
        "4     a report is missing",
        "5     the reports",
    ):
        assert line in result.stdout
    for text in (
        "--allow-unjudged",
        "inconclusive or is missing",
        "the simulator",
        "without hardware",
    ):
        assert text in result.stdout


def test_simulator_reports_are_labelled(tmp_path: Path) -> None:
    import dataclasses

    sim = dataclasses.replace(
        synthetic_report([synthetic_run(0.0)]), fingerprint={"simulated": True}
    )
    path = tmp_path / "sim.json"
    write_json(sim, path)
    result = _run(str(path), str(path))
    assert result.exit_code == 0
    assert "simulator numbers, not hardware" in result.stdout


def _subprocess(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run(
        [sys.executable, "-m", "l0mem", "compare", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("current", "code"),
    [
        ("current-same.json", 0),
        ("current-regressed.json", 1),
        ("absent.json", 4),
        ("schema-v2.json", 5),
    ],
)
def test_installed_command_exit_codes(current: str, code: int) -> None:
    proc = _subprocess(BASELINE, str(DATA / current))
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    if code >= 4:
        _one_line_error(proc.stderr)
    else:
        assert "sycl-single" in proc.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_every_verdict_and_slope_is_whole_at(tmp_path: Path, columns: int) -> None:
    out = tmp_path / "cmp.json"
    current = "tests/data/reports/current-regressed.json"
    proc = run_l0mem(
        "compare",
        ["tests/data/reports/baseline.json", current, "--json", str(out)],
        dict(os.environ),
        columns=columns,
    )
    assert proc.returncode == 1, proc.stderr
    values = ["tests/data/reports/baseline.json", current, "2 regression(s)"]
    for c in json.loads(out.read_text())["changes"]:
        label = c["setup"] if c["remedy"] is None else f"{c['setup']} [{c['remedy']}]"
        values += [label, c["baseline_verdict"] or c["baseline_status"]]
        values += [c["current_verdict"] or c["current_status"]]
        values += [
            str(round(s)) for s in (c["baseline_slope"], c["current_slope"]) if s is not None
        ]
        if c["slope_change"] is not None:
            values.append(f"{round(c['slope_change']):+d}")
        if c["note"]:
            values.append(f"{label}: {c['note']}")
    assert_whole_at(proc.stdout, columns, values)


def _answer_case(case: str, tmp_path: Path) -> tuple[list[str], int, str, list[str]]:
    """Return (BASELINE CURRENT, exit code, how the answer opens, what it must hold whole)."""
    import dataclasses

    before, after = tmp_path / "before.json", tmp_path / "after.json"
    if case == "regressed":
        return (
            [BASELINE, str(DATA / "current-regressed.json")],
            1,
            "Compared 5 run(s) with the baseline: 2 regression(s)",
            ["Worse now: l0 (clean -> mirror, +1025 MiB/GiB), sycl-single (clean -> partial, +511"],
        )
    if case == "same":
        return (
            [BASELINE, str(DATA / "current-same.json")],
            0,
            "Compared 5 run(s) with the baseline: no regression",
            [],
        )
    if case == "unjudged":
        write_json(synthetic_report([synthetic_run(0.0, noise_mib=500.0, seed=4)]), before)
        write_json(synthetic_report([synthetic_run(1.0)]), after)
        return (
            [str(before), str(after)],
            1,
            "Compared 1 run(s) with the baseline: 1 run(s) not judged",
            ["Not judged: sycl (the baseline run has no verdict (inconclusive) -> mirror)"],
        )
    if case == "missing":
        write_json(synthetic_report([synthetic_run(0.0, setup="l0", seed=3)]), after)
        return (
            [BASELINE, str(after)],
            1,
            "Compared 1 run(s) with the baseline: 3 regression(s): judged run(s) missing",
            [
                "Runs in the baseline only: sycl, sycl-single, l0-multi, sycl [affinity] "
                "(had a verdict: REGRESSION)"
            ],
        )
    sim = dataclasses.replace(
        synthetic_report([synthetic_run(0.0)]), fingerprint={"simulated": True}
    )
    write_json(sim, before)
    return (
        [str(before), str(before)],
        0,
        "[SIMULATOR] Compared 1 run(s) with the baseline: no regression",
        [],
    )


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("case", ["regressed", "same", "unjudged", "missing", "simulator"])
def test_the_answer_comes_first_and_quiet_prints_it_alone(
    tmp_path: Path, case: str, columns: int
) -> None:
    reports, code, opens, holds = _answer_case(case, tmp_path)
    full = run_l0mem("compare", reports, dict(os.environ), columns=columns)
    quiet = run_l0mem("compare", ["-q", *reports], dict(os.environ), columns=columns)
    assert full.returncode == quiet.returncode == code, full.stderr + quiet.stderr
    assert full.stderr == quiet.stderr == ""
    answer, details = full.stdout.split("\n\n", 1)
    assert quiet.stdout == answer + "\n"  # -q: the answer, the same lines, and nothing else
    flat = " ".join(line.strip() for line in answer.splitlines())
    assert flat.startswith(opens), answer
    # At most five lines at 120 columns; each one whole at 80 columns too.
    if columns == 120:
        assert 1 <= len(answer.splitlines()) <= 5, answer
    assert_whole_at(quiet.stdout, columns, [opens, *holds])
    # The details follow: the table (titled with both reports), no outcome repeated after it.
    assert reports[0] in " ".join(details.split()) and "set-up" in details
    assert "regression(s)" not in details and "no regression" not in details
    assert not any(mark in quiet.stdout for mark in ("┃", "━", "set-up:"))


def test_quiet_prints_no_answer_where_the_reports_cannot_be_compared() -> None:
    proc = run_l0mem("compare", ["-q", BASELINE, str(DATA / "other-setups.json")], dict(os.environ))
    assert proc.returncode == 5
    assert proc.stdout == ""  # exit 5 has no answer: its one line says why
    assert "no set-up run in common" in _one_line_error(proc.stderr)


SIGNED_ZERO = re.compile(r"(?<![\w.])[+-]0(?:\.0+)?(?![\w.])")


@pytest.mark.parametrize(
    ("before", "now"),
    [(0.0, -0.0004), (0.0, 0.0004), (-0.0004, 0.0), (0.0004, 0.0), (-0.0001, -0.0004)],
)
@pytest.mark.parametrize("tolerance", ["0", "64"])
def test_no_compare_number_is_a_signed_zero(
    before: float, now: float, tolerance: str, tmp_path: Path
) -> None:
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    write_json(synthetic_report([synthetic_run(before)]), a)
    write_json(synthetic_report([synthetic_run(now)]), b)
    result = _run(str(a), str(b), "--slope-tolerance", tolerance, "--json", str(out))
    assert result.exit_code in (0, 1), result.output
    assert not SIGNED_ZERO.search(result.stdout), result.stdout
    data = json.loads(out.read_text())
    for change in data["changes"]:
        for key in ("baseline_slope", "current_slope", "slope_change"):
            assert json.dumps(change[key]) != "-0.0", (key, change)


WRONG_SCHEMA = {
    "int": (12, "int"),
    "float": (1.5, "float"),
    "bool": (True, "bool"),
    "null": (None, "null"),
    "list": (["l0mem.audit/1.2"], "list"),
    "object": ({"name": "l0mem.audit/1.2"}, "dict"),
}


@pytest.mark.parametrize("kind", sorted(WRONG_SCHEMA))
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_a_schema_of_the_wrong_type_is_said_so_not_missing(
    kind: str, side: str, tmp_path: Path
) -> None:
    value, named = WRONG_SCHEMA[kind]
    bad = tmp_path / "bad.json"
    data = json.loads(Path(BASELINE).read_text())
    data["schema"] = value
    bad.write_text(json.dumps(data))
    args = [str(bad), BASELINE] if side == "baseline" else [BASELINE, str(bad)]
    result = _run(*args)
    assert result.exit_code == 4, result.output
    line = _one_line_error(result.stderr)
    assert f"{bad}: schema: expected a string, got {named}" in line, line
    assert "missing" not in line
    # Without the field, it is missing.
    del data["schema"]
    bad.write_text(json.dumps(data))
    assert "schema: missing field" in _one_line_error(_run(*args).stderr)


@pytest.mark.parametrize("kind", sorted(WRONG_SCHEMA))
def test_matrix_says_a_schema_of_the_wrong_type_is_not_a_string(kind: str, tmp_path: Path) -> None:
    value, named = WRONG_SCHEMA[kind]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": value, "runs": []}))
    proc = run_l0mem("matrix", [str(bad)], {})
    assert proc.returncode == 4, proc.stderr
    assert f'its "schema" is {named}, not a string' in proc.stderr, proc.stderr
