"""Comparing two reports: matching, regressions, improvements, unjudged and unmatched runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from l0mem.audit.compare import (
    COMPARE_SCHEMA,
    ReportMismatchError,
    compare_reports,
    load_pair,
)
from l0mem.audit.model import ReportFormatError, SetupRun
from tests.test_analysis import synthetic_report, synthetic_run

DATA = Path(__file__).parent / "data" / "reports"


def _pair(
    before: list[SetupRun],
    after: list[SetupRun],
    tolerance: float = 64.0,
    allow_unjudged: bool = False,
):
    return compare_reports(
        synthetic_report(before),
        synthetic_report(after),
        tolerance,
        allow_unjudged=allow_unjudged,
    )


def test_identical_reports_have_no_regression() -> None:
    runs = [synthetic_run(1.0), synthetic_run(0.0, setup="l0")]
    result = _pair(runs, runs)
    assert [c.label for c in result.changes] == ["sycl", "l0"]
    assert result.regressions == [] and result.missing == [] and result.new == []
    assert all(c.note == "" for c in result.changes)


@pytest.mark.parametrize(("before", "after"), [(0.0, 0.5), (0.0, 1.0), (0.5, 1.0)])
def test_worse_verdict_is_a_regression(before: float, after: float) -> None:
    result = _pair([synthetic_run(before)], [synthetic_run(after)], tolerance=10_000.0)
    (change,) = result.changes
    assert change.regression is True
    assert "verdict worse" in change.note


def test_better_verdict_is_not_a_regression() -> None:
    (change,) = _pair([synthetic_run(1.0)], [synthetic_run(0.0)]).changes
    assert change.regression is False
    assert change.note == "verdict better: mirror -> clean"
    assert change.slope_change == pytest.approx(-1024.0, abs=1e-3)


def test_slope_rise_beyond_tolerance_within_one_verdict() -> None:
    # 0.80 -> 0.95 of 1:1 stays "mirror" but costs 154 MiB more per GiB.
    before, after = [synthetic_run(0.80)], [synthetic_run(0.95)]
    (change,) = _pair(before, after, tolerance=64.0).changes
    assert (change.baseline_verdict, change.current_verdict) == ("mirror", "mirror")
    assert change.regression is True and "slope up 154 MiB/GiB" in change.note
    (tolerated,) = _pair(before, after, tolerance=200.0).changes
    assert tolerated.regression is False


def test_inconclusive_or_skipped_current_is_not_judged() -> None:
    noisy = synthetic_run(1.0, noise_mib=900.0, seed=4)
    skipped = dataclasses.replace(
        synthetic_run(setup="l0"), status="skipped", reason="no device", samples=[]
    )
    before = [synthetic_run(0.0), synthetic_run(0.0, setup="l0")]
    result = _pair(before, [noisy, skipped], allow_unjudged=True)
    assert [c.regression for c in result.changes] == [False, False]
    assert result.changes[0].current_verdict == "inconclusive"
    assert result.changes[1].note == "not judged: current run skipped (no device)"
    # By default a verdict that turned inconclusive is a regression; a skip is still not.
    strict = _pair(before, [noisy, skipped])
    assert [c.regression for c in strict.changes] == [True, False]
    assert strict.changes[0].note.startswith("no verdict now: clean -> inconclusive (ok)")


def test_a_judged_run_that_fails_or_goes_missing_regresses_by_default() -> None:
    failed = synthetic_run(1.0, status="failed", reason="DEVICE_LOST", seed=2)
    before = [synthetic_run(0.0), synthetic_run(0.5, setup="l0")]
    result = _pair(before, [failed])
    (change,) = result.changes
    assert change.regression is True
    assert change.note == "no verdict now: clean -> failed (DEVICE_LOST)"
    assert result.missing == [("l0", None)] and result.lost == [("l0", None)]
    assert result.regressed and result.to_dict()["lost"] == [{"setup": "l0", "remedy": None}]
    relaxed = _pair(before, [failed], allow_unjudged=True)
    assert relaxed.changes[0].regression is False and relaxed.lost == []
    assert relaxed.changes[0].note == "not judged: current run failed (DEVICE_LOST)"
    assert not relaxed.regressed and relaxed.missing == [("l0", None)]


def test_a_run_without_a_verdict_in_the_baseline_is_unjudged_and_fails_unless_allowed() -> None:
    noisy = synthetic_run(1.0, noise_mib=900.0, seed=4)
    skipped = dataclasses.replace(
        synthetic_run(setup="l0"), status="skipped", reason="one device", samples=[]
    )
    result = _pair([noisy, skipped], [synthetic_run(1.0)])
    assert result.lost == [] and result.regressed
    (change,) = result.changes
    assert change.regression is True and change.judged is False
    assert change.note == "not judged: the baseline run has no verdict (inconclusive) -> mirror"
    assert result.unjudged == [change] and result.to_dict()["changes"][0]["judged"] is False
    relaxed = _pair([noisy, skipped], [synthetic_run(1.0)], allow_unjudged=True)
    assert not relaxed.regressed and relaxed.unjudged == []
    assert relaxed.changes[0].note == change.note


@pytest.mark.parametrize("now", [0.0, 1.0, None])
def test_whatever_the_current_run_says_an_unjudged_baseline_is_never_a_pass(
    now: float | None,
) -> None:
    noisy = synthetic_run(0.5, noise_mib=900.0, seed=4)
    current = synthetic_run(0.5, noise_mib=900.0, seed=5) if now is None else synthetic_run(now)
    (change,) = _pair([noisy], [current]).changes
    assert change.regression is True and not change.judged


def test_simulator_and_hardware_reports_are_a_mismatch() -> None:
    real = synthetic_report([synthetic_run(0.0)])
    sim = dataclasses.replace(real, fingerprint={"simulated": True})
    with pytest.raises(ReportMismatchError, match="simulated Level Zero driver"):
        compare_reports(real, sim)
    with pytest.raises(ReportMismatchError, match="simulated Level Zero driver and current from hardware: numbers from different platforms"):
        compare_reports(sim, real)
    assert compare_reports(sim, sim).simulated is True


def test_failed_baseline_is_not_judged_and_fails_unless_allowed() -> None:
    failed = dataclasses.replace(synthetic_run(0.0), status="failed", reason="crash")
    report = synthetic_report([failed])
    report = dataclasses.replace(report, runs=[dataclasses.replace(report.runs[0], result=None)])
    result = compare_reports(report, synthetic_report([synthetic_run(1.0)]))
    assert result.changes[0].regression is True
    assert result.changes[0].note == "not judged: the baseline run has no verdict (failed (crash)) -> mirror"
    relaxed = compare_reports(report, synthetic_report([synthetic_run(1.0)]), allow_unjudged=True)
    assert relaxed.changes[0].regression is False


def test_runs_are_matched_by_setup_and_remedy() -> None:
    before = [
        synthetic_run(1.0),
        synthetic_run(0.0, remedy="affinity"),
        synthetic_run(0.0, setup="l0"),
    ]
    after = [
        synthetic_run(1.0),
        synthetic_run(1.0, remedy="affinity"),
        synthetic_run(0.0, setup="l0-dmabuf"),
    ]
    result = _pair(before, after)
    assert [c.label for c in result.changes] == ["sycl", "sycl [affinity]"]
    assert [c.regression for c in result.changes] == [False, True]
    assert result.missing == [("l0", None)]
    assert result.new == [("l0-dmabuf", None)]


def test_no_runs_in_common_gives_no_changes() -> None:
    result = _pair([synthetic_run(1.0)], [synthetic_run(1.0, setup="l0")])
    assert result.changes == [] and len(result.missing) == 1 and len(result.new) == 1


def test_unanalysed_reports_are_analysed_before_comparing() -> None:
    before = synthetic_report([synthetic_run(0.0)], analysed=False)
    after = synthetic_report([synthetic_run(1.0)], analysed=False)
    (change,) = compare_reports(before, after).changes
    assert (change.baseline_verdict, change.current_verdict) == ("clean", "mirror")
    assert change.regression is True


def test_changed_deciding_signal_is_noted() -> None:
    (change,) = _pair([synthetic_run(1.0)], [synthetic_run(1.0, gpu_active=True, noise_mib=700.0, seed=3)]).changes
    assert "deciding signal changed: meminfo.MemAvailable -> meminfo.GPUActive" in change.note


def test_comparison_json() -> None:
    result = _pair([synthetic_run(0.0)], [synthetic_run(1.0)])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == COMPARE_SCHEMA and data["regression"] is True
    assert data["changes"][0]["slope_change"] == pytest.approx(1024.0, abs=1e-3)


def test_negative_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="slope tolerance"):
        _pair([synthetic_run(0.0)], [synthetic_run(0.0)], tolerance=-1.0)


def test_load_pair_from_fixtures() -> None:
    before, after = load_pair(DATA / "baseline.json", DATA / "current-regressed.json")
    result = compare_reports(before, after)
    assert {c.label for c in result.regressions} == {"l0", "sycl-single"}


def test_load_pair_schema_major_mismatch_and_bad_input() -> None:
    with pytest.raises(ReportMismatchError, match="schema major versions differ"):
        load_pair(DATA / "baseline.json", DATA / "schema-v2.json")
    with pytest.raises(ReportFormatError, match="unsupported schema version"):
        load_pair(DATA / "schema-v2.json", DATA / "schema-v2.json")
    with pytest.raises(ReportFormatError, match="no such file"):
        load_pair(DATA / "baseline.json", DATA / "absent.json")


def test_a_failed_run_against_an_unjudged_baseline_is_not_a_pass() -> None:
    noisy = synthetic_run(1.0, noise_mib=900.0, seed=4)
    failed = synthetic_run(1.0, status="failed", reason="DEVICE_LOST", steps=2, seed=2)
    (change,) = _pair([noisy], [failed]).changes
    assert change.regression is True and change.judged is False
    assert change.note == "not judged: the baseline run has no verdict (inconclusive) -> failed"
    # A verdict lost to failure is a regression, judged against the baseline's verdict.
    (lost,) = _pair([synthetic_run(1.0)], [failed]).changes
    assert lost.regression is True and lost.judged is True
