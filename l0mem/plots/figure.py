"""The one way l0mem makes and writes a figure: matplotlib without pyplot, written atomically.

A figure is a bare ``matplotlib.figure.Figure`` on the Agg canvas: no
global backend state, no display needed, safe in a thread. It is written
through :func:`l0mem.files.write_bytes` (a temporary file in the same
directory, then a rename; a special file is never replaced).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from l0mem.files import PathLike, write_bytes
from l0mem.text import xml_text

PLOT_FORMATS = {".png": "png", ".svg": "svg"}
# Dots per inch of a PNG: a 10-inch-wide figure is 1200 pixels, readable on a laptop unscaled.
DPI = 120
# Above the data: a reference must stay visible over the points it is read against.
REFERENCE_ZORDER = 4
DATA_ZORDER = 2
FULL_MIRROR = 1024.0  # MiB of host per GiB of device: every device byte mirrored


class MissingDependencyError(ImportError):
    """An optional dependency needed for the request is not installed."""


def plot_format(path: PathLike) -> str:
    """Return the format ``path`` asks for (``png`` or ``svg``); raise ValueError for another suffix."""
    fmt = PLOT_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: plot file must end in .png or .svg")
    return fmt


def new_figure(path: PathLike, width: float, height: float) -> tuple[Any, str]:
    """Return an empty matplotlib Figure and the format ``path`` asks for (.png or .svg).

    Raise ValueError for another suffix and MissingDependencyError without matplotlib.
    """
    fmt = plot_format(path)
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(
            "plotting needs matplotlib: install the plot extra (pip install 'l0mem[plot]')"
        ) from None
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained"), fmt


def _shown_as_written(fig: Any) -> None:
    """Show every control character in the figure's text as its code (``\\x1b``).

    A report's strings (a command's name, a stack label) reach titles and
    labels; in an SVG a control character is no valid XML, and the file would
    not parse.
    """
    from matplotlib.text import Text

    for artist in fig.findobj(Text):
        text = artist.get_text()
        shown = xml_text(text, keep="\n")
        if shown != text:
            artist.set_text(shown)


def save_figure(fig: Any, fmt: str, path: PathLike) -> None:
    """Write ``fig`` to ``path`` in ``fmt``, atomically (:func:`l0mem.files.write_bytes`)."""
    import matplotlib

    _shown_as_written(fig)
    buf = io.BytesIO()
    # Text kept as text in an SVG: smaller, searchable, and its labels readable by tools.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format=fmt, dpi=DPI)
    write_bytes(path, buf.getvalue())


def simulator_suffix(simulated: list[bool], no_hardware: bool = False) -> str:
    """Return what a title adds for simulated numbers (all, or some panels) and a driver without hardware."""
    text = ""
    if simulated and all(simulated):
        text = " (SIMULATOR, not hardware)"
    elif any(simulated):
        text = " (panels marked SIMULATOR: simulator, not hardware)"
    if no_hardware:
        text += " (NO HARDWARE: the GPU driver executed nothing)"
    return text


# How every plot draws the 1:1 mirror: one look wherever it appears.
MIRROR_REFERENCE: dict[str, Any] = {
    "ls": ":",
    "lw": 1.8,
    "color": "black",
    "label": "1:1 mirror (1024 MiB per GiB)",
    "zorder": REFERENCE_ZORDER,
    "gid": "ref-mirror",
}


def draw_references(ax: Any, top: float) -> None:
    """Draw the 1:1 mirror (up to ``top`` GiB) and the 0 references over the data, labelled."""
    ax.plot([0.0, top], [0.0, FULL_MIRROR * top], **MIRROR_REFERENCE)
    ax.axhline(
        0.0,
        ls="-",
        lw=1.2,
        color="dimgrey",
        label="0: no host cost",
        zorder=REFERENCE_ZORDER,
        gid="ref-zero",
    )


__all__ = [
    "DATA_ZORDER",
    "DPI",
    "FULL_MIRROR",
    "MIRROR_REFERENCE",
    "PLOT_FORMATS",
    "REFERENCE_ZORDER",
    "MissingDependencyError",
    "draw_references",
    "new_figure",
    "plot_format",
    "save_figure",
    "simulator_suffix",
]
