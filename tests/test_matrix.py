"""``l0mem matrix``: many reports as driver stacks against set-ups, in every format."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from l0mem.audit.report import write_json
from tests.support.cli import one_line, run_l0mem
from tests.support.widths import assert_whole_at
from tests.test_analysis import synthetic_report, synthetic_run

PEER, PLAIN = "l0-peer-resident", "l0"


def _report(
    path: Path,
    driver: str,
    machine: str,
    ratio: float,
    *,
    env: dict[str, str] | None = None,
    simulated: bool = False,
) -> Path:
    runs = [synthetic_run(ratio, setup=PEER), synthetic_run(0.0, setup=PLAIN, seed=2)]
    report = synthetic_report(runs)
    fingerprint = {
        "simulated": simulated,
        "host": {"kernel_release": "6.8.0", "machine_id": machine},
        "compute_runtime": {"driver_versions": [driver]},
        "loader": {"components": [{"name": "loader", "version": "1.21.1"}]},
        "sycl": {"runtime": {"intel-sycl-rt": "2025.3.3"}},
        "environment": {"ZE_ENABLE_ALT_DRIVERS": "/x.so", **(env or {})},
    }
    report = dataclasses.replace(report, fingerprint=fingerprint)
    write_json(report, path)
    return path


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    d = tmp_path / "reports"
    d.mkdir()
    _report(d / "a1.json", "25.18.33578", "m1", 1.0)
    _report(d / "a2.json", "25.18.33578", "m2", 1.0)
    _report(d / "b3.json", "26.05.1", "m3", 1.0)
    _report(d / "b4.json", "26.05.1", "m4", 0.0)  # the same stack, another verdict
    _report(
        d / "c5.json",
        "26.14.2",
        "m5",
        0.0,
        env={"EnableDeferBacking": "0", "NEOReadDebugKeys": "1"},
    )
    _report(d / "sim.json", "25.18.33578", "m1", 1.0, simulated=True)
    (d / "watch.json").write_text(json.dumps({"schema": "l0mem.watch/1.0"}))
    (d / "future.json").write_text(json.dumps({"schema": "l0mem.audit/2.0"}))
    return d


def test_every_format_keeps_stacks_machines_disagreements_and_the_simulator_apart(
    reports: Path, tmp_path: Path
) -> None:
    out = {k: tmp_path / f"m.{k}" for k in ("json", "md", "csv")}
    proc = run_l0mem(
        "matrix",
        [
            str(reports),
            "--json",
            str(out["json"]),
            "--markdown",
            str(out["md"]),
            "--csv",
            str(out["csv"]),
        ],
        {},
        columns=250,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out["json"].read_text())
    assert data["schema"] == "l0mem.matrix/1"
    groups = {g["group"]: g for g in data["groups"]}
    assert set(groups) == {"hardware, schema 1", "simulator, schema 1"}
    rows = {r["stack"].split(" | ")[0]: r for r in groups["hardware, schema 1"]["rows"]}
    assert set(rows) == {"driver 25.18.33578", "driver 26.05.1", "driver 26.14.2"}
    a = rows["driver 25.18.33578"]["cells"][PEER]
    assert (a["verdicts"], a["machines"], a["disagree"]) == (["mirror", "mirror"], 2, False)
    assert abs(a["slope_mib_per_gib"] - 1024) < 1
    b = rows["driver 26.05.1"]["cells"][PEER]
    assert sorted(b["verdicts"]) == ["clean", "mirror"] and b["disagree"] is True
    # The behaviour-changing environment is part of the stack; a file path is not.
    c_stack = rows["driver 26.14.2"]["stack"]
    assert "EnableDeferBacking=0" in c_stack and "ZE_ENABLE_ALT_DRIVERS" not in c_stack
    assert data["not_audit_reports"] == {"watch/1.0": 1, "audit/2.0": 1}
    sim = groups["simulator, schema 1"]["rows"]
    assert len(sim) == 1 and sim[0]["cells"][PEER]["machines"] == 1
    md = out["md"].read_text()
    assert "### hardware, schema 1" in md and "### simulator, schema 1" in md
    assert "DISAGREE" in md and f"| stack | {PLAIN} | {PEER} |" in md
    cells = list(csv.reader(io.StringIO(out["csv"].read_text())))
    assert cells[0][:3] == ["group", "stack", "setup"] and len(cells) == 1 + 2 * 4
    assert "DISAGREE" in proc.stdout and "simulator, schema 1" in proc.stdout
    assert "not in the matrix: 1 file(s) of schema watch/1.0" in proc.stdout


def test_a_baseline_marks_regressions_by_compares_rule(reports: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    proc = run_l0mem("matrix", [str(reports), "--baseline", "26.14", "--json", str(out)], {})
    assert proc.returncode == 1, proc.stderr
    found = json.loads(out.read_text())["regressions"]
    worse = {(r["stack"].split(" | ")[0], r["column"]) for r in found}
    assert worse == {("driver 25.18.33578", PEER), ("driver 26.05.1", PEER)}
    assert all("verdict worse: clean -> mirror" in r["note"] for r in found)
    # Held to a mirroring stack, nothing is worse.
    ok = run_l0mem("matrix", [str(reports), "--baseline", "25.18.33578"], {})
    assert ok.returncode == 0, ok.stderr


def test_bad_input_is_one_line(reports: Path, tmp_path: Path) -> None:
    proc = run_l0mem("matrix", [str(reports), "--baseline", "no-such-driver"], {})
    assert proc.returncode == 2 and "matches no stack" in one_line(proc, "matrix")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    proc = run_l0mem("matrix", [str(reports / "a1.json"), str(broken)], {})
    assert proc.returncode == 4 and "broken.json" in one_line(proc, "matrix")
    proc = run_l0mem("matrix", [str(tmp_path / "missing.json")], {})
    assert proc.returncode == 4, proc.stderr


def test_the_benchmark_runs_the_command_it_times(capsys: pytest.CaptureFixture[str]) -> None:
    import benchmarks.bench_matrix as bench

    assert bench.main(["--reports", "4,8", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "l0mem matrix over 4 reports" in out and "l0mem matrix over 8 reports" in out
    # The goals are judged from what was measured in this run, never assumed.
    assert out.count("peak memory") == 2 and "time per report, 8 against 4" in out


def test_a_run_report_joins_the_matrix_on_its_platform(reports: Path, tmp_path: Path) -> None:
    import os
    import sys

    from tests.support.jobs import peer_resident_job

    job_report = reports / "job.json"
    job, env = peer_resident_job()
    opts = ["--quiet", "--trace", "--interval", "0.05", "--json", str(job_report)]
    proc = run_l0mem("run", [*opts, "--", *job], env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(job_report.read_text())["fingerprint"]["kernel_release"] == os.uname().release
    out = tmp_path / "m.json"
    proc = run_l0mem("matrix", [str(reports), "--json", str(out)], {})
    assert proc.returncode == 0, proc.stderr
    groups = {g["group"]: g for g in json.loads(out.read_text())["groups"]}
    column = f"run: {Path(sys.executable).name}"
    # Traced on the simulator: with the simulator's reports, never with hardware.
    assert column in groups["simulator, schema 1"]["columns"]
    assert column not in groups["hardware, schema 1"]["columns"]
    (cell,) = [
        r["cells"][column] for r in groups["simulator, schema 1"]["rows"] if column in r["cells"]
    ]
    assert cell["verdicts"] == ["mirror"] and abs(cell["slope_mib_per_gib"] - 1024) < 64


def _md_tables(text: str) -> list[list[list[str]]]:
    """Return every table of a Markdown text as rows of cells' plain text (a real parser's view)."""
    from markdown_it import MarkdownIt

    tables: list[list[list[str]]] = []
    for tok in MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text):
        if tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            tables[-1].append([])
        elif tok.type == "inline" and tables and tables[-1] and tok.level > 3:
            kinds = {c.type for c in tok.children or []}
            assert kinds <= {"text", "softbreak"}, kinds  # no emphasis, code, link or HTML
            tables[-1][-1].append("".join(c.content for c in tok.children or []))
    return tables


def test_the_markdown_tables_parse_with_every_stack_whole(reports: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.md"
    proc = run_l0mem("matrix", [str(reports), "--markdown", str(out)], {})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(run_l0mem("matrix", [str(reports), "--json", "-"], {}).stdout)
    tables = _md_tables(out.read_text())
    assert len(tables) == len(data["groups"])
    for table, group in zip(tables, data["groups"], strict=True):
        header, *rows = table
        assert all(len(row) == len(header) for row in rows), table
        # The stack labels hold " | " and come back whole, one cell each.
        assert [row[0] for row in rows] == [r["stack"] for r in group["rows"]]


HOSTILE = "a|b\\c`d*e_f[g]h~i&j<k>l\x1b[31mred\x1b[0m\nnew\rline\ttab\x7f\x9b é ✓ #!()$x$"


@pytest.mark.parametrize("seed", range(100))
def test_any_text_stands_in_one_cell_shown_as_written(seed: int) -> None:
    import random

    from l0mem.audit.matrix import md_text

    rng = random.Random(seed)
    text = "".join(rng.choice(HOSTILE) for _ in range(rng.randint(0, 40)))
    table = f"| {md_text(text)} | x |\n| --- | --- |\n| {md_text(text[::-1])} | y |\n"
    (header, row) = _md_tables(table)[0]
    shown = "".join(
        f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 else c for c in text
    )
    assert header == [shown.strip(), "x"]
    assert (
        row[0]
        == "".join(
            f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 else c for c in text[::-1]
        ).strip()
    )
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) < 0xA0 for c in md_text(text))


def test_a_report_named_again_counts_once(reports: Path, tmp_path: Path) -> None:
    # b4.json (clean) named directly, through its directory and through a link:
    # counted three times it would outvote b3.json (mirror) in their stack's cell.
    link = tmp_path / "link.json"
    link.symlink_to(reports / "b4.json")
    once = json.loads(
        run_l0mem(
            "matrix", [str(reports / "b3.json"), str(reports / "b4.json"), "--json", "-"], {}
        ).stdout
    )
    again = run_l0mem(
        "matrix",
        [
            str(reports / "b3.json"),
            str(reports / "b4.json"),
            str(reports),
            str(link),
            "--json",
            "-",
        ],
        {},
    )
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)

    def cell(d: dict[str, Any]) -> dict[str, Any]:
        (group,) = [g for g in d["groups"] if g["group"].startswith("hardware")]
        (row,) = [r for r in group["rows"] if "26.05.1" in r["stack"]]
        return row["cells"][PEER]

    assert sorted(cell(data)["verdicts"]) == sorted(cell(once)["verdicts"]) == ["clean", "mirror"]


def test_a_heading_keeps_a_trailing_hash() -> None:
    from markdown_it import MarkdownIt

    from l0mem.audit.matrix import md_text

    (inline,) = [
        t
        for t in MarkdownIt("commonmark").parse(f"### {md_text('group #')}\n")
        if t.type == "inline"
    ]
    assert inline.content.replace("\\", "") == "group #"
    assert "".join(c.content for c in inline.children or []) == "group #"


FINGERPRINT_FIELDS = (
    ("host",),
    ("host", "kernel_release"),
    ("host", "machine_id"),
    ("host", "packages"),
    ("host", "packages", "dpkg"),
    ("host", "packages", "dpkg", "libze1"),
    ("host", "gpu_modules"),
    ("compute_runtime",),
    ("compute_runtime", "driver_versions"),
    ("loader",),
    ("loader", "components"),
    ("sycl",),
    ("sycl", "runtime"),
    ("environment",),
    ("simulated",),
)
WRONG = ("text", ["a", 1], 7, 2.5, True, {"k": [1]}, [{"x": None}])


@pytest.mark.parametrize("where", FINGERPRINT_FIELDS, ids=".".join)
def test_every_fingerprint_field_of_any_type_is_read_or_refused_in_one_line(
    where: tuple[str, ...], tmp_path: Path
) -> None:
    from l0mem.audit.loading import read_json
    from l0mem.audit.matrix import build, machine_of, stack_of
    from l0mem.audit.model import ReportFormatError

    good = {
        "host": {
            "kernel_release": "6.8",
            "machine_id": "m1",
            "packages": {"dpkg": {"libze1": "1.8"}},
        },
        "compute_runtime": {"driver_versions": ["26.05.1"]},
        "loader": {"components": [{"name": "loader", "version": "1.8"}]},
        "sycl": {"runtime": {"dpctl": "0.21.1"}},
        "environment": {"ZE_AFFINITY_MASK": "0"},
    }
    path = tmp_path / "r.json"
    for value in WRONG:
        fp = json.loads(json.dumps(good))
        node = fp
        for key in where[:-1]:
            node = node.setdefault(key, {})
        node[where[-1]] = value
        data = synthetic_report([synthetic_run(1.0)]).to_dict()
        data["fingerprint"] = fp
        path.write_text(json.dumps(data))
        try:
            loaded = read_json(path)
        except ReportFormatError as exc:
            assert str(exc).startswith(f"{path}: fingerprint") and "\n" not in str(exc)
            continue
        # Read: every part the matrix takes from it works.
        assert stack_of(loaded) and machine_of(loaded, "r")
        build([(str(path), loaded)])


def test_a_malformed_fingerprint_a_huge_schema_version_and_a_long_name_are_exit_4(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.json"
    data = synthetic_report([synthetic_run(1.0)]).to_dict()
    data["fingerprint"] = {"host": "x"}
    bad.write_text(json.dumps(data))
    huge = tmp_path / "huge.json"
    data["schema"] = "l0mem.audit/1." + "9" * 5000
    huge.write_text(json.dumps(data))
    long = tmp_path / ("a" * 300 + ".json")
    for args, command in (([str(bad)], "matrix"), ([str(huge)], "matrix"), ([str(long)], "matrix"),
                          ([str(huge), str(bad)], "compare")):  # fmt: skip
        proc = run_l0mem(command, args, {})
        assert proc.returncode == 4, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


RAW_CONTROL = ("\x1b", "\x07", "\r", "\x9b", "\x7f")


def test_control_characters_in_reports_are_shown_never_sent(tmp_path: Path) -> None:
    # A fleet's report may carry a terminal's escape sequences in any label (a
    # driver version, an environment value): they are shown as their code in the
    # terminal, the Markdown and the CSV, never written raw.
    hostile = "26.05\x1b[2J\x1b]0;pwned\x07\r\x9b1m\x7f"
    a = _report(tmp_path / "a.json", hostile, "m1", 1.0, env={"X": "v\x1b[31m"})
    b = _report(tmp_path / "b.json", hostile, "m2", 0.0, env={"X": "v\x1b[31m"})
    md, csv_path = tmp_path / "m.md", tmp_path / "m.csv"
    proc = run_l0mem(
        "matrix",
        [str(a), str(b), "--markdown", str(md), "--csv", str(csv_path)],
        {"COLUMNS": "200"},
    )
    assert proc.returncode in (0, 1), proc.stderr
    compared = run_l0mem("compare", [str(a), str(b)], {"COLUMNS": "200"})
    assert compared.returncode in (0, 1), compared.stderr
    outputs = {
        "matrix stdout": proc.stdout,
        "matrix stderr": proc.stderr,
        "markdown": md.read_text(),
        "csv": csv_path.read_text(),
        "compare stdout": compared.stdout,
        "compare stderr": compared.stderr,
    }
    for name, text in outputs.items():
        assert not any(c in text for c in RAW_CONTROL), (name, text[:400])
    assert (
        "\\x1b[2J" in outputs["matrix stdout"].replace("\n", "")
        or "\\x1b" in outputs["matrix stdout"]
    )
    assert "\\x1b" in outputs["markdown"] and "\\x1b" in outputs["csv"]


def test_a_schema_name_of_any_length_is_counted_by_a_short_name(tmp_path: Path) -> None:
    for i, digits in enumerate((5000, 60)):
        (tmp_path / f"r{i}.json").write_text(json.dumps({"schema": "l0mem.audit/" + "9" * digits}))
    good = _report(tmp_path / "good.json", "26.05.1", "m1", 1.0)
    out = tmp_path / "m.json"
    proc = run_l0mem(
        "matrix",
        [str(tmp_path / "r0.json"), str(tmp_path / "r1.json"), str(good), "--json", str(out)],
        {},
    )
    assert proc.returncode == 0, proc.stderr
    kinds = json.loads(out.read_text())["not_audit_reports"]
    # Both names cut to one short label: counted together, and no line carries 5000 digits.
    assert kinds == {"audit/" + "9" * 39 + "...": 2}
    assert max(len(line) for line in (proc.stdout + proc.stderr).splitlines()) < 250


# Every kind of file that is not an audit (or run/watch) report, and what the
# line about it must say: none of them may pass for a fleet without findings.
NOT_AUDIT = {
    "p2p.json": ({"schema": "l0mem.p2p/1.1", "ok": True}, "an l0mem p2p report"),
    "allreduce.json": ({"schema": "l0mem.allreduce/1", "ok": True}, "an l0mem allreduce report"),
    "watch.json": ({"schema": "l0mem.watch/1.1", "summary": None}, "without a summary"),
    "watch2.json": ({"schema": "l0mem.watch/2.0", "summary": {}}, "a major version"),
    "future.json": ({"schema": "l0mem.audit/2.0"}, "a major version this l0mem does not read"),
    "matrix.json": ({"schema": "l0mem.matrix/1", "groups": []}, "an l0mem matrix report"),
    "other.json": ({"schema": "other/1", "x": 1}, "not an l0mem report"),
    "plain.json": ({"name": "x"}, 'not an l0mem report (no "schema")'),
}


@pytest.mark.parametrize("name", sorted(NOT_AUDIT))
def test_a_file_that_is_not_an_audit_report_is_named_and_alone_is_exit_4(
    name: str, tmp_path: Path
) -> None:
    data, said = NOT_AUDIT[name]
    path = tmp_path / name
    path.write_text(json.dumps(data))
    proc = run_l0mem("matrix", [str(path)], {})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    line = one_line(proc, "matrix")
    assert "none of the 1 file(s) given is an audit or run/watch report" in line
    assert str(path) in line and said in line, line
    assert proc.stdout == ""


def test_files_left_out_beside_reports_are_each_a_warning(tmp_path: Path) -> None:
    paths = []
    for name, (data, _) in sorted(NOT_AUDIT.items()):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(data))
    good = _report(tmp_path / "good.json", "26.05.1", "m1", 1.0)
    only = run_l0mem("matrix", [str(p) for p in paths], {})
    assert only.returncode == 4 and f"none of the {len(paths)} file(s)" in one_line(only, "matrix")
    assert "and 5 more" in only.stderr  # a fleet's worth of names is not one line's
    proc = run_l0mem("matrix", [*(str(p) for p in paths), str(good)], {})
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem matrix: warning: ")]
    assert len(warnings) == len(paths) == len(proc.stderr.splitlines())
    for path, line in zip(paths, warnings, strict=True):
        assert line.startswith(f"l0mem matrix: warning: {path}: left out: "), line
        assert NOT_AUDIT[path.name][1] in line, line
    assert "mirror 1024 (n=1)" in proc.stdout


def test_an_ambiguous_or_empty_baseline_lists_the_stacks_it_matches(reports: Path) -> None:
    proc = run_l0mem("matrix", [str(reports), "--baseline", "26."], {})
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc, "matrix")
    assert "--baseline '26.' is ambiguous: it matches 2 stacks" in line, line
    assert "'driver 26.05.1 | loader 1.21.1 | " in line and "'driver 26.14.2 | " in line, line
    assert "25.18" not in line
    for empty in ("", " "):
        proc = run_l0mem("matrix", [str(reports), "--baseline", empty], {})
        assert proc.returncode == 2 and "matches no stack" in one_line(proc, "matrix")
    # A part unique to one row names that row.
    proc = run_l0mem("matrix", [str(reports), "--baseline", "26.05.1"], {}, columns=250)
    assert proc.returncode == 0 and "driver 26.05.1" in proc.stdout and "(baseline)" in proc.stdout


def test_an_empty_report_name_is_a_usage_error_not_the_current_directory(
    reports: Path,
) -> None:
    # Path("") is "."; read as the current directory, it matrixed whatever lay there.
    proc = run_l0mem("matrix", [str(reports / "a1.json"), ""], {})
    assert proc.returncode == 2, proc.stderr
    assert "an empty name names no file" in proc.stderr and proc.stdout == ""


def test_one_machine_never_disagrees_with_itself(tmp_path: Path) -> None:
    from l0mem.audit.matrix import Cell

    # One machine's two reports (before and after a reboot) with two verdicts: n=1.
    one = _report(tmp_path / "one-a.json", "26.05.1", "m1", 1.0)
    again = _report(tmp_path / "one-b.json", "26.05.1", "m1", 0.0)
    data = json.loads(run_l0mem("matrix", [str(one), str(again), "--json", "-"], {}).stdout)
    (row,) = data["groups"][0]["rows"]
    cell = row["cells"][PEER]
    assert sorted(cell["verdicts"]) == ["clean", "mirror"] and cell["machines"] == 1
    assert cell["disagree"] is False
    proc = run_l0mem("matrix", [str(one), str(again)], {}, columns=200)
    assert "DISAGREE" not in proc.stdout and "(n=1)" in proc.stdout
    # The class: any number of runs on one machine never disagree; two machines that differ do.
    mirror, clean = synthetic_report(
        [synthetic_run(1.0, setup=PEER), synthetic_run(0.0, setup=PEER, seed=3)]
    ).runs
    failed = dataclasses.replace(mirror, status="failed", result=None)
    assert (mirror.result and mirror.result.verdict, clean.result and clean.result.verdict) == (
        "mirror",
        "clean",
    )
    for runs in ([mirror], [mirror, clean], [clean, mirror, failed], [mirror, mirror]):
        assert Cell([("m1", r) for r in runs]).disagree is False
        assert Cell([("m1", r) for r in runs] + [("m2", mirror)]).disagree is (
            len({r.status if r.result is None else r.result.verdict for r in runs} | {"mirror"}) > 1
        )


@pytest.mark.parametrize("columns", [80, 120])
def test_every_verdict_ratio_machine_count_and_stack_setting_is_whole(
    reports: Path, tmp_path: Path, columns: int
) -> None:
    out = tmp_path / "m.json"
    proc = run_l0mem("matrix", [str(reports), "--json", str(out)], {}, columns=columns)
    assert proc.returncode == 0, proc.stderr
    values: list[str] = []
    for group in json.loads(out.read_text())["groups"]:
        values.append(group["group"])
        for row in group["rows"]:
            values += row["stack"].split(" | ")  # each part of a stack: a version or a setting
            for cell in row["cells"].values():
                values += cell["verdicts"]
                values += [f"{cell['slope_mib_per_gib']:.0f}", f"(n={cell['machines']})"]
    assert "EnableDeferBacking=0" in " ".join(values)
    assert_whole_at(proc.stdout, columns, values)


def test_a_matrix_keeps_no_report_s_samples_and_the_same_cells() -> None:
    # A fleet's 10,000 reports held every sample at once (1.9 GB); the cells need the verdicts.
    from l0mem.audit.matrix import build, summarized, to_dict

    reports = [
        (
            f"r{i}.json",
            synthetic_report(
                [synthetic_run(r, setup=PEER, seed=i), synthetic_run(0.0, setup=PLAIN, seed=i + 9)],
                analysed=False,
            ),
        )
        for i, r in enumerate((1.0, 0.0, 0.5))
    ]
    light = [(src, summarized(rep)) for src, rep in reports]
    assert all(run.samples == [] and run.result is not None for _, rep in light for run in rep.runs)
    assert to_dict(build(light), [], None, {}) == to_dict(build(reports), [], None, {})


def test_a_directory_holding_no_report_is_exit_4(tmp_path: Path) -> None:
    # Inputs that hold nothing: once a legend alone and exit 0, as if the fleet were fine.
    (tmp_path / "notes.txt").write_text("not a report")
    proc = run_l0mem("matrix", [str(tmp_path)], {})
    assert proc.returncode == 4, proc.stderr
    assert one_line(proc, "matrix").startswith(f"l0mem matrix: no report in {tmp_path}")


def _unmeasured(path: Path, how: str, *, simulated: bool = False) -> Path:
    """Write an audit report that measured nothing: no run (``how`` "none"), or every set-up skipped."""
    report = synthetic_report([synthetic_run(1.0, setup=PEER), synthetic_run(0.0, setup=PLAIN)])
    skipped = [
        dataclasses.replace(r, status="skipped", result=None, samples=[], devices=[], reason="x")
        for r in report.runs
    ]
    runs = {"none": [], "one skipped": skipped[:1], "all skipped": skipped}[how]
    fingerprint = {
        "simulated": simulated,
        "host": {"kernel_release": "6.8.0", "machine_id": "m9"},
        "compute_runtime": {"driver_versions": ["26.99.9"]},
        "environment": {},
    }
    write_json(dataclasses.replace(report, runs=runs, fingerprint=fingerprint), path)
    return path


UNMEASURED = ("none", "one skipped", "all skipped")


@pytest.mark.parametrize("how", UNMEASURED)
@pytest.mark.parametrize("flags", [[], ["--json", "-"], ["--markdown", "m.md"], ["--csv", "m.csv"]])
def test_a_report_that_measured_nothing_alone_is_named_and_not_a_success(
    how: str, flags: list[str], tmp_path: Path
) -> None:
    # What the audit writes when every discovery failed (exit 6): "runs": [].
    path = _unmeasured(tmp_path / "empty.json", how)
    flags = [str(tmp_path / f) if f.startswith("m.") else f for f in flags]
    proc = run_l0mem("matrix", [str(path), *flags], {})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    line = one_line(proc, "matrix")
    assert str(path) in line and "holds no measured set-up" in line, line
    assert proc.stdout == ""


def test_reports_that_measured_nothing_are_each_named_and_none_is_a_success(
    tmp_path: Path,
) -> None:
    paths = [_unmeasured(tmp_path / f"e{i}.json", how) for i, how in enumerate(UNMEASURED)]
    other = tmp_path / "p2p.json"
    other.write_text(json.dumps(NOT_AUDIT["p2p.json"][0]))
    proc = run_l0mem("matrix", [*map(str, paths), str(other)], {})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    line = one_line(proc, "matrix")
    assert "none of the 4 file(s) given holds a measured set-up" in line, line
    assert all(str(p) in line for p in paths) and "and 1 more" in line, line  # 3 named


def test_reports_that_measured_nothing_beside_others_are_each_a_warning(tmp_path: Path) -> None:
    good = _report(tmp_path / "good.json", "26.05.1", "m1", 1.0)
    # The simulator's empty report must not make a simulator group of no cells either.
    paths = [
        _unmeasured(tmp_path / f"e{i}.json", how, simulated=i == 0)
        for i, how in enumerate(UNMEASURED)
    ]
    out = tmp_path / "m.json"
    proc = run_l0mem("matrix", [str(good), *map(str, paths), "--json", str(out)], {}, columns=250)
    assert proc.returncode == 0, proc.stderr
    warnings = proc.stderr.splitlines()
    assert len(warnings) == len(paths), proc.stderr
    for path, how, line in zip(paths, UNMEASURED, warnings, strict=True):
        assert line.startswith(f"l0mem matrix: warning: {path}: left out: "), line
        assert "holds no measured set-up" in line, line
        if how == "none":
            assert '"runs" is empty' in line, line
    assert f"not in the matrix: {len(paths)} audit report(s) that hold no measured set-up" in (
        proc.stdout
    )
    assert "26.99.9" not in proc.stdout and "simulator" not in proc.stdout
    data = json.loads(out.read_text())
    assert data["empty_reports"] == [str(p) for p in paths]
    assert [g["group"] for g in data["groups"]] == ["hardware, schema 1"]
    assert all(row["cells"] for g in data["groups"] for row in g["rows"])


# A signed zero as a token of any output: "-0", "+0", "-0.0", "-0.00".
SIGNED_ZERO = re.compile(r"(?<![\w.])[+-]0(?:\.0+)?(?![\w.])")
NEAR_ZERO = (-0.0004, -0.0001, -1e-12, -0.0, 0.0, 0.0001, 0.0004, -0.00004)


@pytest.mark.parametrize("ratios", [(r,) for r in NEAR_ZERO] + [NEAR_ZERO[:3], NEAR_ZERO[1:5]])
def test_no_matrix_number_is_a_signed_zero(ratios: tuple[float, ...]) -> None:
    from l0mem.audit.matrix import build, csv_rows, markdown, to_dict

    reports = [
        (f"r{i}.json", synthetic_report([synthetic_run(r, setup=PLAIN, seed=i)]))
        for i, r in enumerate(ratios)
    ]
    (m,) = build(reports)
    (cell,) = [c for row in m.cells.values() for c in row.values()]
    assert cell.slope is not None
    for text in (cell.text(), markdown([m]), "\n".join(",".join(r) for r in csv_rows([m]))):
        assert not SIGNED_ZERO.search(text), text
    slope = to_dict([m])["groups"][0]["rows"][0]["cells"][PLAIN]["slope_mib_per_gib"]
    assert json.dumps(slope) != "-0.0"


def test_the_matrix_of_a_clean_cell_a_hair_below_zero_shows_0(tmp_path: Path) -> None:
    a = _report(tmp_path / "a.json", "26.05.1", "m1", -0.0004)
    csv_path = tmp_path / "m.csv"
    proc = run_l0mem("matrix", [str(a), "--csv", str(csv_path)], {}, columns=250)
    assert proc.returncode == 0, proc.stderr
    assert "clean 0 (n=1)" in proc.stdout and not SIGNED_ZERO.search(proc.stdout)
    assert not SIGNED_ZERO.search(csv_path.read_text().replace(",", " "))
