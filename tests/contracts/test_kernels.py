"""Contract: every kernel in KERNELS, launched through the protocol, matches the NumPy reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from l0mem.backends import Backend, DeviceBuffer
from l0mem.backends.kernels import KERNELS, KernelInfo
from l0mem.bf16 import bf16_to_f32, decompress_add_reference, f32_to_bf16
from tests.contracts.helpers import host

pytestmark = [
    # NaN and infinity inputs are part of the point.
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

Arrays = dict[str, npt.NDArray[Any]]

# Bit patterns every kernel must get right: zeros, ties, overflow to inf, NaNs, subnormals.
SPECIAL_F32_BITS = np.array(
    [0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3FFF8000,
     0x7F7FFFFF, 0x7F7F8000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
     0x00000001, 0x80000001, 0x00008000, 0x007F8000, 0x00800000],
    dtype=np.uint32,
)  # fmt: skip
SENTINEL = 0x5A


def _f32(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Return ``n`` float32 values of every class: raw random words, then the specials."""
    words = np.random.default_rng(seed).integers(0, 1 << 32, size=n, dtype=np.uint64)
    bits = words.astype(np.uint32)
    k = min(n, SPECIAL_F32_BITS.size)
    bits[:k] = SPECIAL_F32_BITS[:k]
    return bits.view(np.float32)


def _bf16(n: int, seed: int) -> npt.NDArray[np.uint16]:
    return (_f32(n, seed).view(np.uint32) >> 16).astype(np.uint16)


# For each kernel: the inputs of its buffers, and what the written buffer must hold after.
INPUTS: dict[str, Callable[[int], Arrays]] = {
    "l0mem_f32_to_bf16": lambda n: {"src": _f32(n, 1), "dst": np.zeros(n, np.uint16)},
    "l0mem_bf16_add_to_f32": lambda n: {"src": _bf16(n, 2), "acc": _f32(n, 3)},
    "l0mem_f32_add": lambda n: {"src": _f32(n, 4), "acc": _f32(n, 5)},
}
REFERENCE: dict[str, Callable[[Arrays], tuple[str, npt.NDArray[Any]]]] = {
    "l0mem_f32_to_bf16": lambda a: ("dst", f32_to_bf16(a["src"])),
    "l0mem_bf16_add_to_f32": lambda a: ("acc", decompress_add_reference(a["src"], a["acc"])),
    "l0mem_f32_add": lambda a: ("acc", np.add(a["acc"], a["src"], dtype=np.float32)),
}


def test_every_kernel_has_a_reference() -> None:
    assert set(INPUTS) == set(REFERENCE) == set(KERNELS)


def _same(got: npt.NDArray[Any], want: npt.NDArray[Any]) -> None:
    """Bit-exact, except that a float NaN result only has to be a NaN (IEEE leaves the payload)."""
    if want.dtype == np.float32:
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        got, want = got[~nan], want[~nan]
    diff = np.flatnonzero(got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}"))
    assert diff.size == 0, f"{diff.size} mismatches, first at {diff[0]}"


def _upload(backend: Backend, device: int, a: npt.NDArray[Any], pad: int) -> DeviceBuffer:
    """Return a buffer holding ``a`` followed by ``pad`` sentinel bytes."""
    buf = backend.allocate(device, a.nbytes + pad)
    backend.fill(buf, bytes([SENTINEL])).wait()
    backend.upload(buf, host(np.ascontiguousarray(a))).wait()
    return buf


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("n", [1, 4099, 100_003])
def test_kernel_matches_the_reference(backend: Backend, kernel: str, n: int) -> None:
    info: KernelInfo = KERNELS[kernel]
    pad = 64
    for dev in range(backend.device_count()):
        arrays = INPUTS[kernel](n)
        out_name, want = REFERENCE[kernel](arrays)
        bufs = {name: _upload(backend, dev, a, pad) for name, a in arrays.items()}
        args = [bufs[a.name] if a.kind == "buffer" else n for a in info.args]
        backend.launch(kernel, dev, args, n).wait()
        out = bufs[out_name]
        got = np.empty(want.size, dtype=want.dtype)
        tail = bytearray(pad)
        backend.download(out, host(got)).wait()
        backend.download(out.view(want.nbytes, pad), tail).wait()
        _same(got, want)
        assert tail == bytes([SENTINEL]) * pad, f"{kernel} wrote past n on device {dev}"
        for name, a in arrays.items():
            if name != out_name:
                back = np.empty_like(a)
                backend.download(bufs[name], host(back)).wait()
                assert back.tobytes() == a.tobytes(), f"{kernel} changed its input '{name}'"


def test_kernels_chain_through_wait_for_on_views(backend: Backend) -> None:
    """compress -> decompress-add -> add on views at offsets, ordered by events only."""
    n = 4099
    x = _f32(n, 6)
    x = np.where(np.isfinite(x), x, np.float32(1.5)).astype(np.float32)
    for dev in range(backend.device_count()):
        big = backend.allocate(dev, 4 * n + 2 * n + 4 * n + 3 * 256)
        src = big.view(256, 4 * n)
        half = big.view(512 + 4 * n, 2 * n)
        acc = big.view(768 + 6 * n, 4 * n)
        e0 = backend.upload(src, host(x))
        e1 = backend.fill(acc, np.float32(1.0).tobytes())
        e2 = backend.launch("l0mem_f32_to_bf16", dev, [src, half, n], n, wait_for=[e0])
        e3 = backend.launch("l0mem_bf16_add_to_f32", dev, [half, acc, n], n, wait_for=[e1, e2])
        e4 = backend.launch("l0mem_f32_add", dev, [src, acc, n], n, wait_for=[e3])
        got = np.empty(n, dtype=np.float32)
        backend.download(acc, host(got), wait_for=[e4]).wait()
        one = np.ones(n, dtype=np.float32)
        _same(got, np.add(np.add(one, bf16_to_f32(f32_to_bf16(x)), dtype=np.float32), x))


def test_bad_launches_are_value_errors(backend: Backend) -> None:
    n = 64
    src, acc, short = (backend.allocate(0, s) for s in (4 * n, 4 * n, 4 * n - 4))
    bad: list[tuple[str, list[Any], int]] = [
        ("l0mem_nope", [src, acc, n], n),
        ("l0mem_f32_add", [src, acc], n),
        ("l0mem_f32_add", [src, acc, n, n], n),
        ("l0mem_f32_add", [src, acc, True], n),
        ("l0mem_f32_add", [src, acc, 1.0], n),
        ("l0mem_f32_add", [src, acc, -1], n),
        ("l0mem_f32_add", [src, acc, acc], n),
        ("l0mem_f32_add", [n, acc, n], n),
        ("l0mem_f32_add", [b"bytes", acc, n], n),
        ("l0mem_f32_add", [src, short, n], n),
        ("l0mem_f32_add", [src, acc, n], True),
        ("l0mem_f32_add", [src, acc, n], -1),
    ]
    if backend.device_count() > 1:
        bad.append(("l0mem_f32_add", [backend.allocate(1, 4 * n), acc, n], n))
    for kernel, args, size in bad:
        with pytest.raises(ValueError):
            backend.launch(kernel, 0, args, size)
            pytest.fail(f"launch({kernel}, {args}, {size}) did not raise")
