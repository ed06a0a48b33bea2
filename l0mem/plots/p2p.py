"""The ``l0mem p2p`` heatmap: copy bandwidth from every device to every device, with its route.

One panel per size of the sweep; a cell is the source (row) copying to the
destination (column) by the route l0mem takes for that pair: the same-device
copy on the diagonal, the direct device-to-device copy where the pair has
one, else the copy staged through host memory. Each cell says its median
GB/s (10^9 bytes/s) and its route; a copy that was not timed (no hardware,
``--verify-only``, skipped, hung) is grey and says why. All panels share one
colour scale, logarithmic where the bandwidths span more than a decade.

Every label fits its cell: measured once the panels are laid out, it is set
smaller, then its words on lines of their own (``same`` / ``device``), and
where the cells are too small even so the route is one letter (S, D, H),
which a note under the panels spells out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from l0mem.bench.p2p import P2PResult
from l0mem.files import PathLike
from l0mem.plots.figure import new_figure, save_figure, simulator_suffix
from l0mem.units import format_size

ROUTE_LABELS = {"same_device": "same device", "direct": "direct", "staged": "host-staged"}
# Each route's label on lines of its own, and as one letter where even that does not fit.
ROUTE_LINES = {"same_device": "same\ndevice", "direct": "direct", "staged": "host-\nstaged"}
ROUTE_LETTERS = {"same_device": "S", "direct": "D", "staged": "H"}
LETTERS_NOTE = "in the cells: S same device, D direct, H host-staged"
LABEL_POINTS = 10.0  # a label's size where its cell has room
READABLE_POINTS = 6.0  # below this, a shorter label at a larger size reads better
SMALLEST_POINTS = 4.0
CELL_FILL = 0.9  # of a cell's width and height a label may take
NAMES_WIDTH = 120  # characters of the device names' line (small type) that fit the figure
WIDTH_IN = 10.0
COLUMNS = 3
NOT_TIMED = "lightgrey"


@dataclasses.dataclass(frozen=True)
class PairCell:
    """One pair at one size as the heatmap shows it."""

    src: int
    dst: int
    route: str  # same_device, direct or staged: the copy this cell shows
    gbps: float | None  # its median bandwidth; None when not timed
    note: str  # why it was not timed, or the route's reason

    @property
    def text(self) -> str:
        """Return the cell's annotation: bandwidth (or why none) over the route."""
        return self.label(0)

    def label(self, form: int) -> str:
        """Return the annotation in ``form``: 0 as :attr:`text`, 1 a word a line, 2 the route a letter."""
        value = f"{self.gbps:.1f}" if self.gbps is not None else self.note
        if form == 0:
            return f"{value}\n{ROUTE_LABELS.get(self.route, self.route)}"
        value = value.replace(" ", "\n")
        if form == 1:
            return f"{value}\n{ROUTE_LINES.get(self.route, self.route)}"
        return f"{value}\n{ROUTE_LETTERS.get(self.route, self.route)}"


def _route(result: P2PResult, src: int, dst: int) -> tuple[str, str]:
    if src == dst:
        return "same_device", ""
    peer = next((p for p in result.peers if (p.src, p.dst) == (src, dst)), None)
    if peer is None:
        return "staged", ""
    return str(peer.route), peer.route_reason


def pair_grid(result: P2PResult, nbytes: int) -> list[list[PairCell]]:
    """Return the cells of one size's panel: row ``src``, column ``dst``."""
    grid = []
    for src in range(len(result.devices)):
        row = []
        for dst in range(len(result.devices)):
            route, reason = _route(result, src, dst)
            timing = result.timing(route, src, dst, nbytes)  # type: ignore[arg-type]
            if timing is not None and timing.measured is not None and not timing.hung:
                row.append(PairCell(src, dst, route, timing.measured.gbps, reason))
                continue
            if result.verify_only:
                why = "not timed"
            elif timing is None:
                why = "not measured"
            elif timing.hung:
                why = "HUNG"
            else:
                why = "not timed" if timing.skipped == result.no_hardware else "skipped"
            row.append(PairCell(src, dst, route, None, why))
        grid.append(row)
    return grid


def _norm(values: Sequence[float]) -> Any:
    from matplotlib.colors import LogNorm, Normalize

    positive = [v for v in values if v > 0]
    if not positive:
        return Normalize(0.0, 1.0)
    low, high = min(positive), max(positive)
    if high > 10 * low:
        return LogNorm(low, high)
    return Normalize(0.0, high)


