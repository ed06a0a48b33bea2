"""The climb's check on a verdict from step windows: costs the windows could not see.

The windows measure each step right around it; what a run pays elsewhere (a
residency made long after its allocation, pages committed late, lumps paid
every few steps) shows only in the level the host reached as device memory
grew: the climb (:func:`l0mem.estimate.fits.climb`).

Where a run climbed more than once through the same levels (the audit climbs
again while its climbs cannot confirm a clean), the climbs are taken
together, step by step, at the median of what each climb's step to a level
cost (from the sample before it to the last one at that level, so a cost
paid late counts): a cost of the run's own comes back at the same step of
every climb, another process's jump moves one step of one climb and is
outvoted there. That is a lock-in: only what follows the steps survives.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence

from l0mem.estimate.fits import climb, climbs, fit_signal, line_fit
from l0mem.estimate.model import AnalysisConfig, Sample, SignalFit, Verdict
from l0mem.estimate.order import median_interval
from l0mem.estimate.signals import cost_series
from l0mem.estimate.steps import drift, reads, robust_spread, windows
from l0mem.estimate.verdicts import why_unusable
from l0mem.units import fixed

# Marks the reason a climb gives against the windows (:func:`disputed`).
_DISPUTE = "but the whole climb says"
# From this many climbs, one lump at the same level of the median climb is the run's:
# a neighbour's jump would have had to come at that level in most of them.
_OUTVOTED = 3


@dataclasses.dataclass(frozen=True)
class ClimbLine:
    """The line over a run's climb (or the median of its climbs) and the lumps it rose in."""

    line: SignalFit
    lumps: int
    climbs: int
    levels: bool = False  # the line is the median of the steps from level to level (level_steps)
    # The steps from level to level (:func:`level_ratios`): cost per GiB and size (GiB)
    steps: tuple[list[float], list[float]] | None = None

    def usable(self, config: AnalysisConfig) -> bool:
        """Return whether the line may speak: it fits, or it rose in lumps the steps explain."""
        if self.line.interval is None or self.line.points < config.min_points:
            return False
        needed = 1 if self.climbs >= _OUTVOTED else 2
        # A line that fits poorly still counts where the host paid in lumps that
        # recur with the steps (every few steps, in windows rejected as disturbed
        # or between them): they are what makes it fit poorly. One jump in one
        # climb is as likely another process's.
        return why_unusable(self.line, config) is None or self.lumps >= needed


def _lumps(costs: Sequence[float], peak_gib: float, config: AnalysisConfig) -> int:
    """Return how many times ``costs`` (MiB, in order) rose by a lump from one to the next.

    A lump is at least half of what a clean run may cost over the whole climb
    (16 MiB at least).
    """
    lump = max(16.0, config.clean_threshold * 1024.0 * peak_gib / 2)
    return sum(1 for a, b in itertools.pairwise(costs) if b - a >= lump)


def _levels(up: Sequence[Sample], signal: str, rate: float) -> tuple[list[float], dict[float, float]]:
    """Return a climb's idle costs and its cost at each device level (GiB), MiB.

    At each level the last sample there counts: it was read after whatever
    the step cost late.
    """
    return _levels_of(cost_series(up, signal, rate))


def _levels_of(series: Sequence[tuple[str, float, float]]) -> tuple[list[float], dict[float, float]]:
    """Return :func:`_levels` of a climb's cost series (:func:`~l0mem.estimate.signals.cost_series`)."""
    idle: list[float] = []
    at: dict[float, float] = {}
    for phase, x, cost in series:
        if phase == "idle":
            idle.append(cost)
        else:
            at[x] = cost
    return idle, at


def _judged(samples: Sequence[Sample], config: AnalysisConfig) -> list[list[Sample]]:
    """Return the run's climbs with enough alloc samples to judge."""
    return [c for c in climbs(samples) if sum(s.phase == "alloc" for s in c) >= config.min_points]


def _together(
    judged: Sequence[Sequence[Sample]], signal: str, config: AnalysisConfig, rate: float
) -> tuple[list[float], list[float], list[float]] | None:
    """Return the levels two climbs or more went through, the median step (MiB) to each, and their idle costs.

    None with fewer than two climbs or ``config.min_points`` levels in common.
    """
    if len(judged) < 2:
        return None
    per = [_levels(c, signal, rate) for c in judged]
    common = sorted(set.intersection(*(set(at) for _, at in per)) - {0.0})
    if len(common) < config.min_points:
        return None
    # Level by level, the median of what each climb's step to that level cost:
    # another process's jump moves one step of one climb, a late cost of the
    # run's own the same step of every climb. (The median of the levels
    # themselves would not do: a jump early in a climb moves every level after it.)
    rises = [
        statistics.median(at[x] - at.get(prev, 0.0) for _, at in per)
        for prev, x in itertools.pairwise([0.0, *common])
    ]
    return common, rises, [c for costs, _ in per for c in costs]


