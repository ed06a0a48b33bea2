"""NumPy reference for l0mem's BF16 conversions (the kernels are checked against it).

BF16 is the upper half of an IEEE binary32 word. Conversion from FP32 rounds to
nearest, ties to even; a NaN stays a quiet NaN with its sign and upper payload
bits (``(bits >> 16) | 0x0040``); finite values whose rounding carries into the
exponent become infinities; subnormals are kept (no flush to zero).

The rounding here is written as a comparison on the discarded half rather than
the add-and-shift trick the kernels use, so the two are independent.

What it may import: nothing of l0mem (a leaf every layer may use).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_SIGN_CLEAR = np.uint32(0x7FFF_FFFF)
_INF_BITS = np.uint32(0x7F80_0000)
_QUIET = np.uint32(0x0040)
_HALF = np.uint32(0x8000)


def _as_f32_bits(a: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    arr = np.asarray(a)
    if arr.dtype != np.float32:
        # Converting from float64 first would round twice and hide real mismatches.
        raise ValueError(f"f32_to_bf16 needs a float32 array, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr).view(np.uint32)


def f32_to_bf16(a: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Return the BF16 bit patterns (uint16) of the float32 array ``a``, rounded to nearest even."""
    bits = _as_f32_bits(a)
    upper = bits >> np.uint32(16)
    lower = bits & np.uint32(0xFFFF)
    odd = (upper & np.uint32(1)).astype(bool)
    round_up = (lower > _HALF) | ((lower == _HALF) & odd)
    # upper + 1 cannot leave 16 bits: only NaN patterns (handled below) reach 0xFFFF.
    rounded = upper + round_up.astype(np.uint32)
    is_nan = (bits & _SIGN_CLEAR) > _INF_BITS
    out = np.where(is_nan, upper | _QUIET, rounded)
    return out.astype(np.uint16)


def bf16_to_f32(h: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Return the float32 values of the BF16 bit patterns ``h`` (exact: BF16 is a truncated FP32)."""
    arr = np.asarray(h)
    if arr.dtype != np.uint16:
        raise ValueError(f"bf16_to_f32 needs a uint16 array of bit patterns, got dtype {arr.dtype}")
    return (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)


def decompress_add_reference(src: npt.ArrayLike, acc: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Return ``acc + bf16_to_f32(src)`` in float32 (what ``l0mem_bf16_add_to_f32`` computes)."""
    acc_arr = np.asarray(acc)
    if acc_arr.dtype != np.float32:
        raise ValueError(f"the accumulator must be float32, got dtype {acc_arr.dtype}")
    return np.add(acc_arr, bf16_to_f32(src), dtype=np.float32)


__all__ = ["bf16_to_f32", "decompress_add_reference", "f32_to_bf16"]
