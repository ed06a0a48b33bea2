"""What run and watch show: the line per sample, the live table, the summary, the files."""

from __future__ import annotations

import csv
import io

import pytest
from rich.console import Console

from l0mem.cli.run_view import (
    MAX_ANSWER,
    Progress,
    answer_lines,
    live_table,
    remedy_hint,
    sample_line,
    summary_view,
)
from l0mem.watch.engine import FloorStop, WatchResult
from l0mem.watch.export import csv_text
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.support.watch_series import climbing_series

GIB = 1 << 30
PDEV = "0000:10:00.0"


def _series() -> Series:
    return climbing_series()


def _console(width: int = 200) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=False)


def _text(renderable: object, width: int = 200) -> str:
    console = _console(width)
    console.print(renderable, crop=False)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


def test_a_line_per_sample_names_host_cost_device_ratio_and_each_device() -> None:
    series = _series()
    line = sample_line(series, series.samples[1])
    assert line == (
        f"t=1.0s pids=2 host +2.00 GiB device 2.00 GiB ratio 1.00 {PDEV} vram 2.00 GiB gtt 1.00 GiB"
    )


def test_the_live_table_shows_now_and_peaks() -> None:
    series = _series()
    progress = Progress(Console(file=io.StringIO()), "run", quiet=False, live=False)
    for s in series.samples:
        table = live_table(series, s, progress.peaks)
    # A workload that gave memory back: now is below the peak.
    low = WatchSample(3.0, {**series.samples[0].values}, 2)
    text = _text(live_table(series, low, progress.peaks))
    assert "+1.00 GiB" in text and "+5.00 GiB" in text  # now, and the peak
    assert f"{PDEV} GTT" in text and "2.50 GiB" in text
    assert table is not None


def test_quiet_shows_nothing() -> None:
    out = io.StringIO()
    progress = Progress(Console(file=out), "run", quiet=True, live=False)
    series = _series()
    progress(series, series.samples[0])
    assert out.getvalue() == ""


def test_the_summary_says_verdict_peaks_charged_device_floor_and_gaps() -> None:
    series = _series()
    result = WatchResult(series, -15, FloorStop(2.5, 3 * GIB, 2 * GIB, "SIGTERM", True), None, None)
    text = _text(summary_view(result, summarize(series), dict(series.unavailable), _console()))
    assert text.startswith("verdict: mirror, 1024 +/- 0 MiB host per GiB device")
    assert f"host pages charged to DRM device {PDEV}" in text
    assert "killed (SIGKILL)" in text
    assert "unavailable: cgroup: no cgroup v2 here" in text
    assert "cgroup growth" in text and "no cgroup v2 here" in text


def test_the_csv_has_a_row_per_sample_and_empty_cells_for_absent_signals() -> None:
    series = _series()
    rows = list(csv.DictReader(io.StringIO(csv_text(series))))
    assert len(rows) == 1 + len(series.samples)
    assert rows[0]["t"] == "0.0" and rows[0]["tree.VmRSS"] == ""  # the baseline lacks it
    assert rows[0]["host_cost"] == "0"
    assert int(rows[3]["host_cost"]) == 3 * GIB
    assert int(rows[3][f"vram.{PDEV}"]) == 3 * GIB


def test_the_hint_against_a_mirror_follows_what_the_tracer_saw() -> None:
    untraced = remedy_hint(None)
    assert "l0mem run --trace -- CMD" in untraced and "l0mem audit --remedies" in untraced
    resident = {"devices": [{"index": 0, "resident_on_peak": {"1": GIB, "2": GIB}}], "skipped_calls": 0}
    assert "made 2.00 GiB resident on a peer: --no-peer-residency" in remedy_hint(resident)
    skipped = {**resident, "skipped_calls": 8}
    assert remedy_hint(skipped).startswith("--no-peer-residency did not avoid it")
    none = {"devices": [{"index": 0, "resident_on_peak": {}}], "skipped_calls": 0}
    assert remedy_hint(none).startswith("the workload made nothing resident on a peer")


