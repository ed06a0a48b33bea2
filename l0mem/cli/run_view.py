"""What ``l0mem run`` and ``l0mem watch`` show: a live view, a line per sample, the summary.

On a terminal a rich live table is redrawn at every sample (per device VRAM
and GTT, the host cost beyond the baseline, the current ratio, peaks); off a
terminal (CI logs) each sample is one plain line; ``--quiet`` shows neither.
The summary at the end opens with the answer (:func:`answer_lines`: the
verdict and by how much, why, what to do, in at most five lines), then the
peaks, on which device the host pages were charged and what was unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from l0mem.cli._common import escape
from l0mem.cli.fits_view import fits_table
from l0mem.cli.layout import fitted, whole
from l0mem.estimate import SetupAnalysis, undecided_reason
from l0mem.units import fixed, format_bytes
from l0mem.watch import (
    BASELINE_WAIT,
    DeviceMemoryReader,
    Series,
    WatchResult,
    WatchSample,
    WatchSummary,
    device_label,
    drm_devices,
    drm_memory,
    host_cost,
    live_ratio,
)
from l0mem.watch.export import simulated

MAX_ANSWER = 5  # verdict and amount, why, what to do, a stop at the host floor


def _size(value: int | None) -> str:
    return "n/a" if value is None else format_bytes(value)


def _signed(value: int | None) -> str:
    if value is None:
        return "n/a"
    if not value:
        return format_bytes(0)  # no change: neither + nor -
    return ("+" if value > 0 else "-") + format_bytes(abs(value))


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else fixed(value, 2)


def _seconds(t: float) -> str:
    return fixed(t, 1)


def sample_line(series: Series, sample: WatchSample) -> str:
    """Return one plain line describing ``sample`` (for logs that are not a terminal)."""
    parts = [
        f"t={_seconds(sample.t)}s",
        f"pids={sample.pids}",
        f"host {_signed(host_cost(series, sample))}",
        f"device {_size(series.device_memory(sample.values))}",
        f"ratio {_ratio(live_ratio(series, sample))}",
    ]
    for pdev in drm_devices((sample,)):
        vram = drm_memory(sample.values, pdev, host=False)
        gtt = drm_memory(sample.values, pdev, host=True)
        parts.append(f"{pdev} vram {_size(vram)} gtt {_size(gtt)}")
    return " ".join(parts)


class _Peaks:
    """The largest values seen so far, for the live view."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def see(self, key: str, value: int | None) -> int | None:
        if value is not None:
            self.values[key] = max(value, self.values.get(key, value))
        return self.values.get(key)


def live_table(series: Series, sample: WatchSample, peaks: _Peaks) -> Table:
    """Return the live view's table for the newest ``sample``."""
    title = f"t={_seconds(sample.t)} s, {sample.pids} process(es)"
    table = Table(title=title, title_justify="left")
    table.add_column("what")
    table.add_column("now", justify="right")
    table.add_column("peak", justify="right")
    cost = host_cost(series, sample)
    table.add_row("host cost beyond baseline", _signed(cost), _signed(peaks.see("host", cost)))
    device = series.device_memory(sample.values)
    table.add_row(
        device_label(series.device_source or "drm"),
        _size(device),
        _size(peaks.see("device", device)),
    )
    table.add_row("host per device byte", _ratio(live_ratio(series, sample)), "")
    for pdev in drm_devices((sample,)):
        for host, name in ((False, "VRAM"), (True, "GTT")):
            v = drm_memory(sample.values, pdev, host=host)
            table.add_row(f"{pdev} {name}", _size(v), _size(peaks.see(f"{pdev}{name}", v)))
    rss = sample.values.get("tree.VmRSS")
    table.add_row("tree VmRSS", _size(rss), _size(peaks.see("rss", rss)))
    return table


# How long Sysman's reader may take to load the driver before run and watch say they wait.
QUIET_WAIT = 1.0


