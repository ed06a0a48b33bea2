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
and the verdict stands only where the widened interval still lies in it;
else the job is ``inconclusive``. The pause windows are read as the step
windows are: the run's steady drift and other processes' memory that a
component shows are taken out of both. What they measure may also be the
job's own: a host side slower than its windows, which widening the
interval allows for as well.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics

from l0mem.estimate.model import AnalysisConfig, SetupAnalysis, SignalFit
from l0mem.estimate.order import Interval, median_interval
from l0mem.estimate.signals import GIB, MIB, signal_info, value
from l0mem.estimate.steps import drift, reads, windows
from l0mem.estimate.verdicts import separated
from l0mem.units import fixed
from l0mem.watch.estimation import (
    deciding_steps,
    edge_costs,
    judged_samples,
    known_reads,
    more_evidence,
    undecided,
)
from l0mem.watch.series import Series
from l0mem.watch.windows import pause_windows, step_windows, window_spans

# Fewer pause windows than this say nothing of a bias.
MIN_PAUSES = 8
# Step windows that take in this share of the time from the first to the last, at
# this median length or more, ran into each other: the host never held still.
RAN_TOGETHER = 0.75
LONG_WINDOW_S = 0.5


@dataclasses.dataclass(frozen=True)
class Pauses:
    """What windows made in a job's pauses cost one signal, and the step size they are made with."""

    cost: Interval | None  # MiB per window: median and its interval; None: too few windows
    count: int
    step_gib: float  # the steps' median size, GiB
    covered: float = 0.0  # share of the time from the first window to the last inside windows
    window_s: float = 0.0  # the step windows' median length, seconds
    widened: float = 0.0  # share of the step windows widened past the reads around their change
    # MiB of cost a second the host moved at in the pause windows, as read (no drift taken out)
    rate: Interval | None = None


def pause_costs(
    series: Series,
    xs: list[int | None],
    signal: str,
    config: AnalysisConfig,
    still: list[int | None] | None = None,
) -> Pauses | None:
    """Return what pause windows no longer than the job's step windows cost ``signal``, or None.

    The costs are read as the step windows' are: from the samples the
    analysis reads (other processes' memory a component shows taken out,
    :func:`~l0mem.estimate.bystanders.without_bystanders`), the run's steady
    drift taken out over each window's length. A window across which
    ``still`` (another device quantity, per sample: the allocations where
    ``xs`` are residency calls) moved is left out: it is the job's own.
    None where the signal is unknown or the job had fewer than two windows;
    ``cost`` None where there are fewer than :data:`MIN_PAUSES` pause windows.
    """
    info = signal_info(signal)
    if info is None:
        return None
    known = known_reads(series, xs)
    levels = [x for _, _, x in known]
    times = [s.t for _, s, _ in known]
    cost, pace = edge_costs(series, known)
    found = window_spans(step_windows(levels, times, cost, pace))
    spans = [times[after] - times[before] for before, after in found]
    sizes = [abs(b - a) for a, b in itertools.pairwise(levels) if b != a]
    if len(spans) < 2 or not sizes:
        return None
    samples = judged_samples(series, xs, config)
    at = {s.t: v for s in samples if (v := value(s.values, signal)) is not None}
    rate = drift(windows(samples, signal), reads(samples, signal))  # MiB of cost a second
    longest, typical = max(spans), statistics.median(spans)
    delta = round(statistics.median(sizes))
    costs, rates = [], []
    for before, after in pause_windows(times, cost, found, delta, typical, pace):
        t0, t1 = times[before], times[after]
        # Only as long as the step windows: a longer one holds more of any motion.
        if t1 - t0 > longest or t0 not in at or t1 not in at:
            continue
        if still is not None and len({still[i] for i in range(known[before][0], known[after][0] + 1)}) > 1:
            continue
        moved = info.sense * (at[t1] - at[t0]) / MIB
        costs.append(moved - rate * (t1 - t0))
        if t1 > t0:
            rates.append(moved / (t1 - t0))
    whole = times[found[-1][1]] - times[found[0][0]]
    covered = sum(spans) / whole if whole > 0 else 0.0
    bare = window_spans(step_windows(levels))
    grown = sum(a != b for a, b in zip(found, bare, strict=False)) / len(found)
    if len(costs) < MIN_PAUSES:
        return Pauses(None, len(costs), delta / GIB, covered, typical, grown)
    interval = median_interval(costs, config.confidence)
    moving = median_interval(rates, config.confidence) if len(rates) >= MIN_PAUSES else None
    return Pauses(interval, len(costs), delta / GIB, covered, typical, grown, moving)


