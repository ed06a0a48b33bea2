"""Contract: allocation, host transfers, views, fill, sizes and zero-size operations."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pytest

from l0mem.backends import Backend, DeviceBuffer, Event, check_fill
from l0mem.backends.checks import MAX_FILL_PATTERN
from tests.contracts.helpers import filled, host, random_bytes, read

ODD_SIZES = [1, 7, 4099, (1 << 20) + 3]


@pytest.mark.parametrize("n", ODD_SIZES)
def test_upload_download_round_trip_on_every_device(backend: Backend, n: int) -> None:
    for dev in range(backend.device_count()):
        data = random_bytes(n, seed=n + dev)
        buf = backend.allocate(dev, n)
        assert (buf.nbytes, buf.device) == (n, dev)
        assert isinstance(buf.address, int) and buf.address != 0
        backend.upload(buf, data).wait()
        assert read(backend, buf) == data
        buf.close()


def test_host_buffers_of_every_kind(backend: Backend) -> None:
    x = np.random.default_rng(1).standard_normal(1001).astype(np.float32)
    buf = backend.allocate(0, x.nbytes)
    for source in (host(x), x.tobytes(), bytearray(x.tobytes()), memoryview(x.tobytes())):
        backend.fill(buf, b"\0").wait()
        backend.upload(buf, source).wait()
        out = np.empty_like(x)
        backend.download(buf, host(out)).wait()
        np.testing.assert_array_equal(out, x)
    out2 = bytearray(x.nbytes)
    backend.download(buf, memoryview(out2)).wait()
    assert bytes(out2) == x.tobytes()


def test_partial_transfers_touch_the_start_only(backend: Backend) -> None:
    data = random_bytes(1000, seed=2)
    buf = backend.allocate(0, 1000)
    backend.upload(buf, data).wait()
    backend.upload(buf, b"hello").wait()
    assert read(backend, buf, 7) == b"hello" + data[5:7]
    assert read(backend, buf) == b"hello" + data[5:]


def test_views_at_offsets(backend: Backend) -> None:
    for dev in range(backend.device_count()):
        data = random_bytes(4096, seed=3 + dev)
        buf = filled(backend, dev, 4096, 0xEE)
        v = buf.view(1001, 2000)
        w = v.view(17, 33)
        assert (v.nbytes, v.device, v.address) == (2000, dev, buf.address + 1001)
        assert (w.nbytes, w.device, w.address) == (33, dev, buf.address + 1018)
        backend.upload(w, data[:33]).wait()
        assert read(backend, v)[17:50] == data[:33]
        got = read(backend, buf)
        assert got[1018:1051] == data[:33]
        assert got[:1018] == b"\xee" * 1018 and got[1051:] == b"\xee" * (4096 - 1051)
        assert read(backend, w) == data[:33]
        assert buf.view(4096, 0).nbytes == 0, "an empty view at the end is a view"
        for offset, nbytes in ((4000, 97), (-1, 5), (0, 4097), (10, -1)):
            with pytest.raises(ValueError):
                buf.view(offset, nbytes)
        with pytest.raises(ValueError):
            v.view(1990, 11)  # inside the allocation, outside the view
        w.close()
        v.close()  # closing a view never frees
        assert read(backend, buf, 8) == b"\xee" * 8


@pytest.mark.parametrize("size", [1 << k for k in range(8)])
def test_fill_with_every_pattern_size(backend: Backend, size: int) -> None:
    assert size <= MAX_FILL_PATTERN
    pattern = bytes((0x11 * i + 3) & 0xFF for i in range(size))
    n = size * 2053  # an odd multiple of the pattern
    for dev in range(backend.device_count()):
        buf = filled(backend, dev, n + 2 * 300, 0x5A)
        backend.fill(buf.view(300, n), pattern).wait()
        got = read(backend, buf)
        assert got[300 : 300 + n] == pattern * 2053
        assert got[:300] == got[300 + n :] == b"\x5a" * 300, "fill wrote outside the view"
        backend.fill(buf, pattern, size).wait()  # nbytes: only the first repetition
        assert read(backend, buf) == pattern + got[size:]


BAD_FILLS = [
    (b"", 64),
    (b"abc", 99),
    (b"\x01" * 6, 96),
    (bytes(2 * MAX_FILL_PATTERN), 2 * MAX_FILL_PATTERN),
    (b"ab", 33),
    (b"abcd", 98),
    (bytes(range(128)), 192),
]


@pytest.mark.parametrize(("pattern", "nbytes"), BAD_FILLS)
def test_fill_rejects_what_the_shared_rule_rejects(
    backend: Backend, pattern: bytes, nbytes: int
) -> None:
    with pytest.raises(ValueError) as rule:
        check_fill(pattern, nbytes)
    buf = filled(backend, 0, 256, 0x11)
    with pytest.raises(ValueError) as refused:
        backend.fill(buf, pattern, nbytes)
    assert str(refused.value) == str(rule.value), "the same rule in the same words"
    assert read(backend, buf) == b"\x11" * 256, "a refused fill must not write"


def test_sizes_outside_the_buffer_are_value_errors(backend: Backend) -> None:
    small, big = filled(backend, 0, 10, 0x22), backend.allocate(0, 100)
    calls: list[Callable[[], object]] = [
        lambda: backend.upload(small, bytes(11)),
        lambda: backend.download(small, bytearray(11)),
        lambda: backend.fill(small, b"\0", 11),
        lambda: backend.fill(small, b"\0", -1),
        lambda: backend.copy(small, big),
        lambda: backend.copy(big, small, 11),
        lambda: backend.copy(big.view(0, 10), small, -1),
        lambda: backend.allocate(0, 0),
        lambda: backend.allocate(0, -4096),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"call {i} did not raise")
    assert read(backend, small) == b"\x22" * 10


@pytest.mark.parametrize("what", ["allocate", "fill", "copy"])
def test_a_bool_is_not_a_size(backend: Backend, what: str) -> None:
    buf = filled(backend, 0, 64, 0x33)
    with pytest.raises(ValueError):
        if what == "allocate":
            backend.allocate(0, True)
        elif what == "fill":
            backend.fill(buf, b"\0", True)
        else:
            backend.copy(buf.view(32, 32), buf.view(0, 32), True)
    assert read(backend, buf) == b"\x33" * 64


@pytest.mark.parametrize("nbytes", [1 << 64, (1 << 64) + 4096])
def test_a_size_past_size_t_is_refused_not_wrapped(backend: Backend, nbytes: int) -> None:
    # 2**64 + 4096 allocated 4096 bytes while the buffer said 2**64 + 4096, and its
    # views reached past what the driver gave.
    with pytest.raises(ValueError, match="size_t"):
        backend.allocate(0, nbytes)


def test_host_buffers_are_checked(backend: Backend) -> None:
    buf = backend.allocate(0, 16)
    with pytest.raises(ValueError):
        backend.download(buf, bytes(4))  # read-only
    with pytest.raises(TypeError):
        backend.upload(buf, "text")  # type: ignore[arg-type]


def _zero_size_operations(
    backend: Backend, device: int, buf: DeviceBuffer, bufs: list[DeviceBuffer]
) -> list[Callable[[], Event]]:
    empty = buf.view(buf.nbytes, 0)
    ops: list[Callable[[], Event]] = [
        lambda: backend.upload(buf, b""),
        lambda: backend.upload(buf, bytearray()),
        lambda: backend.download(buf, bytearray()),
        lambda: backend.download(empty, bytearray()),
        lambda: backend.fill(buf, b"\x01", 0),
        lambda: backend.fill(empty, b"\x01\x02"),
        lambda: backend.copy(buf.view(32, 32), buf, 0),
        lambda: backend.copy(empty, empty),
        lambda: backend.launch("l0mem_f32_add", device, [buf, buf, 0], 0),
    ]
    return ops + [partial(backend.copy, other, buf, 0) for other in bufs]


def test_zero_size_operations(backend: Backend) -> None:
    bufs = [filled(backend, d, 64, 0x44) for d in range(backend.device_count())]
    ops = [op for d, buf in enumerate(bufs) for op in _zero_size_operations(backend, d, buf, bufs)]
    for i, op in enumerate(ops):
        ev = op()
        assert isinstance(ev, Event), f"operation {i}"
        ev.wait()
        ev.wait()
        ns = ev.elapsed_ns()
        assert ns is None or (type(ns) is int and ns >= 0), f"operation {i}: {ns!r}"
    backend.synchronize()
    for buf in bufs:
        assert read(backend, buf) == b"\x44" * 64, "a zero-size operation wrote"
