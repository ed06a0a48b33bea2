"""The late costs' check on a watched job's verdict: what the host paid after each step's window.

A step window closes once the host's cost holds still after the change
(:mod:`l0mem.watch.windows`). A host side paid later than that (pages a
driver backs when they are first used rather than when they are
allocated, a residency made a while after its allocation) falls in the
pause after the window, where the windows take it for another process's
motion. Two things still show it:

- the rate the host moved at in the pause windows
  (:func:`~l0mem.watch.pauses.pause_costs`). Short, most of them miss a
  cost paid once a step; the pauses' steady drift, taken over whole pauses,
  does not (:func:`~l0mem.estimate.steps.drift`). Beside another process
  giving memory back at a steady rate, that drift is the other process's
  rate less the job's late cost, and a climb with it taken out is as flat
  as the windows;
- the level the host reached at each step, read last before the next one
  (:func:`~l0mem.estimate.climbs.level_steps`): by then the step's late cost
  is paid whole.

So a clean is held to the climb with the pause windows' rate taken out
(:func:`~l0mem.estimate.climbs.outside`) and, where that rate is a steady
one's (:data:`STEADY_WITHIN`), with the end of its interval that would hide
a cost taken out as well. A partial mirror or a mirror is held to the steps
from level to level with that rate taken out: where their median's
interval lies wholly above the windows, the interval widens to hold it (the
windows missed a cost, or another process took memory in lumps as the job
climbed: either way the windows alone do not hold the truth), and the job
is ``inconclusive`` where it then spans two verdicts.
"""

from __future__ import annotations

from l0mem.estimate.climbs import level_steps, outside, steps_moved
from l0mem.estimate.model import AnalysisConfig, Sample, SetupAnalysis, SignalFit
from l0mem.estimate.order import Interval
from l0mem.units import fixed
from l0mem.watch.estimation import deciding_steps, holding, judged_samples, more_evidence, undecided
from l0mem.watch.pauses import Pauses
from l0mem.watch.series import Series

# MiB/GiB: a pause windows' rate whose interval moves the steps from level to level
# by less than a 1:1 mirror's cost is a steady rate's (a churning neighbour's moves
# them by thousands, and says nothing of the steps).
STEADY_WITHIN = 1024.0


def against_late_costs(
    series: Series,
    xs: list[int | None],
    analysis: SetupAnalysis,
    pauses: Pauses | None,
    config: AnalysisConfig,
) -> SetupAnalysis:
    """Return ``analysis`` checked for a host side paid after its windows (see the module).

    ``pauses``: what the pause windows cost its deciding signal
    (:func:`~l0mem.watch.pauses.pause_costs`).
    """
    decided = deciding_steps(analysis)
    if decided is None:
        return analysis
    signal, fit = decided
    if pauses is None or pauses.rate is None:
        return analysis
    rate = pauses.rate.median
    samples = judged_samples(series, xs, config)
    if analysis.verdict == "clean":
        why = _against_clean(samples, signal, fit, pauses.rate, config)
        if why is None:
            return analysis
        return undecided(analysis, signal, fit, why, _advice(series.tracing))
    taken = f"the {fixed(rate)} MiB/s the host moved at in the pause windows taken out"
    levels = level_steps(samples, signal, config, rate)
    if levels is None or levels.interval is None or levels.slope is None:
        return analysis
    if fit.high is None or levels.interval[0] <= fit.high:
        return analysis
    seen = (
        f"the level the host reached at each step, read last before the next, with {taken}, "
        f"gives {fixed(levels.slope)} ({fixed(levels.interval[0])} to "
        f"{fixed(levels.interval[1])}), above every window: a host side paid after its "
        "windows (pages backed when first used, a residency made later), or another process "
        "taking memory as the job climbed"
    )
    return holding(analysis, signal, fit, levels.interval, seen, _advice(series.tracing), config)


def _against_clean(
    samples: list[Sample], signal: str, fit: SignalFit, rate: Interval, config: AnalysisConfig
) -> str | None:
    """Return why the climb, the pause windows' rate taken out, disputes a clean, or None."""
    why = outside(samples, fit, "clean", config, also=(rate.median,))
    if why is not None:
        return f"{why} (the {fixed(rate.median)} MiB/s the host moved at in the pause windows taken out)"
    # Beside a neighbour giving memory back steadily, a rate a few MiB/s off
    # hides a partial mirror paid late, and the pause windows' rate is known
    # only within its interval: where that interval is a steady rate's, the end
    # that would hide a cost is held against the clean too.
    moved = steps_moved(samples, signal, config, (rate.low, rate.high))
    if moved is None or moved >= STEADY_WITHIN:
        return None
    why = outside(samples, fit, "clean", config, also=(rate.low,), only=True)
    if why is None:
        return None
    return (
        f"{why} (the {fixed(rate.low)} MiB/s the host may have moved at in the pause windows "
        f"taken out: the end of their rate's interval, {fixed(rate.low)} to {fixed(rate.high)}, "
        "that would hide a cost)"
    )


def _advice(tracing: bool) -> str:
    """Return what would show a cost paid after its windows."""
    return (
        "let the workload touch what it allocates before the next allocation, so that each "
        f"step's host side is paid inside its window; {more_evidence(tracing)}"
    )


__all__ = ["STEADY_WITHIN", "against_late_costs"]
