"""The comparison of ``l0mem compare`` as a dumbbell chart: each run's deciding slope, before and now.

One row per run present in both reports, in the comparison's order. The
baseline's deciding slope (MiB of host per GiB of device) is a hollow circle,
the current one a filled diamond, joined by an arrow from before to now
(none where the markers overlap: the numbers above say how little it moved). A
run without a slope on one side has that side's marker left out and says
``no verdict`` in its row label; a regression is drawn in red and labelled
``REGRESSION``, a run the rule could not judge ``not judged``. Behind the
data, lightly, the verdict zones of the default analysis (clean, partial,
mirror); over it the 1:1 reference (a full mirror, 1024 MiB per GiB), which
no row's numbers cross: a label that would is set beside it, on its point's
side. The legend sits below the axes, never over the data.
"""

from __future__ import annotations

import textwrap
from typing import Any

from l0mem.audit.compare import Comparison, RunChange
from l0mem.estimate import AnalysisConfig
from l0mem.files import PathLike
from l0mem.plots.figure import (
    DATA_ZORDER,
    FULL_MIRROR,
    MIRROR_REFERENCE,
    REFERENCE_ZORDER,
    new_figure,
    save_figure,
    simulator_suffix,
)
from l0mem.units import fixed

WIDTH_IN = 10.0
ROW_HEIGHT_IN = 0.62
REGRESSION_COLOUR = "#d62728"
OK_COLOUR = "#1f77b4"
UNJUDGED_COLOUR = "#7f7f7f"  # not judged, and not a failure (--allow-unjudged, a skipped run)
ZONE_COLOURS = {"clean": "#4daf4a", "partial": "#ff9f1c", "mirror": "#e41a1c"}
ZONE_ALPHA = 0.12
MIN_ARROW = 0.02  # of the axis: a shorter move has its markers overlap, and no arrow
NOTE_WIDTH = 150  # characters per line of the note on runs in one report only
BEFORE: dict[str, Any] = {"ls": "", "marker": "o", "ms": 9, "mfc": "none", "mew": 2}
NOW: dict[str, Any] = {"ls": "", "marker": "D", "ms": 8}
ARROW: dict[str, Any] = {"arrowstyle": "-|>", "mutation_scale": 14, "shrinkA": 6, "shrinkB": 6}
LABEL_RISE_PT = 7  # a row's numbers above its markers
LABEL_GAP_PT = 4  # between the 1:1 line and a label set beside it


def zones() -> list[tuple[str, float, float]]:
    """Return (verdict, from, to) in MiB/GiB per verdict zone of the default analysis (open ends infinite)."""
    config = AnalysisConfig()
    clean, mirror = config.clean_threshold * FULL_MIRROR, config.mirror_threshold * FULL_MIRROR
    inf = float("inf")
    return [("clean", -inf, clean), ("partial", clean, mirror), ("mirror", mirror, inf)]


def row_colour(change: RunChange) -> str:
    """Return the colour a run's row is drawn in: red for a regression, grey when not judged."""
    if change.regression:
        return REGRESSION_COLOUR
    return UNJUDGED_COLOUR if _not_judged(change) else OK_COLOUR


def row_label(change: RunChange) -> str:
    """Return a row's label: the run, its verdicts before and now, and what the rule made of it."""
    before = change.baseline_verdict or change.baseline_status
    now = change.current_verdict or change.current_status
    tags = []
    if change.regression:
        tags.append("REGRESSION")
    if _not_judged(change):
        tags.append("not judged")
    slopes = {"before": change.baseline_slope, "now": change.current_slope}
    if sides := " or ".join(side for side, slope in slopes.items() if slope is None):
        tags.append(f"no verdict {sides}")
    return f"{change.label}\n{before} -> {now}" + (f"\n{', '.join(tags)}" if tags else "")


def _not_judged(change: RunChange) -> bool:
    return not change.judged or change.note.startswith("not judged")


def write_compare_plot(comparison: Comparison, path: PathLike) -> None:
    """Draw each common run's deciding slope before and now as a dumbbell chart, to PNG or SVG."""
    changes = comparison.changes
    fig, fmt = new_figure(path, WIDTH_IN, max(3.6, 2.4 + ROW_HEIGHT_IN * len(changes)))
    fig.suptitle(
        "l0mem compare: deciding slope before -> now "
        f"(tolerance +{comparison.slope_tolerance:g} MiB/GiB)"
        + simulator_suffix([comparison.simulated], comparison.no_hardware)
    )
    ax = fig.subplots()
    note = _apart_note(comparison)
    if note:
        ax.set_title(note, loc="left", fontsize="small")
    if not changes:
        ax.text(0.5, 0.5, "no run in both reports", ha="center", va="center")
        ax.set_axis_off()
        save_figure(fig, fmt, path)
        return
    slopes = [s for c in changes for s in (c.baseline_slope, c.current_slope) if s is not None]
    lo, hi = min([0.0, *slopes]), max([FULL_MIRROR, *slopes])
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    for verdict, start, end in zones():
        span = ax.axvspan(max(start, lo), min(end, hi), color=ZONE_COLOURS[verdict], lw=0)
        where = f"below {end:g}" if start < lo else f"{start:g} to {end:g}"
        label = f"{verdict}: " + (f"{start:g} and above" if end > hi else where)
        span.set(alpha=ZONE_ALPHA, zorder=0, label=label, gid=f"zone-{verdict}")
    for i, change in enumerate(changes):
        _draw_row(ax, i, change, MIN_ARROW * (hi - lo))
    ax.axvline(FULL_MIRROR, **MIRROR_REFERENCE)
    ax.set_xlim(lo, hi)
    ax.set_ylim(len(changes) - 0.5, -0.5)
    ax.set_yticks(range(len(changes)), [row_label(c) for c in changes], fontsize="small")
    for tick, change in zip(ax.get_yticklabels(), changes, strict=True):
        tick.set_color(row_colour(change))
    ax.set_xlabel("deciding slope (MiB of host memory per GiB of device memory)")
    ax.grid(True, axis="x", alpha=0.3)
    _legend(fig, ax)
    _beside_the_reference(fig, ax)
    save_figure(fig, fmt, path)


