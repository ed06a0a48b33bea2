"""Checks on a command's text captured at a given terminal width (issue 22, item 4)."""

from __future__ import annotations

from collections.abc import Iterable


def assert_whole_at(text: str, columns: int, values: Iterable[str]) -> None:
    """Fail unless ``text`` fits ``columns``, has no ellipsis and holds every value whole.

    A value is whole when it appears unbroken in the text with its lines joined
    by spaces (a stacked line the terminal wraps still carries it in one piece).
    A line that is one value alone may be wider than ``columns`` (where the
    value is).
    """
    assert "…" not in text, text
    values = list(values)
    # A value wider than the terminal can only be whole on a line of its own, which
    # the terminal wraps: such a line may be wider.
    wide = [
        line for line in text.splitlines() if len(line) > columns and line.strip() not in values
    ]
    assert not wide, f"lines wider than {columns}: {wide}"
    lines = [line.strip() for line in text.splitlines()]
    flat = " ".join(line for line in lines if line)
    missing = [v for v in values if v not in text and v not in flat]
    assert not missing, f"not whole at {columns} columns: {missing}\n{text}"
