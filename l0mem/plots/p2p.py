"""The ``l0mem p2p`` heatmap: copy bandwidth from every device to every device, with its route.

One panel per size of the sweep; a cell is the source (row) copying to the
destination (column) by the route l0mem takes for that pair: the same-device
copy on the diagonal, the direct device-to-device copy where the pair has
one, else the copy staged through host memory. Each cell says its median
GB/s (10^9 bytes/s) and its route; a copy that was not timed (no hardware,
``--verify-only``, skipped, hung) is grey and says why. All panels share one
colour scale, logarithmic where the bandwidths span more than a decade.
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
        value = f"{self.gbps:.1f}" if self.gbps is not None else self.note
        return f"{value}\n{ROUTE_LABELS.get(self.route, self.route)}"


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
    for k, (ax, (nbytes, grid)) in enumerate(zip(axes, grids.items(), strict=False)):
        image = _panel(ax, grid, norm)
        ax.set_title(f"{format_size(nbytes)} per copy" if nbytes else "no size")
        if k % ncols == 0:
            ax.set_ylabel("source device")
    for ax in axes[len(grids) :]:
        ax.set_axis_off()
    if image is not None and n:
        fig.colorbar(
            image, ax=list(axes[: len(grids)]), label="median GB/s (1e9 bytes/s)", shrink=0.8
        )
    # The names once, below: as tick labels they would crowd every panel.
    names = "; ".join(f"{i}: {name}" for i, name in enumerate(result.devices))
    fig.supxlabel(f"devices: {names}", fontsize="small")
    save_figure(fig, fmt, path)


def _panel(ax: Any, grid: list[list[PairCell]], norm: Any) -> Any:
    """Draw one size's heatmap with each cell annotated; return the image."""
    import numpy as np
    from matplotlib import colormaps

    n = len(grid)
    values = np.array(
        [[math.nan if c.gbps is None else c.gbps for c in row] for row in grid], dtype=float
    ).reshape(n, n)
    cmap = colormaps["viridis"].with_extremes(bad=NOT_TIMED)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="equal")
    size = "medium" if n <= 2 else "small" if n <= 4 else "x-small"
    for row in grid:
        for c in row:
            shade = "black"
            if c.gbps is not None:
                r, g, b, _ = cmap(norm(c.gbps))
                shade = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(c.dst, c.src, c.text, ha="center", va="center", fontsize=size, color=shade)
    ax.set_xticks(range(n), [str(i) for i in range(n)])
    ax.set_yticks(range(n), [str(i) for i in range(n)])
    ax.set_xlabel("destination device")
    return image


__all__ = ["ROUTE_LABELS", "PairCell", "pair_grid", "write_p2p_plot"]
