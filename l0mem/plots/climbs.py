"""What the audit plot draws of a run, as data: its signal, its climbs, and its fitted line.

A run is drawn by one host signal (:func:`plot_signal`: the deciding one, else
the first recorded). Its samples are cut into climbs (:func:`climbs_of`):
each starts where device memory was last none and its costs are read from
that start, as the analysis reads each climb
(:func:`l0mem.estimate.fits.climbs`). :func:`fitted_line` puts the
analysis's slope on the plot's zero. Nothing here needs matplotlib.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from l0mem.audit.model import AuditReport, SetupRun
from l0mem.estimate import DEFAULT_CONFIG, cost_series, recorded_signals
from l0mem.estimate.model import Sample, SignalFit

Points = list[tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class Climb:
    """One climb of a run as drawn: costs (MiB) from the climb's own start, at device GiB."""

    base: Points  # the samples the climb starts from (drawn for the first climb only)
    up: Points  # the samples while device memory grew, to the last one at its peak
    down: Points  # the samples after the peak while device memory was freed step by step
    freed: Points  # the samples after the free, on this climb's zero


def plot_signal(report: AuditReport, run: SetupRun) -> str | None:
    """Return the host signal a run is plotted by: the deciding one, else the first recorded."""
    if run.result is not None and run.result.deciding_signal is not None:
        return run.result.deciding_signal
    recorded = set(recorded_signals(run.samples))
    priority = (report.analysis or DEFAULT_CONFIG).priority
    return next((s for s in priority if s in recorded), None)


def climbs_of(samples: Sequence[Sample], signal: str) -> list[Climb]:
    """Return the run's climbs, each with ``signal``'s cost from the mean of the samples it starts from."""
    parts: list[tuple[list[Sample], list[Sample], list[Sample]]] = []
    base: list[Sample] = []
    up: list[Sample] = []
    after: list[Sample] = []
    for s in samples:
        if s.phase == "alloc":
            if after:
                # Device memory was none again: the next climb starts from these samples.
                parts.append((base, up, after))
                base, up, after = after, [], []
            up.append(s)
        elif up:
            after.append(s)
        else:
            base.append(s)
    if up or base:
        parts.append((base, up, after))
    out = []
    for base, up, after in parts:
        start = [dataclasses.replace(s, phase="idle") for s in base]
        series = cost_series([*start, *up, *after], signal)
        alloc = [(x, y) for _, x, y in series[len(start) : len(start) + len(up)]]
        peak = max((x for x, _ in alloc), default=0.0)
        last = max((i for i, (x, _) in enumerate(alloc) if x == peak), default=-1)
        out.append(
            Climb(
                base=[(x, y) for _, x, y in series[: len(start)]],
                up=alloc[: last + 1],
                down=alloc[last + 1 :],
                freed=[(x, y) for _, x, y in series[len(start) + len(up) :]],
            )
        )
    return out


def fitted_line(fit: SignalFit, climbs: Sequence[Climb]) -> tuple[float, float] | None:
    """Return (intercept MiB, slope MiB per GiB) of the run's fitted line on the plot's zero.

    One climb is drawn on the analysis's own zero (the idle samples), so its
    intercept holds; over several climbs, each drawn from its own start, the
    line at the analysis's slope goes through the median of the drawn costs.
    """
    if fit.slope is None:
        return None
    if len(climbs) == 1 and fit.intercept_mib is not None:
        return fit.intercept_mib, fit.slope
    offsets = [y - fit.slope * x for c in climbs for x, y in c.up]
    return (statistics.median(offsets), fit.slope) if offsets else None


__all__ = ["Climb", "Points", "climbs_of", "fitted_line", "plot_signal"]
