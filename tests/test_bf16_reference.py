"""The NumPy BF16 reference against hand-computed bit patterns and exact arithmetic."""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest

from l0mem.bf16 import bf16_to_f32, decompress_add_reference, f32_to_bf16

# (float32 bits, expected bf16 bits, why)
HAND_COMPUTED = [
    (0x3F800000, 0x3F80, "1.0 exact"),
    (0x3F807FFF, 0x3F80, "just below half: down"),
    (0x3F808000, 0x3F80, "tie, even upper half: stays"),
    (0x3F818000, 0x3F82, "tie, odd upper half: up to even"),
    (0x3F808001, 0x3F81, "just above half: up"),
    (0x3FFF8000, 0x4000, "tie rounding carries into the exponent (2.0)"),
    (0xBF818000, 0xBF82, "negative tie, odd: away from zero to even"),
    (0x7F7F7FFF, 0x7F7F, "large finite below half stays finite"),
    (0x7F7FFFFF, 0x7F80, "max finite rounds up to +inf"),
    (0xFF7FFFFF, 0xFF80, "-max finite rounds to -inf"),
    (0x7F7F8000, 0x7F80, "tie at the top, odd: +inf"),
    (0x7F800000, 0x7F80, "+inf"),
    (0xFF800000, 0xFF80, "-inf"),
    (0x7FC00000, 0x7FC0, "canonical quiet NaN"),
    (0x7F800001, 0x7FC0, "signalling NaN, payload only in the low half: quieted"),
    (0xFF800001, 0xFFC0, "negative signalling NaN keeps its sign"),
    (0x7FA12345, 0x7FE1, "NaN keeps its upper payload, quiet bit set"),
    (0x7F80FFFF, 0x7FC0, "NaN whose rounding would carry: no carry"),
    (0xFFFFFFFF, 0xFFFF, "all-ones NaN"),
    (0x00000000, 0x0000, "+0"),
    (0x80000000, 0x8000, "-0 keeps its sign"),
    (0x00000001, 0x0000, "smallest subnormal rounds to +0"),
    (0x80000001, 0x8000, "negative smallest subnormal rounds to -0"),
    (0x00008000, 0x0000, "subnormal tie, even: down"),
    (0x00018000, 0x0002, "subnormal tie, odd: up"),
    (0x00008001, 0x0001, "subnormal above half: smallest bf16 subnormal"),
    (0x007F8000, 0x0080, "largest subnormals round up to the smallest normal"),
    (0x807FFFFF, 0x8080, "negative: rounds up into the normal range"),
]


@pytest.mark.parametrize(("bits", "expected", "why"), HAND_COMPUTED)
def test_f32_to_bf16_hand_computed(bits: int, expected: int, why: str) -> None:
    got = f32_to_bf16(np.array([bits], dtype=np.uint32).view(np.float32))
    assert got.dtype == np.uint16
    assert int(got[0]) == expected, f"{why}: 0x{bits:08X} -> 0x{int(got[0]):04X}"


def test_f32_to_bf16_vectorised_matches_scalars() -> None:
    bits = np.array([b for b, _, _ in HAND_COMPUTED], dtype=np.uint32).reshape(4, 7)
    got = f32_to_bf16(bits.view(np.float32))
    assert got.shape == (4, 7)
    assert got.ravel().tolist() == [e for _, e, _ in HAND_COMPUTED]


def test_bf16_to_f32_hand_computed() -> None:
    h = np.array([0x3F80, 0x8000, 0x0001, 0x7FC1, 0xFF80, 0xC040], dtype=np.uint16)
    got = bf16_to_f32(h).view(np.uint32)
    assert got.tolist() == [0x3F800000, 0x80000000, 0x00010000, 0x7FC10000, 0xFF800000, 0xC0400000]
    assert bf16_to_f32(np.array([0xC040], dtype=np.uint16))[0] == np.float32(-3.0)


def test_every_bf16_round_trips() -> None:
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    back = f32_to_bf16(bf16_to_f32(h))
    is_nan = ((h & 0x7FFF) > 0x7F80)
    # Exact values survive; NaNs come back quiet with sign and payload kept.
    assert np.array_equal(back[~is_nan], h[~is_nan])
    assert np.array_equal(back[is_nan], h[is_nan] | 0x0040)


def _exact(bits: int) -> Fraction:
    sign = -1 if bits >> 31 else 1
    exp = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    if exp == 0:
        return sign * Fraction(mant, 1 << 149)
    return sign * Fraction((1 << 23) | mant, 1 << 23) * Fraction(2) ** (exp - 127)


def _nearest_bf16(bits: int) -> int:
    """Round by comparing exact distances to the two bf16 neighbours (finite inputs only)."""
    low = bits & 0xFFFF0000
    high = low + 0x10000
    x, a = _exact(bits), _exact(low)
    # high may be the infinity pattern: IEEE rounds as if the exponent range continued.
    b = a + (_exact(low | 0xFFFF) - a) * Fraction(0x10000, 0xFFFF)
    da, db = abs(x - a), abs(b - x)
    if da < db or (da == db and (low >> 16) % 2 == 0):
        return low >> 16
    return high >> 16


def test_random_finite_values_match_exact_rounding() -> None:
    rng = np.random.default_rng(1234)
    bits = rng.integers(0, 1 << 32, size=3000, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]  # finite only
    # Force many exact ties and near-ties, where rounding bugs hide.
    bits[::3] = (bits[::3] & 0xFFFF0000) | 0x8000
    got = f32_to_bf16(bits.view(np.float32))
    for b, g in zip(bits.tolist(), got.tolist(), strict=True):
        assert g == _nearest_bf16(b), f"0x{b:08X}"


def test_rejects_float64_input() -> None:
    with pytest.raises(ValueError, match="float32"):
        f32_to_bf16(np.array([1.0]))
    with pytest.raises(ValueError, match="uint16"):
        bf16_to_f32(np.array([1], dtype=np.int32))


def test_decompress_add_reference_keeps_subnormals_and_signed_zero() -> None:
    acc = np.array([-0.0, 1e-45, 1.0], dtype=np.float32)
    src = np.array([0x8000, 0x0001, 0x3F80], dtype=np.uint16)
    got = decompress_add_reference(src, acc).view(np.uint32)
    tiny = struct.unpack("<I", struct.pack("<f", 1e-45))[0] + 0x00010000
    assert got.tolist() == [0x80000000, tiny, 0x40000000]
