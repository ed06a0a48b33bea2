"""What run and watch show: the line per sample, the live table, the summary, the files."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from l0mem.cli.run_view import Progress, live_table, remedy_hint, sample_line, summary_view
from l0mem.watch.engine import FloorStop, WatchResult
from l0mem.watch.export import csv_text
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize

GIB = 1 << 30
PDEV = "0000:10:00.0"


def _series() -> Series:
    base = WatchSample(0.0, {"host.available": 32 * GIB})
    samples = tuple(
        WatchSample(
            0.5 * i,
            {
                "host.available": 32 * GIB - i * GIB,
                f"drm.{PDEV}.vram0.total": i * GIB,
                f"drm.{PDEV}.gtt.total": i * GIB // 2,
                "tree.VmRSS": 100 << 20,
            },
            2,
        )
        for i in range(1, 6)
    )
    return Series(base, samples, {"cgroup": "no cgroup v2 here"})


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    console.print(renderable)
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
    text = _text(summary_view(result, summarize(series), dict(series.unavailable)))
    assert text.startswith("verdict: mirror, 1024 +/- 0 MiB host per GiB device")
    assert f"host pages charged to DRM device {PDEV}" in text
    assert "killed (SIGKILL)" in text
    assert "unavailable: cgroup: no cgroup v2 here" in text
    assert "unavailable (cgroup.memory.current: no cgroup v2 here)" in text


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