def _beside_the_reference(fig: Any, ax: Any) -> None:
    """Set each row's numbers that the 1:1 line would run through beside it, on their point's side.

    Measured once the figure is laid out; the side of the point unless the
    label has no room there within the axes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    line = ax.transData.transform((FULL_MIRROR, 0.0))[0]
    frame = ax.get_window_extent(renderer)
    gap = LABEL_GAP_PT * fig.dpi / 72
    for text in ax.texts:  # the numbers of each row (annotations)
        box = text.get_window_extent(renderer)
        if box.x1 + gap < line or line < box.x0 - gap:
            continue
        x, y = text.xy
        left = x <= FULL_MIRROR
        if left and line - gap - box.width < frame.x0:
            left = False
        elif not left and line + gap + box.width > frame.x1:
            left = True
        text.xy = (FULL_MIRROR, y)
        text.set_horizontalalignment("right" if left else "left")
        text.set_position((-LABEL_GAP_PT if left else LABEL_GAP_PT, LABEL_RISE_PT))


def _draw_row(ax: Any, i: int, change: RunChange, min_arrow: float) -> None:
    """Draw one run: its markers, the arrow from before to now (unless they overlap), the numbers."""
    from matplotlib.patches import FancyArrowPatch

    colour = row_colour(change)
    before, now = change.baseline_slope, change.current_slope
    if now is not None:
        ax.plot([now], [i], color=colour, zorder=DATA_ZORDER + 0.5, gid=f"now-{i}", **NOW)
    if before is not None:
        # Hollow and over the diamond: a slope that did not move still shows both.
        ax.plot([before], [i], mec=colour, zorder=DATA_ZORDER + 1, gid=f"before-{i}", **BEFORE)
    shown = [v for v in (now, before) if v is not None]
    if not shown:
        return
    text = _mib(shown[0])
    if before is not None and now is not None:
        text = f"{_mib(before)} -> {_mib(now)} ({_mib(now - before, sign=True)})"
        if abs(now - before) >= min_arrow:
            arrow = FancyArrowPatch((before, i), (now, i), lw=1.6, color=colour, **ARROW)
            ax.add_patch(arrow).set(zorder=DATA_ZORDER, gid=f"arrow-{i}")
    ax.annotate(
        text,
        (shown[0], i),
        xytext=(0, LABEL_RISE_PT),
        textcoords="offset points",
        ha="center",
        va="bottom",
        fontsize="x-small",
        color=colour,
        zorder=REFERENCE_ZORDER + 1,
    )


def _mib(value: float, sign: bool = False) -> str:
    # As the table shows it: a tiny negative slope, or a change of nothing, is 0 ("-0", "+0" never).
    return fixed(value, sign=sign)


def _apart_note(comparison: Comparison) -> str:
    """Return a line on the runs in one report only (not drawn: nothing to compare), or ""."""
    parts = []
    for name, keys in (("baseline", comparison.missing), ("current report", comparison.new)):
        labels = [
            (s if r is None else f"{s} [{r}]")
            + (" (REGRESSION)" if (s, r) in comparison.lost else "")
            for s, r in keys
        ]
        if labels:
            parts.append(textwrap.fill(f"only in the {name}: {', '.join(labels)}", NOTE_WIDTH))
    return "\n".join(parts)


def _legend(fig: Any, ax: Any) -> None:
    from matplotlib.lines import Line2D

    # Column by column: the markers and the reference, the row colours, the zones (as drawn).
    *zones_drawn, reference = ax.get_legend_handles_labels()[0]
    handles = [
        Line2D([], [], mec="black", label="baseline (before)", **BEFORE),
        Line2D([], [], color="black", label="current (now)", **NOW),
        reference,
        Line2D([], [], color=OK_COLOUR, lw=1.6, label="no regression"),
        Line2D([], [], color=REGRESSION_COLOUR, lw=1.6, label="REGRESSION"),
        Line2D([], [], color=UNJUDGED_COLOUR, lw=1.6, label="not judged"),
        *zones_drawn,
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)


__all__ = ["REGRESSION_COLOUR", "row_colour", "row_label", "write_compare_plot", "zones"]