def widened(fit: SignalFit, pauses: Pauses) -> SignalFit:
    """Return ``fit`` with its interval widened by the bias the pauses show (unchanged where none)."""
    assert fit.low is not None and fit.high is not None
    low, high, cost = fit.low, fit.high, pauses.cost
    if cost is not None and cost.low > 0:
        low -= cost.high / pauses.step_gib
    elif cost is not None and cost.high < 0:
        high -= cost.low / pauses.step_gib
    slope = fit.slope if fit.slope is not None else (low + high) / 2.0
    return dataclasses.replace(
        fit, low=low, high=high, uncertainty=max(high - slope, slope - low)
    )


def against_the_pauses(
    series: Series, analysis: SetupAnalysis, pauses: Pauses | None, config: AnalysisConfig
) -> SetupAnalysis:
    """Return ``analysis`` with the deciding interval widened by the bias the pauses show (see the module).

    ``pauses``: what the pause windows cost its deciding signal (:func:`pause_costs`).
    """
    decided = deciding_steps(analysis)
    if decided is None:
        return analysis
    signal, fit = decided
    if pauses is not None and pauses.cost is None and _ran_together(pauses):
        return undecided(
            analysis,
            signal,
            fit,
            f"its windows ran into each other ({pauses.covered:.0%} of the time from the first "
            f"to the last, {pauses.window_s:.2f} s each at the median): the host kept moving the "
            "steps' way between the changes, so no pause showed what moved without them (a "
            "steady motion, another process's or the job's own, is taken in whole)",
            more_evidence(series.tracing),
        )
    if pauses is None or pauses.cost is None or pauses.cost.low <= 0 <= pauses.cost.high:
        return analysis
    wide = widened(fit, pauses)
    assert wide.low is not None and wide.high is not None
    seen = (
        f"windows made the same way in the job's pauses, where device memory held still, cost "
        f"{pauses.cost.median:.1f} MiB ({pauses.cost.low:.1f} to {pauses.cost.high:.1f}, "
        f"{pauses.count} windows): memory moved with the windows that the steps did not move "
        f"(another process's, or a host side of the job's own that outlasts its windows); "
        f"the interval widened to {fixed(wide.low)} to {fixed(wide.high)} MiB/GiB"
    )
    host = [wide if f is fit else f for f in analysis.host]
    if separated(wide, config) == analysis.verdict:
        return dataclasses.replace(analysis, host=host, reason=f"{analysis.reason}; {seen}")
    return undecided(
        dataclasses.replace(analysis, host=host),
        signal,
        fit,
        f"{seen}, across two verdicts",
        f"larger steps dilute what moves with each window; {more_evidence(series.tracing)}",
    )


def _ran_together(pauses: Pauses) -> bool:
    """Return whether the step windows, widened, took in nearly all the time between them, each long.

    Windows that are only the reads around their change (reads as far apart
    as the changes) leave no pauses either, but took in nothing by widening.
    """
    return (
        pauses.covered >= RAN_TOGETHER
        and pauses.window_s >= LONG_WINDOW_S
        and pauses.widened >= 0.5
    )


__all__ = ["MIN_PAUSES", "Pauses", "against_the_pauses", "pause_costs", "widened"]
