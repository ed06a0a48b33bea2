"""benchmarks/noise.py: its truth, its counting, and one tiny cell end to end on the simulator."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks import noise

ROW_FIELDS = {
    "target", "ratio", "mirror_kind", "kind", "amplitude", "truth", "runs", *noise.OUTCOMES,
    "verdicts", "slope_error_median", "slope_error_max_abs", "command_s_median", "errors",
}  # fmt: skip


def test_the_truth_follows_the_simulators_configuration() -> None:
    assert noise.truth_ratio("audit:l0-peer-resident", 0.5, "peer-resident") == 0.5
    for clean in ("audit:l0", "audit:l0-multi", "audit:l0-dmabuf", "run-npr"):
        assert noise.truth_ratio(clean, 2.0, "peer-resident") == 0.0
        assert noise.truth_ratio(clean, 2.0, "all") == 2.0
    for job in ("run", "run-trace", "watch", "run-repeat"):
        assert noise.truth_ratio(job, 1.0, "peer-resident") == 1.0
    classify = noise._classifier()
    assert [classify(r) for r in (0.0, 0.09, 0.1, 0.5, 0.74, 0.75, 2.0)] == [
        "clean", "clean", "partial", "partial", "partial", "mirror", "mirror",
    ]  # fmt: skip


def test_outcomes_name_the_wrong_verdict() -> None:
    assert noise.outcome("mirror", "mirror") == "right"
    assert noise.outcome("clean", "mirror") == "wrong-clean"
    assert noise.outcome("mirror", "clean") == "wrong-mirror"
    assert noise.outcome("partial", "clean") == "wrong-partial"
    assert noise.outcome("inconclusive", "clean") == "inconclusive"
    assert noise.outcome(None, "clean") == "error"


def test_quiet_has_one_cell_and_every_other_kind_one_per_amplitude() -> None:
    config = noise.Config(commands=("audit", "run"), ratios=(0.0, 1.0), kinds=("quiet", "anon"),
                          amplitudes=(256 << 20, 768 << 20), mirror_kinds=("memfd",))  # fmt: skip
    got = noise.cells(config)
    assert len(got) == 2 * 2 * (1 + 2)
    assert {c.amplitude for c in got if c.kind == "quiet"} == {None}
    assert len(noise.targets(got[0], config)) == len(noise.SETUPS)


def test_summarize_counts_and_measures_the_slope_error() -> None:
    base = {"target": "run", "ratio": 1.0, "mirror_kind": "memfd", "kind": "anon",
            "amplitude": 768 << 20, "truth": "mirror", "command_s": 10.0}  # fmt: skip
    results = [
        {**base, "verdict": "mirror", "slope": 1000.0, "slope_error": -24.0, "outcome": "right", "error": None},
        {**base, "verdict": "clean", "slope": 0.0, "slope_error": -1024.0, "outcome": "wrong-clean", "error": None},
        {**base, "verdict": None, "slope": None, "slope_error": None, "outcome": "error", "error": "exit 6: x"},
    ]  # fmt: skip
    (row,) = noise.summarize(results)
    assert row["runs"] == 3 and row["right"] == 1 and row["wrong-clean"] == 1 and row["error"] == 1
    assert row["slope_error_median"] == -524.0 and row["slope_error_max_abs"] == 1024.0
    assert row["errors"] == ["exit 6: x"]
    text = noise.table([row])
    assert "wr-clean" in text and "error: exit 6: x" in text
    assert noise.total_line([row]) == (
        "total: 1/3 right (33%), 1 wrong-clean, 0 wrong-mirror, 0 wrong-partial, "
        "0 inconclusive, 1 error"
    )


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert noise.main(["--commands", "audit,nope"]) == 2
    assert "unknown nope" in capsys.readouterr().err
    assert noise.main(["--ratios", "65"]) == 2


TINY = noise.Config(
    commands=("audit",), ratios=(1.0,), kinds=("quiet",), mirror_kinds=("memfd",), runs=1,
    setups=("l0",), size="64M", warmup=0.0, timeout=120.0,
)  # fmt: skip


@pytest.mark.slow
def test_one_quiet_audit_cell_end_to_end_gives_a_row_with_a_verdict(tmp_path: Path) -> None:
    results, complete = noise.measure(dataclasses.replace(TINY, keep=tmp_path))
    # Its report and log are kept, named after the cell and the run.
    kept = tmp_path / "audit-r1-memfd-quiet-run0"
    assert {p.name for p in kept.iterdir()} == {"audit.json", "audit.log"}
    assert complete and len(results) == 1
    (r,) = results
    assert r["error"] is None, r["error"]
    assert r["target"] == "audit:l0" and r["truth"] == "clean" and r["truth_slope"] == 0.0
    assert r["verdict"] in noise.VERDICTS and r["outcome"] in noise.OUTCOMES
    assert (r["slope"] is None) == (r["slope_error"] is None)
    (row,) = noise.summarize(results)
    assert set(row) == ROW_FIELDS
    assert row["runs"] == 1 and sum(row[o] for o in noise.OUTCOMES) == 1
    assert sum(row["verdicts"].values()) == 1 and row["verdicts"][r["verdict"]] == 1
    assert 0 < row["command_s_median"] < 120


def test_a_configuration_the_simulator_refuses_is_an_error_row_not_a_crash() -> None:
    # Refused as the simulator refuses a mirror kind it does not know: zeInit fails.
    refused = dataclasses.replace(TINY, ratios=(65.0,))  # above the simulator's 64
    results, complete = noise.measure(refused)
    assert complete and [r["outcome"] for r in results] == ["error"]
    assert results[0]["verdict"] is None and results[0]["slope"] is None
    error = results[0]["error"]
    assert "zesim: bad configuration" in error or "zeInit" in error, error
    (row,) = noise.summarize(results)
    assert row["error"] == 1 and row["errors"] == [error]
