"""The three kernels, run through SyclBackend on the SYCL CPU device, bit-exact against NumPy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest
from typing_extensions import Buffer

from l0mem.backends import SyclBackend, SyclBuffer, kernels
from l0mem.bf16 import bf16_to_f32, f32_to_bf16

pytestmark = [
    pytest.mark.sycl,
    # NaN and infinity inputs are the point of these tests.
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

SENTINEL_F32 = np.uint32(0x5A5A5A5A)
SENTINEL_U16 = np.uint16(0xA5A5)

# Float32 bit patterns covering every class the kernels must get right.
SPECIAL_F32_BITS = np.array(
    [
        0x00000000, 0x80000000,  # +-0
        0x3F800000, 0xBF800000,  # +-1
        0x3F808000, 0x3F818000, 0xBF818000, 0x3F808001, 0x3F807FFF,  # ties and near-ties
        0x3FFF8000,  # tie carrying into the exponent
        0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF,  # max finite, rounding to inf or not
        0x7F800000, 0xFF800000,  # +-inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA12345, 0xFFFFFFFF,
        0x7F80FFFF,  # NaNs: quiet, signalling, payloads, both signs
        0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x00008001,
        0x007F8000, 0x807FFFFF, 0x00400000,  # subnormals
        0x00800000, 0x80800000,  # smallest normals
    ],
    dtype=np.uint32,
)


@pytest.fixture(scope="module")
def backend() -> Iterator[SyclBackend]:
    with SyclBackend(["opencl:cpu"]) as b:
        yield b


def _device_array(b: SyclBackend, host: npt.NDArray[np.generic], pad: int = 0) -> SyclBuffer:
    """Upload ``host`` followed by ``pad`` sentinel elements."""
    sentinel = SENTINEL_F32 if host.itemsize == 4 else SENTINEL_U16
    tail = np.full(pad, sentinel).view(host.dtype)
    full = np.concatenate([host, tail])
    buf = b.allocate(0, max(full.nbytes, 1))
    b.upload(buf, _host(full)).wait()
    return buf


def _host(a: npt.NDArray[np.generic]) -> Buffer:
    # numpy declares the buffer protocol to type checkers only from Python 3.12.
    return cast(Buffer, a)


def _read(b: SyclBackend, buf: SyclBuffer, dtype: type, count: int) -> npt.NDArray[Any]:
    out: npt.NDArray[Any] = np.empty(count, dtype=dtype)
    b.download(buf, _host(out)).wait()
    return out


def _assert_add_matches(got_f32: npt.NDArray[np.float32], want: npt.NDArray[np.float32]) -> None:
    """Bit-exact except that a NaN sum only has to be NaN (IEEE leaves its payload open)."""
    want_nan = np.isnan(want)
    assert np.array_equal(np.isnan(got_f32), want_nan)
    bad = np.flatnonzero(got_f32.view(np.uint32)[~want_nan] != want.view(np.uint32)[~want_nan])
    assert bad.size == 0, (
        f"{bad.size} mismatches, first at {bad[0]}: "
        f"got 0x{int(got_f32[~want_nan].view(np.uint32)[bad[0]]):08X} "
        f"want 0x{int(want[~want_nan].view(np.uint32)[bad[0]]):08X}"
    )


def _random_bits(n: int, seed: int) -> npt.NDArray[np.uint32]:
    # Raw random words cover NaNs, infinities and subnormals as well as normals.
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)


def _pairs() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    a, c = np.meshgrid(SPECIAL_F32_BITS, SPECIAL_F32_BITS)
    return a.ravel(), c.ravel()


def test_reference_is_not_flushing_subnormals() -> None:
    # Guards the comparisons below: a flushing reference would hide device flushing.
    tiny = np.array([1], dtype=np.uint32).view(np.float32)
    assert (tiny + tiny).view(np.uint32)[0] == 2


def test_compress_special_values(backend: SyclBackend) -> None:
    x = SPECIAL_F32_BITS.view(np.float32)
    src = _device_array(backend, x)
    dst = backend.allocate(0, 2 * x.size)
    kernels.compress_bf16(backend, src, dst, x.size).wait()
    got = _read(backend, dst, np.uint16, x.size)
    want = f32_to_bf16(x)
    for bits, g, w in zip(SPECIAL_F32_BITS.tolist(), got.tolist(), want.tolist(), strict=True):
        assert g == w, f"0x{bits:08X}: device 0x{g:04X}, reference 0x{w:04X}"


def test_decompress_add_special_values(backend: SyclBackend) -> None:
    acc_bits, src_f32_bits = _pairs()
    src_h = (src_f32_bits >> 16).astype(np.uint16)  # every special as a bf16 pattern
    acc0 = acc_bits.view(np.float32)
    acc = _device_array(backend, acc0)
    src = _device_array(backend, src_h)
    kernels.decompress_add_bf16(backend, src, acc, acc0.size).wait()
    got = _read(backend, acc, np.float32, acc0.size)
    _assert_add_matches(got, np.add(acc0, bf16_to_f32(src_h), dtype=np.float32))


def test_add_special_values(backend: SyclBackend) -> None:
    acc_bits, src_bits = _pairs()
    acc0, x = acc_bits.view(np.float32), src_bits.view(np.float32)
    acc = _device_array(backend, acc0)
    src = _device_array(backend, x)
    kernels.add_f32(backend, src, acc, x.size).wait()
    got = _read(backend, acc, np.float32, x.size)
    _assert_add_matches(got, np.add(acc0, x, dtype=np.float32))


def test_subnormal_sums_are_not_flushed(backend: SyclBackend) -> None:
    tiny = np.array([1, 0x00400000, 0x80000001], dtype=np.uint32).view(np.float32)
    acc = _device_array(backend, tiny.copy())
    src = _device_array(backend, tiny)
    kernels.add_f32(backend, src, acc, 3).wait()
    got = _read(backend, acc, np.float32, 3).view(np.uint32)
    assert got.tolist() == [2, 0x00800000, 0x80000002]


@pytest.mark.parametrize("n", [0, 1, 31, 1_000_003])
def test_compress_sizes_leave_the_tail_alone(backend: SyclBackend, n: int) -> None:
    pad = 37
    x = _random_bits(n, seed=n).view(np.float32)
    src = _device_array(backend, x, pad)
    dst = _device_array(backend, np.zeros(n, dtype=np.uint16), pad)
    kernels.compress_bf16(backend, src, dst, n).wait()
    got = _read(backend, dst, np.uint16, n + pad)
    assert np.array_equal(got[:n], f32_to_bf16(x))
    assert (got[n:] == SENTINEL_U16).all(), "the kernel wrote past n"


@pytest.mark.parametrize("n", [0, 1, 31, 1_000_003])
def test_decompress_add_sizes(backend: SyclBackend, n: int) -> None:
    pad = 37
    acc0 = _random_bits(n, seed=n + 1).view(np.float32)
    h = (_random_bits(n, seed=n + 2) >> 16).astype(np.uint16)
    acc = _device_array(backend, acc0, pad)
    src = _device_array(backend, h, pad)
    kernels.decompress_add_bf16(backend, src, acc, n).wait()
    got = _read(backend, acc, np.float32, n + pad)
    _assert_add_matches(got[:n], np.add(acc0, bf16_to_f32(h), dtype=np.float32))
    assert (got[n:].view(np.uint32) == SENTINEL_F32).all(), "the kernel wrote past n"


@pytest.mark.parametrize("n", [0, 1, 31, 1_000_003])
def test_add_sizes(backend: SyclBackend, n: int) -> None:
    pad = 37
    acc0 = _random_bits(n, seed=n + 3).view(np.float32)
    x = _random_bits(n, seed=n + 4).view(np.float32)
    acc = _device_array(backend, acc0, pad)
    src = _device_array(backend, x, pad)
    kernels.add_f32(backend, src, acc, n).wait()
    got = _read(backend, acc, np.float32, n + pad)
    _assert_add_matches(got[:n], np.add(acc0, x, dtype=np.float32))
    assert (got[n:].view(np.uint32) == SENTINEL_F32).all(), "the kernel wrote past n"


def test_kernels_on_views_with_offsets(backend: SyclBackend) -> None:
    n = 1000
    x = _random_bits(n, seed=7).view(np.float32)
    big = backend.allocate(0, 4 * n + 4096)
    backend.fill(big, b"\xff\xff\xff\xff").wait()
    src = big.view(4096, 4 * n)
    backend.upload(src, _host(x)).wait()
    out = backend.allocate(0, 2 * n + 64)
    backend.fill(out, b"\x00\x00").wait()
    kernels.compress_bf16(backend, src, out.view(64, 2 * n), n).wait()
    got = _read(backend, out, np.uint16, n + 32)
    assert (got[:32] == 0).all(), "wrote before the view"
    assert np.array_equal(got[32:], f32_to_bf16(x))


def test_chained_kernels_follow_wait_for(backend: SyclBackend) -> None:
    """compress -> decompress-add -> add, ordered by events only (the all-reduce pattern)."""
    n = 4099
    x = _random_bits(n, seed=11).view(np.float32)
    x = np.where(np.isfinite(x), x, np.float32(1.5)).astype(np.float32)
    a, acc, h = (backend.allocate(0, 4 * n), backend.allocate(0, 4 * n), backend.allocate(0, 2 * n))
    e1 = backend.upload(a, _host(x))
    e2 = backend.fill(acc, np.float32(0.25).tobytes())
    e3 = kernels.compress_bf16(backend, a, h, n, wait_for=[e1])
    e4 = kernels.decompress_add_bf16(backend, h, acc, n, wait_for=[e2, e3])
    e5 = kernels.add_f32(backend, a, acc, n, wait_for=[e4])
    out = np.empty(n, dtype=np.float32)
    backend.download(acc, _host(out), wait_for=[e5]).wait()
    want = np.add(
        np.add(np.float32(0.25), bf16_to_f32(f32_to_bf16(x)), dtype=np.float32), x, dtype=np.float32
    )
    _assert_add_matches(out, want)


def test_zero_elements_waits_for_dependencies(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 64)
    dep = backend.fill(buf, b"\x01")
    ev = kernels.add_f32(backend, buf, buf, 0, wait_for=[dep])
    ev.wait()
    assert ev.elapsed_ns() == 0
    assert _read(backend, buf, np.uint8, 64).tolist() == [1] * 64


def test_launch_rounds_global_size_to_work_group(backend: SyclBackend) -> None:
    n = 31
    group = backend.work_group_size(0, "l0mem_f32_add")
    assert group > n, "the padding path is only exercised when n is not a multiple"
    acc = _device_array(backend, np.ones(n, dtype=np.float32), pad=group)
    src = _device_array(backend, np.ones(n, dtype=np.float32), pad=group)
    backend.launch("l0mem_f32_add", 0, [src, acc, n], n).wait()
    got = _read(backend, acc, np.float32, n + group)
    assert (got[:n] == 2.0).all()
    assert (got[n:].view(np.uint32) == SENTINEL_F32).all()
