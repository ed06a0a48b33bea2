"""The fleet matrix of ``l0mem matrix`` as a heatmap: driver stacks against set-ups.

One panel per group (platform and schema major, as the tables have them; the
simulator's panel says SIMULATOR). Rows are the stacks, columns the set-ups,
both in the tables' order. A cell is coloured by the verdict it is judged by
(its worst run, :attr:`l0mem.audit.matrix.Cell.worst`), hatched where the
machines of that stack disagree, and labelled with the median ratio (host
bytes per device byte, 1.00 a full mirror) and the number of machines.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from l0mem.audit.matrix import Cell, Matrix
from l0mem.files import PathLike
from l0mem.plots.figure import new_figure, save_figure
from l0mem.units import fixed

VERDICT_COLOURS = {
    "clean": "#4daf4a",
    "partial": "#ff9f1c",
    "mirror": "#e41a1c",
    "inconclusive": "#bdbdbd",
}
OTHER_COLOUR = "#f0f0f0"  # a run without a verdict (failed, interrupted)
STACK_WIDTH = 34  # characters per line of a stack's label


def cell_verdict(cell: Cell) -> str:
    """Return the verdict a cell is coloured by: its worst run's, else that run's status."""
    run = cell.worst
    return run.result.verdict if run.result is not None else run.status


def cell_ratio(cell: Cell) -> float | None:
    """Return the cell's median ratio: host bytes per device byte (its median slope over 1024)."""
    return None if cell.slope is None else cell.slope / 1024.0


def cell_label(cell: Cell) -> str:
    """Return a cell's annotation: verdict, median ratio, machines, and DISAGREE where they do."""
    ratio = cell_ratio(cell)
    # The verdict in words too: the colours alone do not read in grey or to every eye.
    # A clean cell's median a hair below 0 reads 0.00, as the tables show it: never "-0.00".
    text = f"{cell_verdict(cell)}\n" + ("-" if ratio is None else fixed(ratio, 2))
    text += f"\nn={cell.machines}"
    return text + ("\nDISAGREE" if cell.disagree else "")


def _stack_label(stack: str, baseline: str | None) -> str:
    # One component per line: a stack line runs past 100 characters.
    lines = [
        piece for part in stack.split(" | ") for piece in textwrap.wrap(part, STACK_WIDTH) or [part]
    ]
    return "\n".join(lines) + ("\n(baseline)" if stack == baseline else "")


def _group_title(group: str) -> str:
    if group.startswith("simulator"):
        return "SIMULATOR, not hardware: " + group
    if group.startswith("no-hardware"):
        return "NO HARDWARE, the GPU driver executed nothing: " + group
    return group


def write_matrix_plot(
    matrices: Sequence[Matrix], path: PathLike, *, baseline: str | None = None
) -> None:
    """Draw each group's matrix as a heatmap of verdicts labelled with median ratios, to PNG or SVG."""
    heights = [max(1, len(m.stacks)) * _row_height(m) + 1.6 for m in matrices] or [3.0]
    widest = max((len(m.columns) for m in matrices), default=1)
    fig, fmt = new_figure(path, max(10.0, 3.6 + 1.3 * widest), max(4.0, sum(heights) + 1.0))
    fig.suptitle(
        "Fleet matrix: verdict per driver stack and set-up (cells: median ratio, machines)"
    )
    if not matrices:
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no audit report", ha="center", va="center")
        ax.set_axis_off()
    else:
        axes = fig.subplots(len(matrices), 1, squeeze=False, height_ratios=heights).ravel()
        for ax, m in zip(axes, matrices, strict=True):
            _panel(ax, m, baseline)
        _legend(fig)
    save_figure(fig, fmt, path)


def _row_height(m: Matrix) -> float:
    lines = max((_stack_label(s, None).count("\n") + 1 for s in m.stacks), default=1)
    return max(0.9, 0.2 * lines)


def _panel(ax: Any, m: Matrix, baseline: str | None) -> None:
    """Draw one group's matrix: a coloured, annotated cell per stack and set-up."""
    from matplotlib.patches import Rectangle

    stacks, columns = m.stacks, m.columns
    for i, stack in enumerate(stacks):
        for j, column in enumerate(columns):
            cell = m.cells[stack].get(column)
            if cell is None or not cell.runs:
                continue
            verdict = cell_verdict(cell)
            ax.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    facecolor=VERDICT_COLOURS.get(verdict, OTHER_COLOUR),
                    edgecolor="white",
                    lw=2,
                    hatch="//" if cell.disagree else None,
                    gid=f"cell-{i}-{j}",
                )
            )
            ax.text(
                j,
                i,
                cell_label(cell),
                ha="center",
                va="center",
                fontsize="small",
                # Readable over a hatched cell.
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "linewidth": 0},
            )
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(stacks) - 0.5, -0.5)
    ax.set_xticks(range(len(columns)), columns, rotation=20, ha="right")
    ax.set_yticks(range(len(stacks)), [_stack_label(s, baseline) for s in stacks], fontsize="small")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(_group_title(m.group), loc="left")


def _legend(fig: Any) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=c, label=v) for v, c in VERDICT_COLOURS.items()]
    handles.append(Patch(facecolor=OTHER_COLOUR, label="no verdict (failed, interrupted)"))
    handles.append(
        Patch(facecolor="white", edgecolor="black", hatch="//", label="machines disagree")
    )
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)


__all__ = [
    "VERDICT_COLOURS",
    "cell_label",
    "cell_ratio",
    "cell_verdict",
    "write_matrix_plot",
]
