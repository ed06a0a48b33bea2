"""The audit plot: host memory cost against device memory, one panel per set-up.

Each run's samples of its deciding signal (:func:`plot_signal`) are drawn
climb by climb: a climb starts where device memory was last none (the idle
samples for the first, the samples after a free for the next) and its costs
are read from that start, as the analysis reads each climb
(:func:`l0mem.estimate.fits.climbs`). A machine-wide signal such as
``host.available`` moves with every other process; drawn from the run's first
idle samples, a later climb would sit wherever the neighbours had left the
host, hundreds of MiB away from where it began. The freed samples after a
climb stay on that climb's zero: what the free did not give back shows.

Over the data, on top: the run's fitted line (the analysis's slope), the
1:1 reference (a full mirror, 1024 MiB of host per GiB of device) and 0 (no
host cost). Legends sit below the panels, never over the data.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any

from l0mem.audit.model import AuditReport, SetupRun
from l0mem.estimate import DEFAULT_CONFIG, cost_series, recorded_signals
from l0mem.estimate.model import Sample, SignalFit
from l0mem.files import PathLike
from l0mem.plots.figure import (
    DATA_ZORDER,
    FULL_MIRROR,
    REFERENCE_ZORDER,
    draw_references,
    new_figure,
    save_figure,
    simulator_suffix,
)

WIDTH_IN = 10.0
PANEL_HEIGHT_IN = 4.6
COLUMNS = 2

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


def _label(run: SetupRun, signal: str) -> str:
    verdict: str = "not analysed" if run.result is None else run.result.verdict
    if run.host_memory and verdict in ("mirror", "partial"):
        verdict += ", expected: host memory"
    return f"{run.remedy or 'no remedy'}: {verdict} ({signal})"


def _draw_run(ax: Any, report: AuditReport, run: SetupRun, color: str) -> float:
    """Draw one run's climbs and fitted line; return the largest device GiB drawn."""
    signal = plot_signal(report, run)
    if signal is None:
        return 0.0
    climbs = climbs_of(run.samples, signal)
    label: str | None = _label(run, signal)
    freeing: str | None = "while freeing"
    top = 0.0
    for k, c in enumerate(climbs):
        line = (c.base if k == 0 else []) + c.up
        if line:
            ax.plot(
                [p[0] for p in line],
                [p[1] for p in line],
                "o-",
                ms=3,
                lw=0.8,
                color=color,
                alpha=0.85,
                label=label,
                zorder=DATA_ZORDER,
            )
            label = None
        if c.down:
            # Joined to the peak, hollow: the way down is read apart from the way up.
            down = c.up[-1:] + c.down
            ax.plot(
                [p[0] for p in down],
                [p[1] for p in down],
                "o:",
                ms=4,
                lw=0.8,
                mfc="none",
                color=color,
                alpha=0.85,
                label=freeing,
                zorder=DATA_ZORDER,
            )
            freeing = None
        if c.freed:
            ax.plot(
                [p[0] for p in c.freed],
                [p[1] for p in c.freed],
                "x",
                ms=7,
                color=color,
                label="after free" if k == 0 else None,
                zorder=DATA_ZORDER,
            )
        top = max([top, *(x for x, _ in c.up)])
    fit = run.result.fit(signal) if run.result is not None else None
    drawn = None if fit is None or top <= 0 else fitted_line(fit, climbs)
    if drawn is not None and fit is not None:
        intercept, slope = drawn
        ax.plot(
            [0.0, top],
            [intercept, intercept + slope * top],
            "--",
            lw=2,
            color=color,
            label=f"fit: {slope:.0f} MiB/GiB ({_interval(fit)})",
            zorder=REFERENCE_ZORDER + 1,
            gid="fit",
        )
    return top


def _interval(fit: SignalFit) -> str:
    iv = fit.interval
    return fit.method if iv is None else f"{iv[0]:.0f} to {iv[1]:.0f}, {fit.method}"


def write_audit_plot(report: AuditReport, path: PathLike) -> None:
    """Plot host memory cost (MiB) against device GiB per set-up, with each run's fit, to PNG or SVG."""
    setups: dict[str, list[SetupRun]] = {}
    for run in report.runs:
        if run.samples:
            setups.setdefault(run.setup, []).append(run)
    ncols = min(COLUMNS, max(1, len(setups)))
    nrows = max(1, math.ceil(len(setups) / ncols))
    fig, fmt = new_figure(path, WIDTH_IN, max(6.0, PANEL_HEIGHT_IN * nrows + 1.4))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    plotted = [r for runs in setups.values() for r in runs]
    fig.suptitle(
        "Host memory cost of device allocations"
        + simulator_suffix(
            [r.simulated for r in plotted],
            any(report.run_platform(r) == "no-hardware" for r in plotted),
        )
    )
    if not setups:
        axes[0].text(0.5, 0.5, "no set-up has samples", ha="center", va="center")
        axes[0].set_axis_off()
    colors = [f"C{i}" for i in range(10)]
    for ax, (setup, runs) in zip(axes, setups.items(), strict=False):
        top = max([0.0, *(_draw_run(ax, report, r, colors[i % 10]) for i, r in enumerate(runs))])
        if top > 0:
            draw_references(ax, top)
        ax.set_title(setup + (" (SIMULATOR)" if any(r.simulated for r in runs) else ""))
        ax.set_xlabel("device memory allocated (GiB)")
        ax.set_ylabel("host memory cost from the climb's start (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(
            fontsize="small",
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncols=2,
            frameon=False,
        )
    for ax in axes[len(setups) :]:
        if setups:
            ax.set_axis_off()
    save_figure(fig, fmt, path)


__all__ = ["FULL_MIRROR", "Climb", "climbs_of", "fitted_line", "plot_signal", "write_audit_plot"]
