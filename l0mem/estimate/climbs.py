"""The climb's check on a verdict from step windows: costs the windows could not see.

The windows measure each step right around it; what a run pays elsewhere (a
residency made long after its allocation, pages committed late, lumps paid
every few steps) shows only in the level the host reached as device memory
grew: the climb (:func:`l0mem.estimate.fits.climb`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from l0mem.estimate.fits import climb, fit_signal
from l0mem.estimate.model import AnalysisConfig, Sample, SignalFit, Verdict
from l0mem.estimate.signals import cost_series
from l0mem.estimate.steps import drift, windows
from l0mem.estimate.verdicts import why_unusable


def _lumps(up: Sequence[Sample], signal: str, rate: float, config: AnalysisConfig) -> int:
    """Return how many times the host's cost rose by a lump between two samples of the climb ``up``.

    A lump is at least half of what a clean run may cost over the whole climb
    (16 MiB at least), ``rate`` of drift taken out.
    """
    series = cost_series(up, signal, rate)
    if len(series) < 2:
        return 0
    peak = max(x for _, x, _ in series)
    lump = max(16.0, config.clean_threshold * 1024.0 * peak / 2)
    return sum(1 for (_, _, a), (_, _, b) in itertools.pairwise(series) if b - a >= lump)


def outside(
    samples: Sequence[Sample], fit: SignalFit, verdict: Verdict, config: AnalysisConfig
) -> str | None:
    """Return why windows that say ``verdict`` are contradicted by the whole climb, or None.

    Costs a step window cannot see (a residency made long after its
    allocation, pages committed late, costs paid in lumps the windows
    rejected) still show in the level the host reached: a line over the
    climb whose interval separates on the other side of clean says the
    windows missed them (or a neighbour moved with the steps): not a
    verdict to give either way.
    """
    if fit.method != "steps":
        return None
    rate = drift(windows(samples, fit.signal))
    # A clean is held to the climb as read too: a cost paid between the windows
    # in a steady rhythm looks like drift, and taking drift out would hide it.
    rates = [rate, 0.0] if verdict == "clean" and rate else [rate]
    clean = config.clean_threshold * 1024.0
    up = climb(samples)
    for r in rates:
        line = fit_signal(up, fit.signal, config, drift=r)
        interval = line.interval if why_unusable(line, config) is None else None
        if (
            interval is None
            and verdict == "clean"
            and line.points >= config.min_points
            and _lumps(up, fit.signal, r, config) >= 2
        ):
            # Against a clean, a line that fits poorly still counts where the host
            # paid in lumps that recur with the steps (every few steps, in windows
            # rejected as disturbed or between them): they are what makes it fit
            # poorly. One jump is as likely another process's, once.
            interval = line.interval
        if interval is None or line.slope is None:
            continue
        # Only across clean: partial against mirror is the windows' to say (beside a
        # neighbour the climb holds all its motion, the windows what they did not reject).
        if verdict == "clean" and interval[0] >= clean:
            other = "not clean"
        elif verdict != "clean" and interval[1] < clean:
            other = "clean"
        else:
            continue
        return (
            f"its step windows say {verdict} but the whole climb says {other} "
            f"({line.slope:.0f} MiB/GiB): host memory moved outside the windows"
        )
    return None


__all__ = ["outside"]