def climb_line(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig, rate: float
) -> ClimbLine:
    """Return the line over the run's climbs, ``rate`` MiB/s of drift taken out.

    One climb (or climbs through different levels): the line over the run up
    to its peak. Several through the same levels: the line through their
    median at each level, its noise the idle costs' spread robust to jumps.
    """
    judged = _judged(samples, config)
    together = _together(judged, signal, config, rate)
    if together is not None:
        common, rises, idle = together
        ys = list(itertools.accumulate(rises))
        centre = statistics.median(idle) if idle else 0.0
        # The idle costs' spread, unmoved by a jump in one climb's idle reads.
        noise = robust_spread([c - centre for c in idle]) if len(idle) >= 2 else None
        base = fit_signal(judged[0], signal, config, drift=rate, trend=False)
        line = line_fit(base, noise, common, ys, config)
        lumps = _lumps([centre, *ys], common[-1], config)
        return ClimbLine(line, lumps, len(judged), steps=_per_gib(common, rises))
    up = climb(samples)
    line = fit_signal(up, signal, config, drift=rate, trend=False)
    series = cost_series(up, signal, rate)
    peak = max((x for _, x, _ in series), default=0.0)
    lumps = _lumps([c for _, _, c in series], peak, config)
    return ClimbLine(line, lumps, 1, steps=_level_ratios(*_levels_of(series), config))


def _level_ratios(
    idle: Sequence[float], at: dict[float, float], config: AnalysisConfig
) -> tuple[list[float], list[float]] | None:
    """Return a climb's steps from level to level (:func:`_levels`): cost per GiB and size (GiB), or None with too few."""
    # A climb that went back to no device memory on its way up has no step to level 0.
    levels = sorted(x for x in at if x > 0)
    if len(levels) < config.min_points:
        return None
    start = statistics.median(idle) if idle else 0.0
    costs = [start, *(at[x] for x in levels)]
    sizes = [b - a for a, b in itertools.pairwise([0.0, *levels])]
    ratios = [(b - a) / size for (a, b), size in zip(itertools.pairwise(costs), sizes, strict=True)]
    return ratios, sizes


def level_ratios(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig, rate: float
) -> tuple[list[float], list[float]] | None:
    """Return the run's steps from level to level, ``rate`` MiB/s taken out: cost per GiB and size (GiB).

    Over several climbs through the same levels, each step is the median of
    what every climb's step to that level cost (a neighbour's lump in one
    climb is outvoted there); else the single climb's. None with fewer than
    ``config.min_points`` steps.
    """
    together = _together(_judged(samples, config), signal, config, rate)
    if together is None:
        return _level_ratios(*_levels(climb(samples), signal, rate), config)
    common, rises, _ = together
    return _per_gib(common, rises)


def _per_gib(common: Sequence[float], rises: Sequence[float]) -> tuple[list[float], list[float]]:
    """Return the median steps to ``common`` levels (GiB), ``rises`` MiB, as cost per GiB and size."""
    sizes = [b - a for a, b in itertools.pairwise([0.0, *common])]
    return [r / size for r, size in zip(rises, sizes, strict=True)], sizes


def level_steps(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig, rate: float
) -> SignalFit | None:
    """Return the median cost (MiB per GiB) of the run's steps from level to level (:func:`level_ratios`), ``rate`` MiB/s taken out.

    Each step runs from the last read at one level to the last read at the
    next: by then whatever the step cost late is paid whole. A cost of the
    run's own comes back in every step, another process's lump in the one it
    fell in, and the median outvotes it. None with fewer than
    ``config.min_points`` steps.
    """
    found = level_ratios(samples, signal, config, rate)
    return None if found is None else _steps_fit(samples, signal, config, rate, found)


def _steps_fit(
    samples: Sequence[Sample],
    signal: str,
    config: AnalysisConfig,
    rate: float,
    steps: tuple[list[float], list[float]],
) -> SignalFit:
    """Return the fit :func:`level_steps` gives of ``steps`` (cost per GiB and size of each)."""
    ratios, sizes = steps
    median = median_interval(ratios, config.confidence, sizes)
    return dataclasses.replace(
        fit_signal(climb(samples), signal, config, drift=rate, trend=False),
        method="steps",
        points=len(ratios),
        slope=median.median,
        low=median.low,
        high=median.high,
        coverage=median.coverage,
        uncertainty=median.half_width,
    )


def steps_moved(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig, rates: tuple[float, float]
) -> float | None:
    """Return how far (MiB/GiB, the median over the steps from level to level) taking out one drift rather than the other moves the steps."""
    found = [level_ratios(samples, signal, config, rate) for rate in rates]
    if found[0] is None or found[1] is None:
        return None
    return abs(statistics.median(a - b for a, b in zip(found[0][0], found[1][0], strict=True)))


