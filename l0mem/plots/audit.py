"""The audit plot: host memory cost against device memory, one panel per set-up.

Each run's samples of its deciding signal (:func:`.climbs.plot_signal`) are
drawn climb by climb (:mod:`.climbs`): a climb starts where device memory was
last none (the idle samples for the first, the samples after a free for the
next) and its costs are read from that start, as the analysis reads each
climb (:func:`l0mem.estimate.fits.climbs`). A machine-wide signal such as
``host.available`` moves with every other process; drawn from the run's first
idle samples, a later climb would sit wherever the neighbours had left the
host, hundreds of MiB away from where it began. The freed samples after a
climb stay on that climb's zero: what the free did not give back shows.

Over the data, on top: the run's fitted line (the analysis's slope), the
1:1 reference (a full mirror, 1024 MiB of host per GiB of device) and 0 (no
host cost). The y axis is set by the climbs, the fitted lines and the
references, with a margin: on a busy machine the samples while and after
freeing move with the neighbours (-1900 MiB), and would squash the climb
into a sliver. What lies beyond the axis is marked at its edge (a triangle
pointing the way) and counted in the panel ("3 points off scale"). Legends sit below the panels, never over the data: under each
panel one entry per run (its colour, verdict, signal and fitted slope), under
the figure one key to the line styles. Every label is wrapped to the width a
panel has and the figure is made as tall as its legends need, so nothing is
cut at the image's edges however many set-ups and remedies it shows.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Sequence
from typing import Any

from l0mem.audit.model import AuditReport, SetupRun
from l0mem.estimate.model import SignalFit
from l0mem.files import PathLike
from l0mem.plots.climbs import Points, climbs_of, fitted_line, plot_signal
from l0mem.plots.figure import (
    DATA_ZORDER,
    FULL_MIRROR,
    MIRROR_REFERENCE,
    REFERENCE_ZORDER,
    draw_references,
    new_figure,
    save_figure,
    simulator_suffix,
)
from l0mem.units import fixed

WIDTH_IN = 10.0
AXES_HEIGHT_IN = 3.0
COLUMNS = 2
# Below a panel's axes: its tick labels and x label, then its legend.
UNDER_AXES_IN = 0.5
# One line of legend text at the legend's font (small), and the space between entries.
LEGEND_LINE_IN = 0.17
LEGEND_GAP_IN = 0.07
# Characters of a legend line in a panel of one column and of two (small font, after the handle).
LABEL_CHARS = {1: 100, 2: 48}
TITLE_CHARS = 90
Y_MARGIN = 0.06  # of the y range the climbs, fits and references span, above and below
OFF_SCALE = "off-scale"  # the gid of the markers at the axis's edge


def _label(run: SetupRun, signal: str) -> str:
    verdict: str = "not analysed" if run.result is None else run.result.verdict
    if run.host_memory and verdict in ("mirror", "partial"):
        verdict += ", expected: host memory"
    return f"{run.remedy or 'no remedy'}: {verdict} ({signal})"


def _entry(report: AuditReport, run: SetupRun, chars: int) -> str:
    """Return a run's legend text, lines of at most ``chars``: verdict and signal, then its fit."""
    signal = plot_signal(report, run)
    if signal is None:
        return ""
    parts = [_label(run, signal)]
    fit = run.result.fit(signal) if run.result is not None else None
    if fit is not None and fit.slope is not None:
        parts.append(f"fit {fixed(fit.slope)} MiB/GiB ({_interval(fit)})")
    return "\n".join(_wrapped(part, chars) for part in parts)


@dataclasses.dataclass
class _Drawn:
    """What one run drew: its largest device GiB, its legend handle, and which styles it used."""

    top: float = 0.0
    handle: Any = None  # the run's first line: its colour and marker in the panel's legend
    styles: set[str] = dataclasses.field(default_factory=set)
    held: list[float] = dataclasses.field(default_factory=list)  # costs the y axis must hold
    loose: Points = dataclasses.field(default_factory=list)  # while and after freeing
    color: str = "C0"


