"""The pauses' check on a watched job's verdict: what the same windows make of the host where nothing changed.

A step window's edges move outward while the host's cost keeps moving the
step's way (:mod:`l0mem.watch.windows`). Beside another process that keeps
taking memory (a churning neighbour, a climb with jumps in it) every window
is then widened over that process's rises too, and every one reads high the
same way: the windows agree with each other, and their interval, which
holds only the scatter among them, lies off the truth. The pauses between
the windows show it: windows made by the same rule where device memory held
still (:func:`~l0mem.watch.windows.pause_windows`) cost what the other
processes and the rule alone make. Where their median lies off zero beyond
its own interval, the step windows' interval is widened by as much as that
median may be, on that side only (it never narrows, and the slope stays),
and the verdict stands only where the widened interval still lies in it.
Where the widened interval spans two verdicts, the job is ``inconclusive``,
with the step size that would have decided at that bias: the pauses' cost
is per window, so larger steps dilute it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics

from l0mem.estimate.model import AnalysisConfig, NextSteps, SetupAnalysis, SignalFit
from l0mem.estimate.order import Interval, median_interval
from l0mem.estimate.signals import GIB, MIB, signal_info, value
from l0mem.estimate.verdicts import separated
from l0mem.units import fixed
from l0mem.watch.estimation import known_reads, more_evidence
from l0mem.watch.series import Series, host_cost
from l0mem.watch.windows import pause_windows, step_windows, window_spans

# Fewer pause windows than this say nothing of a bias.
MIN_PAUSES = 8


@dataclasses.dataclass(frozen=True)
class Pauses:
    """What windows made in a job's pauses cost one signal, and the step size they are made with."""

    cost: Interval  # MiB per window: median and its interval
    count: int
    step_gib: float  # the steps' median size, GiB


def pause_costs(
    series: Series, xs: list[int | None], signal: str, confidence: float
) -> Pauses | None:
    """Return what pause windows no longer than the job's step windows cost ``signal``, or None.

    None where the signal is unknown, the job had fewer than two windows,
    or there are fewer than :data:`MIN_PAUSES` pause windows.
    """
    info = signal_info(signal)
    if info is None:
        return None
    reads = [(s, x) for _, s, x in known_reads(series, xs)]
    levels = [x for _, x in reads]
    times = [s.t for s, _ in reads]
    cost = [host_cost(series, s) for s, _ in reads]
    found = window_spans(step_windows(levels, times, cost))
    spans = [times[after] - times[before] for before, after in found]
    sizes = [abs(b - a) for a, b in itertools.pairwise(levels) if b != a]
    if len(spans) < 2 or not sizes:
        return None
    longest = max(spans)
    costs = []
    delta = round(statistics.median(sizes))
    for before, after in pause_windows(times, cost, found, delta):
        # Only as long as the step windows: a longer one holds more of any drift.
        if times[after] - times[before] > longest:
            continue
        v0, v1 = value(reads[before][0].values, signal), value(reads[after][0].values, signal)
        if v0 is not None and v1 is not None:
            costs.append(info.sense * (v1 - v0) / MIB)
    if len(costs) < MIN_PAUSES:
        return None
    return Pauses(median_interval(costs, confidence), len(costs), delta / GIB)


def _bounds(verdict: str, config: AnalysisConfig) -> tuple[float, float]:
    """Return the range of slopes (MiB/GiB) in which ``verdict`` holds."""
    clean, mirror = config.clean_threshold * 1024.0, config.mirror_threshold * 1024.0
    return {"clean": (-math.inf, clean), "partial": (clean, mirror)}.get(verdict, (mirror, math.inf))


def widened(fit: SignalFit, pauses: Pauses) -> SignalFit:
    """Return ``fit`` with its interval widened by the bias the pauses show (unchanged where none)."""
    assert fit.low is not None and fit.high is not None
    low, high = fit.low, fit.high
    if pauses.cost.low > 0:
        low -= pauses.cost.high / pauses.step_gib
    elif pauses.cost.high < 0:
        high -= pauses.cost.low / pauses.step_gib
    slope = fit.slope if fit.slope is not None else (low + high) / 2.0
    return dataclasses.replace(
        fit, low=low, high=high, uncertainty=max(high - slope, slope - low)
    )


def _size_needed(fit: SignalFit, pauses: Pauses, verdict: str, config: AnalysisConfig) -> int | None:
    """Return the step size (bytes) at which the pauses' bias would have left ``verdict`` standing."""
    assert fit.low is not None and fit.high is not None
    floor, ceiling = _bounds(verdict, config)
    if pauses.cost.low > 0:
        room, bias = fit.low - floor, pauses.cost.high
    else:
        room, bias = ceiling - fit.high, -pauses.cost.low
    if not room > 0 or math.isinf(room):
        return None
    return math.ceil(bias / room * GIB / MIB) * MIB


def against_the_pauses(
    series: Series, xs: list[int | None], analysis: SetupAnalysis, config: AnalysisConfig
) -> SetupAnalysis:
    """Return ``analysis`` with the deciding interval widened by the bias the pauses show (see the module)."""
    signal = analysis.deciding_signal
    fit = analysis.fit(signal) if signal else None
    if signal is None or fit is None or fit.method != "steps" or fit.interval is None:
        return analysis
    pauses = pause_costs(series, xs, signal, config.confidence)
    if pauses is None or pauses.cost.low <= 0 <= pauses.cost.high:
        return analysis
    wide = widened(fit, pauses)
    assert wide.low is not None and wide.high is not None
    seen = (
        f"windows made the same way in the job's pauses, where device memory held still, cost "
        f"{fixed(pauses.cost.median)} MiB ({fixed(pauses.cost.low)} to "
        f"{fixed(pauses.cost.high)}, {pauses.count} windows): other processes' memory moved "
        f"with the windows; the interval widened to {fixed(wide.low)} to {fixed(wide.high)} MiB/GiB"
    )
    host = [wide if f is fit else f for f in analysis.host]
    if separated(wide, config) == analysis.verdict:
        return dataclasses.replace(analysis, host=host, reason=f"{analysis.reason}; {seen}")
    size = _size_needed(fit, pauses, analysis.verdict, config)
    wanted = (
        f"steps of {size >> 20} MiB or more would decide at that bias; "
        if size is not None
        else ""
    )
    advice = NextSteps(
        text=f"{signal}: {seen}; {wanted}{more_evidence(series.tracing)}",
        signal=signal,
        noise_mib=pauses.cost.high if pauses.cost.low > 0 else -pauses.cost.low,
        windows=fit.points,
        windows_needed=None,
        size_needed_bytes=size,
        missing={},
    )
    return dataclasses.replace(
        analysis,
        verdict="inconclusive",
        deciding_signal=None,
        ratio=None,
        reason=f"no host signal could decide ({signal}: {seen}, which spans two verdicts)",
        host=host,
        passed_over={**analysis.passed_over, signal: f"{seen}, which spans two verdicts"},
        released=None,
        vmrss_would_miss=False,
        next_steps=advice,
    )


__all__ = ["MIN_PAUSES", "Pauses", "against_the_pauses", "pause_costs", "widened"]