class Progress:
    """Shows each sample as it comes: a live table on a terminal, else a line; nothing when quiet."""

    def __init__(self, console: Console, command: str, *, quiet: bool, live: bool) -> None:
        self.console = console
        self.command = command
        self.quiet = quiet
        self.live: Live | None = None
        self.peaks = _Peaks()
        if not quiet and live:
            self.live = Live(console=console, auto_refresh=False, transient=True)

    def __enter__(self) -> Progress:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.stop()

    def note(self, text: str) -> None:
        """Show one line of progress (nothing when quiet)."""
        if not self.quiet:
            self.console.print(f"l0mem {self.command}: {text}", soft_wrap=True, markup=False)

    def await_reader(
        self, reader: DeviceMemoryReader | None, then: str, stop: Callable[[], bool]
    ) -> None:
        """Wait a moment for Sysman's reader; past it, say what is awaited before the baseline waits on.

        A driver hung in zeInit holds the reader for the whole wait: without
        this line the command would sit silent that long.
        """
        if reader is not None and not reader.wait_ready(QUIET_WAIT, stop) and not stop():
            self.note(
                "Sysman's reader has not loaded the Level Zero driver within "
                f"{fixed(QUIET_WAIT)} s; waiting up to {fixed(BASELINE_WAIT)} s "
                f"more, then {then} without"
                " its device memory count (--no-sysman skips it)"
            )

    def __call__(self, series: Series, sample: WatchSample) -> None:
        """Show ``sample``."""
        if self.quiet:
            return
        if self.live is not None:
            self.live.update(live_table(series, sample, self.peaks), refresh=True)
        else:
            self.console.print(
                f"l0mem {self.command}: {sample_line(series, sample)}", soft_wrap=True
            )


def answer_lines(result: WatchResult, summary: WatchSummary) -> list[str]:
    """Return the answer, at most :data:`MAX_ANSWER` lines of markup: verdict and amount, why, what to do."""
    analysis = summary.analysis
    slope = analysis.slope
    fit = analysis.fit(analysis.deciding_signal) if analysis.deciding_signal else None
    head = f"verdict: [bold]{analysis.verdict}[/bold]"
    if simulated(result):
        head = f"[bold]SIMULATOR[/bold] (l0mem's simulated driver: not a hardware result) {head}"
    if slope is not None and fit is not None:
        head += (
            f", {fixed(slope)} +/- {fixed(fit.uncertainty or 0)} MiB host per GiB device "
            f"(ratio {_ratio(analysis.ratio)}, by {analysis.deciding_signal})"
        )
    lines = [head, f"  {escape(_brief_reason(analysis))}"]
    if analysis.next_steps is not None:
        lines.append(f"  what to do: {escape(analysis.next_steps.text)}")
    elif analysis.verdict in ("mirror", "partial"):
        lines.append(f"  what to do: {escape(remedy_hint(result.trace))}")
    if result.floor_stop is not None:
        # The run did not end on its own: part of the answer, not a detail.
        lines.append(f"[bold]{escape(result.floor_stop.message)}[/bold]")
    return lines


def _listed_apart(analysis: SetupAnalysis) -> bool:
    """Return whether the reason is the list of several signals passed over (answered by its first)."""
    passed = analysis.passed_over
    return len(passed) >= 2 and analysis.reason == undecided_reason(passed)


def _brief_reason(analysis: SetupAnalysis) -> str:
    """Return the reason for the answer: a list of signals passed over as its first and how many more."""
    if _listed_apart(analysis):
        return undecided_reason(analysis.passed_over, shown=1, more="more below")
    return analysis.reason


def _passed_over_lines(analysis: SetupAnalysis) -> list[str]:
    """Return each signal the estimation passed over and why, for the details the answer points to."""
    if not _listed_apart(analysis):
        return []
    return [f"  {escape(name)}: {escape(why)}" for name, why in analysis.passed_over.items()]


