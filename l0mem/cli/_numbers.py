"""The one way a command line's number is written: ASCII digits, and nothing Python also takes.

Python's ``int()`` and ``float()`` take ``1_000``, ``+5``, ``٣`` (another
script's digit); l0mem's sizes (``64K``) took none of the first two but the
third. One rule for every number an option takes: ASCII digits, for real
numbers a decimal point and an exponent (``0.05``, ``1e-3``), blanks around
allowed; anything else is a usage error (exit 2) saying how to write it.
"""

from __future__ import annotations

import re
from typing import Any

import click

WHOLE = re.compile(r"[0-9]+", re.ASCII)
# More digits than any range of l0mem's needs (2**64 has 20).
MAX_DIGITS = 30
REAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)


def _written(
    value: Any, form: re.Pattern[str], example: str, param: Any, ctx: Any, fail: Any
) -> None:
    if isinstance(value, str) and not form.fullmatch(value.strip()):
        fail(
            f"{value[:40]!r} is not a number as l0mem reads one: ASCII digits ({example})",
            param,
            ctx,
        )


class IntRange(click.IntRange):
    """``click.IntRange`` over whole numbers written in ASCII digits only (``1000``, not ``1_000`` or ``+5``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return the number ``value`` writes, in range; fail (exit 2) on any other form."""
        _written(value, WHOLE, "like 1000", param, ctx, self.fail)
        digits = len(value.strip().lstrip("0")) if isinstance(value, str) else 0
        if digits > MAX_DIGITS:
            # int() refuses past 4300 digits with a message quoting them all; no range
            # l0mem has comes near this many.
            low = "" if self.min is None else f"{self.min}<="
            high = "" if self.max is None else f"<={self.max}"
            self.fail(f"a number of {digits} digits is not in the range {low}x{high}", param, ctx)
        return super().convert(value, param, ctx)


class FloatRange(click.FloatRange):
    """``click.FloatRange`` over real numbers written in ASCII digits (``0.05``, ``2``, ``1e-3``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return the number ``value`` writes, in range; fail (exit 2) on any other form."""
        _written(value, REAL, "like 0.05, 2 or 1e-3", param, ctx, self.fail)
        return super().convert(value, param, ctx)


def real(text: str) -> float:
    """Return the real number ``text`` writes by the rule above; raise ValueError otherwise."""
    if not REAL.fullmatch(text.strip()):
        raise ValueError(f"{text[:40]!r} is not a number as l0mem reads one")
    return float(text)


__all__ = ["REAL", "WHOLE", "FloatRange", "IntRange", "real"]