def _draw_run(ax: Any, report: AuditReport, run: SetupRun, color: str) -> _Drawn:
    """Draw one run's climbs and fitted line; return what was drawn (:class:`_Drawn`)."""
    drawn_run = _Drawn(color=color)
    signal = plot_signal(report, run)
    if signal is None:
        return drawn_run
    climbs = climbs_of(run.samples, signal)
    label: str | None = _label(run, signal)
    freeing: str | None = "while freeing"
    top = 0.0
    for k, c in enumerate(climbs):
        line = (c.base if k == 0 else []) + c.up
        drawn_run.held += [y for _, y in line]
        drawn_run.loose += c.down + c.freed
        if line:
            (drawn_line,) = ax.plot(
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
            if label is not None:
                drawn_run.handle = drawn_line
                drawn_run.styles.add("climb")
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
            drawn_run.styles.add("freeing")
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
            drawn_run.styles.add("freed")
        top = max([top, *(x for x, _ in c.up)])
    fit = run.result.fit(signal) if run.result is not None else None
    drawn = None if fit is None or top <= 0 else fitted_line(fit, climbs)
    if drawn is not None and fit is not None:
        intercept, slope = drawn
        drawn_run.held += [intercept, intercept + slope * top]
        ax.plot(
            [0.0, top],
            [intercept, intercept + slope * top],
            "--",
            lw=2,
            color=color,
            label=f"fit: {fixed(slope)} MiB/GiB ({_interval(fit)})",
            zorder=REFERENCE_ZORDER + 1,
            gid="fit",
        )
        drawn_run.styles.add("fit")
    drawn_run.top = top
    return drawn_run


def _interval(fit: SignalFit) -> str:
    iv = fit.interval
    return fit.method if iv is None else f"{fixed(iv[0])} to {fixed(iv[1])}, {fit.method}"


def _wrapped(text: str, chars: int) -> str:
    """Return ``text`` broken into lines of at most ``chars`` characters, between words."""
    return "\n".join(textwrap.wrap(text, chars, break_on_hyphens=False)) or text


def _legend_height(entries: Sequence[str]) -> float:
    """Return the inches a legend of ``entries`` (wrapped text) takes."""
    if not entries:
        return 0.0
    lines = sum(e.count("\n") + 1 for e in entries)
    return lines * LEGEND_LINE_IN + len(entries) * LEGEND_GAP_IN + 0.15


def _style_keys(styles: set[str]) -> list[Any]:
    """Return the handles of the figure's key to the line styles drawn (neutral colours)."""
    from matplotlib.lines import Line2D

    keys: list[tuple[str, dict[str, Any], str]] = [
        ("climb", {"ls": "-", "marker": "o", "ms": 3, "lw": 0.8}, "while allocating (the climb)"),
        ("freeing", {"ls": ":", "marker": "o", "ms": 4, "lw": 0.8, "mfc": "none"}, "while freeing"),
        ("freed", {"ls": "", "marker": "x", "ms": 7}, "after free"),
        ("fit", {"ls": "--", "lw": 2}, "fitted line (the analysis's slope)"),
    ]
    handles = [
        Line2D([], [], color="dimgrey", label=label, **style)
        for name, style, label in keys
        if name in styles
    ]
    if "off scale" in styles:
        handles.append(
            Line2D([], [], ls="", marker="v", ms=6, color="dimgrey", label="off scale, at the edge")
        )
    if "references" in styles:
        handles.append(Line2D([], [], **{**MIRROR_REFERENCE, "gid": None}))
        handles.append(Line2D([], [], ls="-", lw=1.2, color="dimgrey", label="0: no host cost"))
    return handles


def _on_scale(ax: Any, drawn: Sequence[_Drawn], mirror_top: float | None) -> bool:
    """Set the y axis to the climbs, fits and references; mark what lies beyond. Return whether any does."""
    held = [y for d in drawn for y in d.held]
    if not held:
        return False
    # The references: 0, and the 1:1 line as far as it is drawn.
    held += [0.0] + ([mirror_top] if mirror_top is not None else [])
    low, high = min(held), max(held)
    margin = Y_MARGIN * (high - low) or 1.0
    low, high = low - margin, high + margin
    ax.set_ylim(low, high)
    off = 0
    for d in drawn:
        for edge, marker, outside in (
            (low, "v", lambda y: y < low),
            (high, "^", lambda y: y > high),
        ):
            xs = [x for x, y in d.loose if outside(y)]
            if xs:
                # On the edge and not clipped: the point is there, further than the axis goes.
                ax.plot(
                    xs,
                    [edge] * len(xs),
                    ls="",
                    marker=marker,
                    ms=6,
                    color=d.color,
                    clip_on=False,
                    zorder=REFERENCE_ZORDER + 2,
                    gid=OFF_SCALE,
                )
                off += len(xs)
    if off:
        ys = [y for d in drawn for _, y in d.loose if not low <= y <= high]
        ax.text(
            0.01,
            0.02 if min(ys) < low else 0.98,
            f"{off} points off scale (while or after freeing: {fixed(min(ys))} to "
            f"{fixed(max(ys))} MiB)",
            transform=ax.transAxes,
            ha="left",
            va="bottom" if min(ys) < low else "top",
            fontsize="x-small",
            color="dimgrey",
            zorder=REFERENCE_ZORDER + 2,
        )
    return bool(off)


def write_audit_plot(report: AuditReport, path: PathLike) -> None:
    """Plot host memory cost (MiB) against device GiB per set-up, with each run's fit, to PNG or SVG."""
    setups: dict[str, list[SetupRun]] = {}
    for run in report.runs:
        if run.samples:
            setups.setdefault(run.setup, []).append(run)
    ncols = min(COLUMNS, max(1, len(setups)))
    nrows = max(1, math.ceil(len(setups) / ncols))
    chars = LABEL_CHARS[ncols]
    # Each row as tall as its axes, its labels and its longest legend (one entry per run).
    rows = [list(setups.values())[r * ncols : (r + 1) * ncols] for r in range(nrows)]
    entries = {id(r): _entry(report, r, chars) for runs in setups.values() for r in runs}
    legend_in = [
        max(
            (_legend_height([entries[id(r)] for r in runs if entries[id(r)]]) for runs in row),
            default=0.0,
        )
        for row in rows
    ]
    plotted = [r for runs in setups.values() for r in runs]
    title = _wrapped(
        "Host memory cost of device allocations"
        + simulator_suffix(
            [r.simulated for r in plotted],
            any(report.run_platform(r) == "no-hardware" for r in plotted),
        ),
        TITLE_CHARS,
    )
    height = sum(0.4 + AXES_HEIGHT_IN + UNDER_AXES_IN + h for h in legend_in)
    height += 0.35 * (title.count("\n") + 1) + 1.0  # the title; the key to the styles
    fig, fmt = new_figure(path, WIDTH_IN, max(6.0, height))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    fig.suptitle(title)
    if not setups:
        axes[0].text(0.5, 0.5, "no set-up has samples", ha="center", va="center")
        axes[0].set_axis_off()
    colors = [f"C{i}" for i in range(10)]
    styles: set[str] = set()
    for ax, (setup, runs) in zip(axes, setups.items(), strict=False):
        drawn = [_draw_run(ax, report, r, colors[i % 10]) for i, r in enumerate(runs)]
        top = max([0.0, *(d.top for d in drawn)])
        if top > 0:
            draw_references(ax, top)
            styles.add("references")
        if _on_scale(ax, drawn, FULL_MIRROR * top if top > 0 else None):
            styles.add("off scale")
        styles.update(*(d.styles for d in drawn))
        ax.set_title(setup + (" (SIMULATOR)" if any(r.simulated for r in runs) else ""))
        ax.set_xlabel("device memory allocated (GiB)")
        ax.set_ylabel("host memory cost (MiB)\nfrom the climb's start")
        ax.grid(True, alpha=0.3)
        shown = [
            (d.handle, entries[id(r)])
            for d, r in zip(drawn, runs, strict=True)
            if d.handle is not None
        ]
        if shown:
            from matplotlib.transforms import ScaledTranslation

            # Its top a fixed distance under the axes (below the x label), whatever their height.
            under = ax.transAxes + ScaledTranslation(0, -UNDER_AXES_IN, fig.dpi_scale_trans)
            ax.legend(
                [handle for handle, _ in shown],
                [text for _, text in shown],
                fontsize="small",
                loc="upper center",
                bbox_to_anchor=(0.5, 0.0),
                bbox_transform=under,
                frameon=False,
            )
    for ax in axes[len(setups) :]:
        if setups:
            ax.set_axis_off()
    keys = _style_keys(styles)
    if keys:
        fig.legend(
            handles=keys, loc="outside lower center", ncols=3, fontsize="small", frameon=False
        )
    save_figure(fig, fmt, path)


__all__ = ["FULL_MIRROR", "write_audit_plot"]
