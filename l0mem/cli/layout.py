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

from rich.console import Console, Group, RenderableType
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
) -> RenderableType:
    """Return ``rows`` under ``headers`` as a table where it fits ``console``, else stacked.

    Cells are rich markup (escape what is not); ``right`` names the columns
    right-justified in the table form.
    """
    table = Table(
        title=Text.from_markup(title) if title else None,
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    for name in headers:
        table.add_column(name, justify="right" if name in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    # Measured without the terminal's limit: the width the table wants, not the one it gets.
    wide = console.options.update(width=_UNBOUNDED, max_width=_UNBOUNDED)
    if Measurement.get(console, wide, table).maximum <= console.width:
        return table
    parts: list[Text] = []
    if title:
        parts.append(Text.from_markup(title, style="bold"))
    for row in rows:
        head, *rest = row
        parts.append(Text.from_markup(head or "-", style="bold"))
        for name, cell in zip(headers[1:], rest, strict=True):
            parts.append(Text.from_markup(f"  {name}: {cell}"))
    if caption:
        parts.append(Text(caption))
    for part in parts:
        # Long lines are the terminal's to wrap: rich would fold a setting mid-word.
        part.no_wrap, part.overflow = True, "ignore"
    return Group(*parts)


__all__ = ["fitted"]