def _floor_stopped() -> tuple[WatchResult, Series]:
    series = _series()
    return WatchResult(series, -15, FloorStop(2.5, 3 * GIB, 2 * GIB, "SIGTERM", True), None, None), series


def test_the_answer_comes_first_in_at_most_five_lines_and_answer_only_is_it_alone() -> None:
    result, series = _floor_stopped()
    summary = summarize(series)
    answer = answer_lines(result, summary)
    assert len(answer) <= MAX_ANSWER
    assert answer[0].startswith("verdict: [bold]mirror[/bold], 1024 +/- 0 MiB host per GiB device")
    assert any(line.startswith("  what to do: ") for line in answer)
    assert "killed (SIGKILL)" in answer[-1]
    alone = _text(summary_view(result, summary, dict(series.unavailable), _console(), answer_only=True))
    full = _text(summary_view(result, summary, dict(series.unavailable), _console()))
    assert full.startswith(alone + "\n")  # the answer, a blank line, then the details
    assert len(alone.splitlines()) == len(answer) and "peaks" not in alone


def test_verbose_adds_every_signals_fit() -> None:
    result, series = _floor_stopped()
    summary = summarize(series)
    plain = _text(summary_view(result, summary, {}, _console()))
    verbose = _text(summary_view(result, summary, {}, _console(), verbose=True))
    assert "every signal's fit" not in plain
    assert "every signal's fit" in verbose and "deciding" in verbose
    for fit in summary.analysis.host:
        assert fit.signal in verbose


@pytest.mark.parametrize("width", [80, 120])
def test_the_summary_at_80_and_120_columns_cuts_no_number_or_reason(width: int) -> None:
    result, series = _floor_stopped()
    summary = summarize(series)
    text = _text(summary_view(result, summary, dict(series.unavailable), _console(width), verbose=True), width)
    assert "…" not in text
    flat = " ".join(text.split())
    for value in (summary.analysis.reason, "1024 +/- 0 MiB host per GiB device", "5.00 GiB"):
        assert " ".join(value.split()) in flat
    # A stacked row or a table row: each peak's cell is whole on one line.
    assert "cgroup growth" in text and "no cgroup v2 here" in text
    table = [ln for ln in text.splitlines() if ln[:1] in set("┏┃┡│└")]
    assert all(len(ln) <= width for ln in table)


def test_an_undecided_answer_names_the_first_signal_and_the_details_name_every_one() -> None:
    import dataclasses

    # The answer's second line listed every signal passed over and why (300-500
    # characters): the answer gives the first one and how many more; the details all.
    series = _series()
    summary = summarize(series)
    passed = {
        "host.available": "its interval -101 to 149 MiB/GiB spans two verdicts",
        "meminfo.MemAvailable": "misses memory taken from the per-CPU free lists",
        "meminfo.Shmem": "one component of the host's loss: it cannot show that a run is clean",
    }
    undecided = dataclasses.replace(
        summary.analysis,
        verdict="inconclusive",
        reason="no host signal could decide ("
        + "; ".join(f"{k}: {v}" for k, v in passed.items())
        + ")",
        passed_over=passed,
    )
    summary = dataclasses.replace(summary, analysis=undecided)
    result = WatchResult(series, 0, None, None, None)
    answer = answer_lines(result, summary)
    assert answer[1] == (
        "  no host signal could decide (host.available: its interval -101 to 149 MiB/GiB "
        "spans two verdicts; 2 more below)"
    ), answer
    full = _text(summary_view(result, summary, dict(series.unavailable), _console()))
    for name, why in passed.items():
        assert f"  {name}: {why}" in full, full
    alone = _text(summary_view(result, summary, {}, _console(), answer_only=True))
    assert "meminfo.Shmem" not in alone
    # A reason of another kind (no device memory seen) is the answer as it is.
    other = dataclasses.replace(undecided, reason="no device memory was seen")
    summary = dataclasses.replace(summary, analysis=other)
    assert answer_lines(result, summary)[1] == "  no device memory was seen"
    assert "signals passed over" not in _text(summary_view(result, summary, {}, _console()))