def _mostly_past(ratios: Sequence[float], config: AnalysisConfig) -> bool:
    """Return whether two in three of ``ratios`` (steps from level to level, MiB/GiB) or more lie past clean."""
    # Not the median's whole interval: over a few steps that is their whole range,
    # and another process giving back in one pause would hold a mirror's clean.
    # Not the median alone: beside a churning neighbour half the steps of a clean
    # job may read high.
    ordered = sorted(ratios)
    return ordered[len(ordered) // 3] >= config.clean_threshold * 1024.0


def _rates(
    samples: Sequence[Sample], fit: SignalFit, verdict: Verdict, also: Sequence[float] = ()
) -> list[float]:
    """Return the drifts to judge the climb with: the windows', and none and ``also`` too against a clean."""
    rate = drift(windows(samples, fit.signal), reads(samples, fit.signal))
    # A clean is held to the climb as read too: a cost paid between the windows
    # in a steady rhythm looks like drift, and taking drift out would hide it.
    if verdict != "clean":
        return [rate]
    return list(dict.fromkeys([rate, 0.0, *also]))


def against(
    samples: Sequence[Sample],
    fit: SignalFit,
    verdict: Verdict,
    config: AnalysisConfig,
    also: Sequence[float] = (),
    *,
    only: bool = False,
) -> tuple[ClimbLine, str] | None:
    """Return the climb that contradicts windows saying ``verdict`` and what it says instead, or None.

    Costs a step window cannot see still show in the level the host reached:
    a climb whose line says the other side of clean says the windows missed
    them, or a neighbour moved with the steps. Against a clean, where the run
    climbed more than once, the median climb's best slope is enough (a
    neighbour that fell while a late mirror was paid widens a line's interval
    down to clean, and a wrong clean is the worst answer); over a single climb
    its whole interval must lie past clean, and the audit climbs again until
    its climbs confirm a clean (:func:`confirms_clean`). Against a mirror or a
    partial one, the whole interval must lie in clean. ``also``: other
    drifts (MiB a second) a clean is held to, as another process's rate
    measured elsewhere; ``only``: those alone (the others already tried).
    """
    if fit.method != "steps":
        return None
    clean = config.clean_threshold * 1024.0
    for rate in list(also) if only else _rates(samples, fit, verdict, also):
        found = climb_line(samples, fit.signal, config, rate)
        line = found.line
        if verdict == "clean":
            # A cost paid late in every step leaves a line over all the reads lagging
            # behind the levels, and fitting poorly, and a neighbour's lump at one level
            # of two climbs drags their median line: the steps from level to level say
            # it, where two in three of them or more lie past clean.
            steps = found.steps
            if steps is not None and _mostly_past(steps[0], config):
                levels = _steps_fit(samples, fit.signal, config, rate, steps)
                return ClimbLine(levels, found.lumps, found.climbs, True, steps), "not clean"
        if not found.usable(config) or line.slope is None or line.interval is None:
            continue
        # Only across clean: partial against mirror is the windows' to say (beside a
        # neighbour the climb holds all its motion, the windows what they did not reject).
        # One climb says "not clean" only with its whole interval: beside a neighbour
        # its slope is that neighbour's as much as the run's, and a run that cannot
        # climb again (a watched job) would never be called clean. From two climbs on,
        # their median steps are the run's: the best slope is enough.
        past = line.slope if found.climbs > 1 else line.interval[0]
        if verdict == "clean" and past >= clean:
            return found, "not clean"
        if verdict != "clean" and line.interval[1] < clean:
            return found, "clean"
    return None


def outside(
    samples: Sequence[Sample],
    fit: SignalFit,
    verdict: Verdict,
    config: AnalysisConfig,
    also: Sequence[float] = (),
    *,
    only: bool = False,
) -> str | None:
    """Return why windows that say ``verdict`` are contradicted by the run's climbs (:func:`against`), or None."""
    found = against(samples, fit, verdict, config, also, only=only)
    if found is None:
        return None
    climbed, other = found
    count = "" if climbed.climbs == 1 else f" (the median of {climbed.climbs} climbs)"
    # The steps from level to level dispute as the climb's line does; the reason says which.
    how = " at the median of its steps from level to level" if climbed.levels else ""
    return (
        f"its step windows say {verdict} {_DISPUTE} {other}{count} "
        f"({fixed(climbed.line.slope or 0.0)} MiB/GiB{how}): host memory moved outside the windows"
    )


def confirms_clean(samples: Sequence[Sample], fit: SignalFit, config: AnalysisConfig) -> bool:
    """Return whether the run's climbs confirm windows that say clean: their line's interval lies below clean.

    A run that can climb again (the audit) does so until they do: a single
    climb beside a neighbour may have hidden a late cost the next ones show.
    """
    clean = config.clean_threshold * 1024.0
    for rate in _rates(samples, fit, "clean"):
        line = climb_line(samples, fit.signal, config, rate).line
        if why_unusable(line, config) is not None or line.interval is None:
            return False
        if line.interval[1] >= clean:
            return False
    return True


def disputed(why: str) -> bool:
    """Return whether ``why`` (a signal passed over) is a climb contradicting its windows."""
    return _DISPUTE in why


__all__ = [
    "ClimbLine",
    "against",
    "climb_line",
    "confirms_clean",
    "disputed",
    "level_ratios",
    "level_steps",
    "outside",
    "steps_moved",
]
