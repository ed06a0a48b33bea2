"""Printing sizes (l0mem.units): every table and message rounds them the same way."""

from __future__ import annotations

import random
import re

import pytest

from l0mem.units import GIB, KIB, MIB, format_bytes, format_size


@pytest.mark.parametrize(
    ("n", "digits", "text"),
    [
        (4 * GIB, None, "4.00 GiB"),
        (320 * MIB, None, "320 MiB"),
        (512 * KIB, None, "512 KiB"),  # not "0 MiB"
        (1000, None, "1000 B"),
        (8 * GIB, 1, "8.0 GiB"),
        (3 * MIB // 2, 1, "1.5 MiB"),
        (12 * KIB, 1, "12.0 KiB"),
        (100, 1, "100 B"),  # bytes stay whole
        (-2 * GIB, None, "-2.00 GiB"),
    ],
)
def test_format_bytes_picks_the_largest_unit_reached(n: int, digits: int | None, text: str) -> None:
    assert format_bytes(n, digits) == text


@pytest.mark.parametrize("n", [-0.0, -1e-9, -0.004, -0.4, 0.4])
def test_less_than_half_a_byte_either_side_of_zero_is_0_b(n: float) -> None:
    # -0.4 bytes was "-0 B".
    assert format_bytes(n) == "0 B"


def test_format_size_is_exact() -> None:
    assert [format_size(n) for n in (64 * MIB, 1536, 3 * GIB)] == ["64 MiB", "1536 B", "3 GiB"]


# A number that rounds to zero, as the matrix, compare and their plots show it.
SIGNED_ZERO = re.compile(r"^[+-]0(\.0+)?$")


@pytest.mark.parametrize("seed", range(40))
def test_a_number_is_never_shown_as_a_signed_zero(seed: int) -> None:
    from l0mem.units import fixed

    rng = random.Random(seed)
    values = [-0.0, 0.0, 0.5, -0.5, 0.05, -0.05, 0.005, -0.005, -1e-12, 1e-12]
    values += [rng.uniform(-2, 2) * 10 ** -rng.randint(0, 6) for _ in range(50)]
    for value in values:
        for places in (0, 1, 2):
            for sign in (False, True):
                shown = fixed(value, places, sign=sign)
                assert not SIGNED_ZERO.match(shown), (value, places, sign, shown)
                # Otherwise the number as Python rounds it, with its sign where asked.
                plain = f"{value:{'+' if sign else ''}.{places}f}"
                if float(plain) != 0:
                    assert shown == plain
                else:
                    assert shown == f"{0:.{places}f}"
