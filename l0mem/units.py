"""The one size grammar of l0mem: ``4096``, ``64K``, ``16M``, ``1.5G``, ``4GiB``, ``512MiB``.

A size is a decimal number with an optional binary suffix (K, M, G, T: powers
of 1024; ``KiB``/``KB``/``K`` alike) that comes to a whole number of bytes.
Every option and function that takes a size parses it here, and sizes are
printed here too: :func:`format_size` exactly, :func:`format_bytes` rounded.
Other numbers a table shows rounded (a slope, a ratio) go through
:func:`fixed`: one that rounds to zero is never a signed zero (every JSON
l0mem writes has the same rule: :func:`l0mem.files.unsigned_zeros`).

What it may import: nothing of l0mem (a leaf every layer may use).
"""

from __future__ import annotations

import re
from fractions import Fraction

# ASCII digits only: \d would also take another script's digits (٤K).
_SIZE = re.compile(
    r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE | re.ASCII
)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
MAX_SIZE = 1 << 62  # far beyond any device; keeps every size a C int64 / size_t
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def parse_size(text: str, *, minimum: int = 1) -> int:
    """Return the bytes in ``text``; raise ValueError (one line) when it is not a size."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(
            f"bad size {text[:40]!r}: expected a number with an optional K, M, G or T "
            "suffix (examples: 4096, 64K, 1.5G, 4GiB)"
        )
    value = Fraction(m.group(1)) * (1 << _SHIFT[m.group(2).lower()])
    if value.denominator != 1:
        raise ValueError(f"bad size {text!r}: not a whole number of bytes")
    if value < minimum:
        raise ValueError(f"bad size {text!r}: must be at least {minimum}")
    if value > MAX_SIZE:
        raise ValueError(f"bad size {text!r}: larger than {MAX_SIZE} bytes")
    return int(value)


def parse_sizes(text: str, *, minimum: int = 1) -> list[int]:
    """Return the sizes of a comma-separated list like ``1M,16M,256K`` (order kept, repeats dropped)."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(
            f"{text!r} names no size: give one or more, comma-separated (examples: 4096, 64K,1M)"
        )
    sizes: list[int] = []
    for p in parts:
        v = parse_size(p, minimum=minimum)
        if v not in sizes:
            sizes.append(v)
    return sizes


def format_size(nbytes: int) -> str:
    """Return ``nbytes`` in the largest binary unit that divides it (``64 MiB``, ``1536 B``)."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def format_bytes(n: float, digits: int | None = None) -> str:
    """Return ``n`` bytes, rounded, in the largest binary unit it reaches (GiB, MiB, KiB, B).

    ``digits`` decimals in every unit above bytes; by default 2 for GiB and
    none below (``4.00 GiB``, ``320 MiB``). Bytes are always whole.
    """
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= scale:
            places = (2 if scale == GIB else 0) if digits is None else digits
            return f"{n / scale:.{places}f} {unit}"
    return f"{fixed(n)} B"  # less than half a byte either side of 0 is 0 B, never -0 B


def fixed(value: float, places: int = 0, *, sign: bool = False) -> str:
    """Return ``value`` with ``places`` decimals (a ``+`` before a positive one with ``sign``).

    A value that rounds to zero is ``0`` (``0.00``): never ``-0`` for a slope a
    hair below zero, nor ``+0`` for a change of nothing.
    """
    text = f"{value:{'+' if sign else ''}.{places}f}"
    return f"{0:.{places}f}" if text.lstrip("+-").strip("0.") == "" else text


__all__ = [
    "GIB",
    "KIB",
    "MAX_SIZE",
    "MIB",
    "fixed",
    "format_bytes",
    "format_size",
    "parse_size",
    "parse_sizes",
]