def write_p2p_plot(result: P2PResult, path: PathLike) -> None:
    """Draw the bandwidth of every ordered device pair per size as a heatmap, to PNG or SVG."""
    n = len(result.devices)
    sizes = list(result.sizes) or [0]
    ncols = min(COLUMNS, len(sizes))
    nrows = math.ceil(len(sizes) / ncols)
    # Square cells that hold two short lines: the panels share the width, the height follows.
    cell_in = min(1.4, (WIDTH_IN - 2.0) / (ncols * max(1, n)))
    fig, fmt = new_figure(path, WIDTH_IN, max(4.8, nrows * (cell_in * n + 1.2) + 1.6))
    title = f"Copy bandwidth per device pair, GB/s ({result.backend})"
    title += simulator_suffix([result.simulated], bool(result.no_hardware))
    if result.verify_only:
        title += ": checked only (--verify-only), nothing timed"
    elif not result.complete:
        title += ": interrupted, what finished"
    fig.suptitle(title)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    grids = {nbytes: pair_grid(result, nbytes) for nbytes in sizes}
    norm = _norm([c.gbps for g in grids.values() for row in g for c in row if c.gbps])
    image = None
    labels: list[tuple[Any, PairCell]] = []
    for k, (ax, (nbytes, grid)) in enumerate(zip(axes, grids.items(), strict=False)):
        image, texts = _panel(ax, grid, norm)
        labels += texts
        ax.set_title(f"{format_size(nbytes)} per copy" if nbytes else "no size")
        if k % ncols == 0:
            ax.set_ylabel("source device")
    for ax in axes[len(grids) :]:
        ax.set_axis_off()
    if image is not None and n:
        fig.colorbar(
            image, ax=list(axes[: len(grids)]), label="median GB/s (1e9 bytes/s)", shrink=0.8
        )
    # The names once, below: as tick labels they would crowd every panel. Broken
    # between devices into lines the figure holds.
    names = _lines([f"{i}: {name}" for i, name in enumerate(result.devices)], "devices: ")
    below = fig.supxlabel(names, fontsize="small")
    if labels:
        _fit_labels(fig, labels, below, names)
    save_figure(fig, fmt, path)


def _lines(parts: list[str], head: str) -> str:
    """Return ``head`` and ``parts`` joined by ``; ``, broken between parts into lines that fit."""
    lines: list[str] = []
    for part in parts:
        if not lines:
            lines.append(f"{head}{part}")
        elif len(lines[-1]) + 2 + len(part) <= NAMES_WIDTH:
            lines[-1] += f"; {part}"
        else:
            lines[-1] += ";"
            lines.append(part)
    return "\n".join(lines) or head.rstrip()


def _fit_labels(fig: Any, labels: list[tuple[Any, PairCell]], below: Any, names: str) -> None:
    """Give every cell's label the largest size and the first form that fit every cell."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    form = 0
    for _ in range(3):
        # Laid out without the labels (they are not in the layout): the cells are known.
        fig.draw_without_rendering()
        sizes = [_fitting_points(renderer, labels, f) for f in range(3)]
        form = next((f for f, pt in enumerate(sizes) if pt >= READABLE_POINTS), 2)
        shown = f"{names}\n{LETTERS_NOTE}" if form == 2 else names
        if below.get_text() == shown:
            break
        below.set_text(shown)  # the note takes a line: the cells shrink, fit again
    points = max(SMALLEST_POINTS, sizes[form])
    for text, cell in labels:
        text.set_text(cell.label(form))
        text.set_fontsize(points)


def _fitting_points(renderer: Any, labels: list[tuple[Any, PairCell]], form: int) -> float:
    """Return the largest size (up to :data:`LABEL_POINTS`) at which every label in ``form`` fits its cell."""
    points = LABEL_POINTS
    for text, cell in labels:
        text.set_text(cell.label(form))
        text.set_fontsize(LABEL_POINTS)
        box = text.get_window_extent(renderer)
        ax = text.axes
        (x0, y0), (x1, y1) = ax.transData.transform(
            [(cell.dst - 0.5, cell.src + 0.5), (cell.dst + 0.5, cell.src - 0.5)]
        )
        room = min(
            CELL_FILL * abs(x1 - x0) / max(box.width, 1.0),
            CELL_FILL * abs(y1 - y0) / max(box.height, 1.0),
        )
        points = min(points, LABEL_POINTS * room)
    return points


def _panel(
    ax: Any, grid: list[list[PairCell]], norm: Any
) -> tuple[Any, list[tuple[Any, PairCell]]]:
    """Draw one size's heatmap with each cell annotated; return the image and the labels."""
    import numpy as np
    from matplotlib import colormaps

    n = len(grid)
    values = np.array(
        [[math.nan if c.gbps is None else c.gbps for c in row] for row in grid], dtype=float
    ).reshape(n, n)
    cmap = colormaps["viridis"].with_extremes(bad=NOT_TIMED)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="equal")
    labels = []
    for row in grid:
        for c in row:
            shade = "black"
            if c.gbps is not None:
                r, g, b, _ = cmap(norm(c.gbps))
                shade = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            text = ax.text(c.dst, c.src, c.text, ha="center", va="center", color=shade)
            # Sized to its cell once the panels are laid out (_fit_labels), not the reverse.
            text.set_in_layout(False)
            labels.append((text, c))
    ax.set_xticks(range(n), [str(i) for i in range(n)])
    ax.set_yticks(range(n), [str(i) for i in range(n)])
    ax.set_xlabel("destination device")
    return image, labels


__all__ = ["ROUTE_LABELS", "PairCell", "pair_grid", "write_p2p_plot"]
