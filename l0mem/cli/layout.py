"""Tables that fit the terminal: side by side where they fit, one block per row where they do not.

A table squeezed below its natural width folds its cells mid-word
(``SIMULAT`` / ``OR``, a setting to copy split over three lines). Where the
table's natural width is more than the terminal has, :func:`fitted` prints
each row as a block instead: its first cell as a heading, then one
``column: value`` line per other cell, each value whole (print it with
``crop=False``: a terminal wraps a long line; nothing is cut or folded
inside a word).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_UNBOUNDED = 1 << 16


def fitted(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    caption: str | None = None,
    right: Sequence[str] = (),
    compact: bool = False,
    heading: str = "{}",
) -> RenderableType:
    """Return ``rows`` under ``headers`` as a table where it fits ``console``, else stacked.

    Cells are rich markup (escape what is not); ``right`` names the columns
    right-justified in the table form. A header may take two lines
    (``"time\\nms"``); stacked, its lines are one label (``time ms:``).
    ``compact``: a table without borders, a rule under the headers and one
    blank between columns (a wide table of numbers). ``heading`` formats a
    stacked row's first cell (``"{} elements"`` where it is a bare number).
    """
    table = Table(
        title=Text.from_markup(title) if title else None,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        pad_edge=not compact,
        collapse_padding=compact,
        show_edge=not compact,
    )
    for name in headers:
        table.add_column(name, justify="right" if name in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    if _fits(console, table):
        return table
    parts: list[Text] = []
    if title:
        parts.append(whole(title, style="bold"))
    for row in rows:
        head, *rest = row
        parts.append(
            whole(parted(heading.format(head) if head else "-", console.width), style="bold")
        )
        # An empty cell says nothing: no "at:" line without a value.
        parts += [
            whole(parted(f"  {_label(n)}: {c}", console.width))
            for n, c in zip(headers[1:], rest, strict=True)
            if c
        ]
    if caption:
        parts.append(whole(escape(caption)))
    return Group(*parts)


def _label(header: str) -> str:
    """Return a header of several lines as one label (``err/`` ``bound``: ``err/bound``)."""
    return " ".join(header.split()).replace("/ ", "/")


def pairs(console: Console, title: str, rows: Sequence[tuple[str, str]]) -> RenderableType:
    """Return ``field, value`` rows as a two-column table where it fits ``console``, else as lines.

    A line ``field: value`` wider than the terminal puts the value, whole, on
    an indented line of its own (a path or a setting to copy is never folded).
    """
    table = Table(
        title=Text.from_markup(title) if title else None, title_justify="left", show_header=False
    )
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    for row in rows:
        table.add_row(*row)
    if _fits(console, table):
        return table
    parts = [whole(title, style="bold")] if title else []
    for field, value in rows:
        line = f"{field}: {value}"
        fits = Text.from_markup(line).cell_len <= console.width
        parts.append(whole(line if fits else f"{field}:\n  {value}"))
    return Group(*parts)


def _fits(console: Console, table: Table) -> bool:
    # Measured without the terminal's limit: the width the table wants, not the one it gets.
    wide = console.options.update(width=_UNBOUNDED, max_width=_UNBOUNDED)
    return Measurement.get(console, wide, table).maximum <= console.width


def parted(markup: str, width: int, sep: str = " | ") -> str:
    """Return ``markup`` broken into lines of at most ``width`` at ``sep``, each part kept whole."""
    # A driver stack is "driver X | loader Y | ..."; a break anywhere else would split a setting.
    if Text.from_markup(markup).cell_len <= width or sep not in markup:
        return markup
    lines: list[str] = []
    for part in markup.split(sep):
        joined = f"{lines[-1]}{sep}{part}" if lines else part
        if lines and Text.from_markup(joined).cell_len <= width:
            lines[-1] = joined
        else:
            lines.append(part if not lines else f"    {part}")
    return "\n".join(lines)


def whole(markup: str, style: str = "") -> Text:
    """Return ``markup`` as one line that is never folded or cut (the terminal wraps it)."""
    text = Text.from_markup(markup, style=style)
    # Long lines are the terminal's to wrap: rich would fold a setting mid-word.
    text.no_wrap, text.overflow = True, "ignore"
    return text


__all__ = ["fitted", "pairs", "parted", "whole"]
