"""The drift's check on a watched job's verdict: whose rate the windows took out.

The step windows take out of each window the rate the host moved at in the
pauses around it (:func:`~l0mem.estimate.steps.local_drift`): another
process growing or shrinking all along. A job's own host side can move at a
rate too: one slower than its steps, still being made when the next step
comes, fills the pauses exactly as a neighbour would. Before the job took
any device memory, only other processes moved the host
(:func:`~l0mem.watch.estimation.before_the_job`), so:

- a rate the windows took out that is not the one the reads before the job
  showed may be the job's own host side (where it is more, the steps' way)
  or that process having slowed: the interval widens to hold the windows
  read with only the rate before the job taken out; where no steady rate
  showed before the job, a rate the steps' way is held the same way against
  the windows read with none taken out. Where the widened interval spans
  two verdicts the job is ``inconclusive``;
- a rate the reads before the job did show is held against a clean as the
  climb's drift too (:func:`~l0mem.estimate.climbs.outside`): a neighbour
  that gave memory back at the pace the job's host side was made keeps the
  host still in every window and over the whole climb as read;
- a job with too few windows is read by a line over its climb, which holds
  another process's rate all through: the line with the rate shown before
  the job taken out must agree with it (the interval holds both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from l0mem.estimate.climbs import outside
from l0mem.estimate.fits import fit_signal
from l0mem.estimate.model import AnalysisConfig, Sample, SetupAnalysis
from l0mem.estimate.steps import StepSlope, step_slope, windows
from l0mem.units import fixed
from l0mem.watch.estimation import (
    before_the_job,
    holding,
    judged_samples,
    known_reads,
    more_evidence,
    undecided,
)
from l0mem.watch.series import Series


def against_the_drift(
    series: Series, xs: list[int | None], analysis: SetupAnalysis, config: AnalysisConfig
) -> SetupAnalysis:
    """Return ``analysis`` checked against the rate the host moved at before the job (see the module)."""
    signal = analysis.deciding_signal
    fit = analysis.fit(signal) if signal else None
    if signal is None or fit is None or fit.interval is None or fit.slope is None:
        return analysis
    before = before_the_job(series, known_reads(series, xs))
    samples = judged_samples(series, xs, config)
    more = more_evidence(series.tracing)
    if fit.method != "steps":
        if not before:
            return analysis
        # A line over the climb holds another process's rate all through it: the
        # line with the rate it showed before the job taken out must agree.
        other = fit_signal(samples, signal, config, drift=before)
        if other.interval is None or other.slope is None:
            return analysis
        seen = (
            f"another process moved the host at {fixed(before)} MiB/s before the job; with "
            f"that taken out the line gives {fixed(other.slope)} ({fixed(other.interval[0])} "
            f"to {fixed(other.interval[1])})"
        )
        return holding(analysis, signal, fit, other.interval, seen, more, config)
    if analysis.verdict == "clean" and before:
        why = outside(samples, fit, "clean", config, also=(before,))
        if why is not None:
            return undecided(
                analysis,
                signal,
                fit,
                f"{why} (another process's {fixed(before)} MiB/s before the job taken out)",
                more,
            )
    taken = _taken(samples, signal, config, before or 0.0)
    if taken is None:
        return analysis
    rate, moved, raw = taken
    if before is not None and abs(moved) > _STILL_MIB:
        # The rate the windows took out is not the one another process showed
        # before the job: whichever holds, the interval holds both.
        whose = (
            "the rest may be the job's own host side, made more slowly than its steps came"
            if rate > 0
            else "that process may have slowed or stopped"
        )
        then = (
            "the host held still before the job"
            if abs(before) < _STILL_MIB
            else f"another process moved it at {fixed(before)} MiB/s before the job"
        )
        seen = (
            f"the windows took out {fixed(rate + before)} MiB/s the host moved at between "
            f"them, {then} ({whose}); with only the rate before the job taken out the windows give "
            f"{fixed(raw.slope)} ({fixed(raw.interval.low)} to {fixed(raw.interval.high)})"
        )
    elif before is None and rate > 0 and raw.slope > fit.slope:
        seen = (
            f"the windows took out {fixed(rate)} MiB/s the host moved at between them, and no "
            f"steady rate before the job says whose: it may be the job's own host side, made "
            f"more slowly than its steps came; with it left in the windows give "
            f"{fixed(raw.slope)} ({fixed(raw.interval.low)} to {fixed(raw.interval.high)})"
        )
    else:
        return analysis
    if rate > 0:
        more = f"space the allocations so that each one's host side is made before the next; {more}"
    return holding(analysis, signal, fit, (raw.interval.low, raw.interval.high), seen, more, config)


# Rates that differ by less than this over all the allocation windows' time (MiB) are one.
_STILL_MIB = 2.0


def _taken(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig, before: float
) -> tuple[float, float, StepSlope] | None:
    """Return how much more than ``before`` the allocation windows took out (MiB a second, and MiB over their whole time), and their slope with ``before`` alone taken out."""
    read = {w.step: w for w in windows(samples, signal) if w.device_bytes > 0}
    raw = [
        dataclasses.replace(w, cost_mib=w.cost_mib - before * w.seconds)
        for w in windows(samples, signal, drift=False)
        if w.device_bytes > 0
    ]
    seconds = sum(w.seconds for w in raw)
    slope = step_slope(raw, config.confidence)
    if slope is None or seconds <= 0:
        return None
    moved = sum(w.cost_mib - read[w.step].cost_mib for w in raw if w.step in read)
    return moved / seconds, moved, slope


__all__ = ["against_the_drift"]
