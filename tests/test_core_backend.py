"""LevelZeroBackend against the backend protocol, in both context layouts (simulator)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import l0mem.core as core
from l0mem.backend import Backend, DeviceBuffer, Event
from l0mem.bf16 import bf16_to_f32, f32_to_bf16
from l0mem.core.backend import LevelZeroBackend
from l0mem.kernels import add_f32, compress_bf16, decompress_add_bf16
from tests.support import ze_session


@pytest.fixture(scope="module")
def sim():
    return ze_session.simulator()


@pytest.fixture
def clean(sim):
    ze_session.reset(sim)
    yield sim
    ze_session.reset(sim)


@pytest.fixture(params=["multi", "single"])
def backend(request, clean):
    devs = core.drivers()[0].devices()[:2]
    b = LevelZeroBackend(devs, context=request.param)
    yield b
    b.close()
    assert [clean.device_used(i) for i in range(2)] == [0, 0]


def test_is_a_backend(backend):
    assert isinstance(backend, Backend)
    assert backend.name == "l0"
    assert backend.device_count() == 2
    assert backend.device_name(1) == core.drivers()[0].devices()[1].name
    with pytest.raises(IndexError):
        backend.device_name(2)


def test_context_layout(backend):
    if backend.context_mode == "multi":
        assert backend.context_of(0) is backend.context_of(1)
        assert backend.context_of(0).devices == backend.devices
    else:
        assert backend.context_of(0) is not backend.context_of(1)
        assert backend.context_of(1).devices == [backend.devices[1]]


def test_upload_download_round_trip(backend):
    buf = backend.allocate(1, 1024)
    assert isinstance(buf, DeviceBuffer) and buf.device == 1 and buf.nbytes == 1024
    data = np.arange(256, dtype=np.float32)
    ev = backend.upload(buf, data)
    assert isinstance(ev, Event)
    out = np.zeros(256, dtype=np.float32)
    backend.download(buf, out, wait_for=[ev]).wait()
    np.testing.assert_array_equal(out, data)
    elapsed = ev.elapsed_ns()
    assert elapsed is not None and elapsed >= 0


def test_views_address_into_their_parent(backend):
    buf = backend.allocate(0, 64)
    v = buf.view(16, 16)
    assert v.address == buf.address + 16 and v.nbytes == 16 and v.device == 0
    backend.fill(buf, b"\0").wait()
    backend.fill(v, b"\x09").wait()
    out = bytearray(64)
    backend.download(buf, out).wait()
    assert out == bytes(16) + b"\x09" * 16 + bytes(32)
    v.close()  # a view never frees
    assert not buf.allocation.closed
    with pytest.raises(ValueError, match="outside"):
        buf.view(60, 8)


def test_peer_copy_between_devices(backend, clean):
    a = backend.allocate(0, 4096)
    b = backend.allocate(1, 4096)
    payload = np.random.default_rng(0).integers(0, 255, 4096, dtype=np.uint8)
    up = backend.upload(a, payload)
    clean.reset_counters()
    cp = backend.copy(b, a, wait_for=[up])
    out = np.zeros(4096, dtype=np.uint8)
    backend.download(b, out, wait_for=[cp]).wait()
    np.testing.assert_array_equal(out, payload)
    if backend.context_mode == "multi":
        assert clean.bytes_moved(0, 1) == 4096  # one direct device-to-device copy
    else:
        assert clean.bytes_moved(0, 1) == 0  # staged through the host
    with pytest.raises(ValueError, match="exceeds"):
        backend.copy(b, a, 8192)


def test_kernels_through_backend(backend):
    n = 40000  # not a multiple of any group size: the launch is rounded up
    x = np.linspace(-2, 2, n, dtype=np.float32)
    y = np.full(n, 0.5, dtype=np.float32)
    src = backend.allocate(0, 4 * n)
    acc = backend.allocate(0, 4 * n)
    half = backend.allocate(0, 2 * n)
    backend.upload(src, x).wait()
    backend.upload(acc, y).wait()
    e1 = add_f32(backend, src, acc, n)
    out = np.empty(n, dtype=np.float32)
    backend.download(acc, out, wait_for=[e1]).wait()
    np.testing.assert_array_equal(out, x + y)
    e2 = compress_bf16(backend, src, half, n)
    e3 = decompress_add_bf16(backend, half, acc, n, wait_for=[e2])
    backend.download(acc, out, wait_for=[e3]).wait()
    np.testing.assert_array_equal(out, x + y + bf16_to_f32(f32_to_bf16(x)))


def test_events_are_recycled(backend):
    buf = backend.allocate(0, 64)
    for _ in range(3 * 64):
        backend.fill(buf, b"\x01").wait()
    gc.collect()
    backend.synchronize()
    recycler = backend._recyclers[id(backend.context_of(0))]
    assert len(recycler._pools) <= 2


def test_cross_context_wait_for(backend):
    a = backend.allocate(0, 64)
    b = backend.allocate(1, 64)
    e0 = backend.fill(a, b"\x03")
    e1 = backend.copy(b, a, wait_for=[e0], queue_device=1)
    out = bytearray(64)
    backend.download(b, out, wait_for=[e1]).wait()
    assert out == b"\x03" * 64
    backend.synchronize()
    backend.synchronize(1)


def test_close_frees_everything(clean):
    devs = core.drivers()[0].devices()[:2]
    b = LevelZeroBackend(devs)
    x = b.allocate(0, 1 << 20)
    y = b.allocate(1, 1 << 20)
    assert clean.device_used(0) == clean.device_used(1) == 1 << 20
    b.close()
    assert clean.device_used(0) == clean.device_used(1) == 0
    assert x.allocation.closed and y.allocation.closed
    x.close()  # already freed with the backend: no error


def test_default_devices_and_bad_mode(clean):
    with LevelZeroBackend() as b:
        assert b.device_count() == ze_session.DEFAULT_CONFIG["devices"]
    with pytest.raises(ValueError, match="single"):
        LevelZeroBackend(context="both")  # type: ignore[arg-type]