def summary_view(
    result: WatchResult,
    summary: WatchSummary,
    unavailable: dict[str, str],
    console: Console,
    *,
    answer_only: bool = False,
    verbose: bool = False,
) -> Group:
    """Return the summary shown at the end: the answer first, then peaks, charged device, gaps.

    ``verbose`` adds every signal's fit; ``answer_only`` stops after the answer.
    """
    lines: list[Any] = [whole(line) for line in answer_lines(result, summary)]
    if answer_only:
        return Group(*lines)
    lines.append("")
    rows = [
        (name, *_peak_cells(peak))
        for name, peak in (
            ("host cost beyond baseline", summary.host_cost),
            (device_label(summary.device_source), summary.device_memory),
            ("tree VmRSS growth", summary.tree_rss),
            ("Shmem growth", summary.shmem),
            ("cgroup growth", summary.cgroup),
        )
    ]
    for d in summary.devices:
        rows.append((f"{d.pdev} VRAM", *_peak_cells(d.vram)))
        rows.append((f"{d.pdev} GTT", *_peak_cells(d.gtt)))
    passed = _passed_over_lines(summary.analysis)
    if passed:
        lines += ["signals passed over:", *passed, ""]
    lines.append(fitted(console, "peaks", ("what", "peak", "at"), rows, right=("peak", "at")))
    # Why a peak is unavailable is a sentence under the table, not a cell that widens it.
    said = set(unavailable.values())
    missing = [summary.host_cost, summary.device_memory, summary.tree_rss, summary.shmem]
    missing += [summary.cgroup, *(p for d in summary.devices for p in (d.vram, d.gtt))]
    for why in dict.fromkeys(p.unavailable for p in missing if p.bytes is None and p.unavailable):
        if why.partition(": ")[2] not in said:
            lines.append(f"[dim]unavailable: {escape(why)}[/dim]")
    if verbose:
        fits = fits_table(console, "every signal's fit", summary.analysis)
        if fits is not None:
            lines.append(fits)
    if summary.charged_to is not None:
        lines.append(
            f"host pages charged to DRM device {summary.charged_to} (its GTT/system regions grew most)"
        )
    if summary.vmrss_would_miss:
        lines.append(
            "VmRSS alone would have missed it: the tree's VmRSS grew far less than the host cost"
        )
    resident = summary.per_resident_gib
    if resident is not None and resident.slope is not None:
        lines.append(
            f"per GiB made resident on a peer: {fixed(resident.slope)} +/- "
            f"{fixed(resident.uncertainty or 0)} MiB host"
        )
    if result.trace is not None:
        lines += trace_lines(result.trace)
    if result.runs is not None:
        lines.append(
            f"the workload ran {result.runs} time(s), one run after another, its climbs judged "
            "together (--repeat)"
        )
    if result.outlived is not None:
        o = result.outlived
        text = (
            f"{o.processes} process(es) the workload started ran on after its first one ended: "
            f"followed for {_seconds(o.seconds)} s more"
        )
        if o.left_running:
            pids = ", ".join(str(p) for p in o.left_running[:8]) + (
                ", ..." if len(o.left_running) > 8 else ""
            )
            text += f"; left running, unwatched: pid {pids}"
        else:
            text += ", until they ended"
        lines.append(text)
    for key, why in sorted(unavailable.items()):
        lines.append(f"[dim]unavailable: {escape(key)}: {escape(why)}[/dim]")
    return Group(*lines)


def remedy_hint(trace: dict[str, Any] | None) -> str:
    """Return what to try against a mirror the run saw, from what the tracer saw (None: untraced)."""
    audit = "l0mem audit --remedies measures which driver setting removes it, and what each costs"
    if trace is None:
        return (
            "measure it with l0mem run --trace -- CMD to see whether the workload makes its "
            f"memory resident on a peer (then --no-peer-residency may avoid the mirror); {audit}"
        )
    resident = sum(
        sum((d.get("resident_on_peak") or {}).values()) for d in trace.get("devices", ())
    )
    if trace.get("skipped_calls"):
        return f"--no-peer-residency did not avoid it: the mirror comes from elsewhere; {audit}"
    if resident:
        return (
            f"the workload made {format_bytes(resident)} resident on a peer: "
            "--no-peer-residency skips those calls (check the job's results and speed: a peer "
            f"that reads that memory pays at first touch); {audit}"
        )
    return f"the workload made nothing resident on a peer: the mirror comes with the allocations; {audit}"


def trace_lines(trace: dict[str, Any]) -> list[str]:
    """Return what the tracer attributes: per device, bytes allocated and made resident on peers."""
    lines = []
    for d in trace.get("devices", ()):
        text = (
            f"traced device {d['index']} ({d.get('name') or 'unnamed'}): "
            + format_bytes(d.get("allocated_peak", 0))
            + " allocated at the peak"
        )
        for peer, nbytes in sorted((d.get("resident_on_peak") or {}).items()):
            text += f", {format_bytes(nbytes)} made resident on device {peer}"
        lines.append(text)
    failed = trace.get("failed_calls") or {}
    if failed:
        lines.append("failed calls: " + ", ".join(f"{k} {v}" for k, v in sorted(failed.items())))
    if trace.get("skipped_calls"):
        lines.append(
            f"--no-peer-residency skipped {trace['skipped_calls']} zeContextMakeMemoryResident "
            f"call(s) on a peer, {format_bytes(trace.get('skipped_bytes', 0))}"
        )
    if trace.get("lost_records"):
        lines.append(f"[bold]{trace['lost_records']} trace record(s) were lost[/bold]")
    return lines


def _peak_cells(peak: Any) -> tuple[str, str]:
    if peak.bytes is None:
        return "unavailable", ""
    return format_bytes(peak.bytes), f"{_seconds(peak.t)} s"


__all__ = [
    "MAX_ANSWER",
    "Progress",
    "answer_lines",
    "live_table",
    "remedy_hint",
    "sample_line",
    "summary_view",
]
