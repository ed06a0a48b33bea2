"""LevelZeroBackend against the backend protocol, in both context layouts (simulator)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import l0mem.core as core
from l0mem.backends import Backend, DeviceBuffer, Event, open_backend
from l0mem.backends.kernels import add_f32, compress_bf16, decompress_add_bf16
from l0mem.backends.levelzero import LevelZeroBackend
from l0mem.bf16 import bf16_to_f32, f32_to_bf16
from tests.support import core_fixtures, ze_session

sim = core_fixtures.sim
clean = core_fixtures.clean


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
    with pytest.raises(ValueError, match="does not fit"):
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
    recycler = backend._recycler(0)
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
    with open_backend("l0") as b:
        assert b.device_count() == ze_session.DEFAULT_CONFIG["devices"]
    with pytest.raises(ValueError, match="single"):
        LevelZeroBackend(core.drivers()[0].devices(), context="both")  # type: ignore[arg-type]


def _record_launches(monkeypatch):
    """Record (group size, group count) of every kernel launch on an immediate list."""
    from l0mem.core.commands import ImmediateCommandList

    launches = []
    real = ImmediateCommandList.launch

    def launch(self, kernel, group_count, **kwargs):
        launches.append((kernel.group_size[0], group_count))
        return real(self, kernel, group_count, **kwargs)

    monkeypatch.setattr(ImmediateCommandList, "launch", launch)
    return launches


@pytest.mark.parametrize("n", [4099, 1_000_003])  # a prime and an odd count
def test_launch_uses_full_groups_and_covers_every_element(backend, monkeypatch, n):
    launches = _record_launches(monkeypatch)
    x = np.arange(n, dtype=np.float32)
    src = backend.allocate(1, 4 * n)
    acc = backend.allocate(1, 4 * n)
    backend.upload(src, x).wait()
    backend.fill(acc, np.float32(0.5).tobytes()).wait()
    add_f32(backend, src, acc, n).wait()
    ((group, groups),) = launches
    assert group > 1
    assert groups * group >= n > (groups - 1) * group  # ceil, not floor
    out = np.empty(n, dtype=np.float32)
    backend.download(acc, out).wait()
    np.testing.assert_array_equal(out, x + np.float32(0.5))  # the tail was computed too


def test_launch_checks_arguments_against_the_kernel_layout(backend, clean):
    n = 64
    src, acc = backend.allocate(0, 4 * n), backend.allocate(0, 4 * n)
    other_dev = backend.allocate(1, 4 * n)
    short = backend.allocate(0, 4 * n - 4)
    launch = backend.launch
    with pytest.raises(ValueError, match="unknown kernel"):
        launch("l0mem_nope", 0, [src, acc, n], n)
    with pytest.raises(ValueError, match="takes 3 arguments, got 2"):
        launch("l0mem_f32_add", 0, [src, acc], n)
    with pytest.raises(ValueError, match="'n' must be an int, got bool"):
        launch("l0mem_f32_add", 0, [src, acc, True], n)
    with pytest.raises(ValueError, match="'n' must be an int, got L0Buffer"):
        launch("l0mem_f32_add", 0, [src, acc, acc], n)
    with pytest.raises(ValueError, match="'src' must be a device buffer"):
        launch("l0mem_f32_add", 0, [n, acc, n], n)
    with pytest.raises(ValueError, match="2\\*\\*64"):
        launch("l0mem_f32_add", 0, [src, acc, -1], n)
    with pytest.raises(ValueError, match="on device 1, the launch on device 0"):
        launch("l0mem_f32_add", 0, [other_dev, acc, n], n)
    with pytest.raises(ValueError, match="'acc' holds 252 bytes, 64 elements need 256"):
        launch("l0mem_f32_add", 0, [src, short, n], n)
    with pytest.raises(ValueError, match="uint32"):
        launch("l0mem_f32_add", 0, [src, acc, n], 2**32)
    with pytest.raises(ValueError, match="global size"):
        launch("l0mem_f32_add", 0, [src, acc, n], True)
    with LevelZeroBackend(backend.devices) as foreign:
        theirs = foreign.allocate(0, 4 * n)
        with pytest.raises(ValueError, match="'src' belongs to another backend"):
            launch("l0mem_f32_add", 0, [theirs, acc, n], n)
        with pytest.raises(ValueError, match="another Level Zero backend"):
            backend.fill(theirs, b"\0")
    clean.reset_counters()
    launch("l0mem_f32_add", 0, [src, acc, n], 0).wait()  # no work-items: just an event
    assert clean.kernel_launches() == 0


def test_fill_follows_the_shared_pattern_rule(backend):
    from l0mem.backends.checks import MAX_FILL_PATTERN

    buf = backend.allocate(0, 1024)
    with pytest.raises(ValueError, match="power of two"):
        backend.fill(buf, b"abc")
    with pytest.raises(ValueError, match="power of two"):
        backend.fill(buf, bytes(2 * MAX_FILL_PATTERN))  # Level Zero itself would take it here
    with pytest.raises(ValueError, match="multiple"):
        backend.fill(buf, b"ab", 33)
    backend.fill(buf, bytes(range(MAX_FILL_PATTERN))).wait()
    out = bytearray(1024)
    backend.download(buf, out).wait()
    assert out == bytes(range(MAX_FILL_PATTERN)) * (1024 // MAX_FILL_PATTERN)


def test_a_slot_waited_on_by_a_pending_command_is_not_reused(clean, monkeypatch):
    import l0mem.backends.l0_events as events_mod

    monkeypatch.setattr(events_mod, "POOL_SIZE", 2)
    devs = core.drivers()[0].devices()[:2]
    with LevelZeroBackend(devs, context="multi") as b:
        src, dst = b.allocate(0, 64), b.allocate(1, 64)
        recycler = b._recycler(0)
        for _ in range(3):  # back to back, each copy on device 1 waiting on device 0's fill
            first = b.fill(src, b"\x07")
            waited = first.core
            dependent = b.copy(dst, src, queue_device=1, wait_for=[first])
            pending = dependent.core
            with pytest.MonkeyPatch.context() as running:
                # The simulator runs at once; pretend the copy still runs on device 1.
                running.setattr(pending, "query", lambda: False)
                del first, dependent  # nothing in Python refers to either event any more
                gc.collect()
                assert recycler.referenced(waited)
                handed = [b.fill(src, b"\x01") for _ in range(6)]
                assert all(ev.core is not waited for ev in handed)
                assert all(ev.core is not pending for ev in handed)
                del handed
            # The copy has finished; the backend observes it.
            gc.collect()
            b.synchronize()
            assert not recycler.referenced(waited)
            reused = [b.fill(src, b"\x01") for _ in range(8)]
            assert any(ev.core is waited for ev in reused)  # the slot is free again
            del reused
            gc.collect()


def test_wait_releases_the_waits_of_a_command(backend):
    a = backend.allocate(0, 64)
    e0 = backend.fill(a, b"\x02")
    e1 = backend.fill(a, b"\x03", wait_for=[e0])
    recycler = e1._recycler
    assert recycler.referenced(e0.core)
    e1.wait()
    assert not recycler.referenced(e0.core)


def test_make_resident_mirrors_on_the_simulator_and_checks_its_arguments(backend, clean):
    # The one step that mirrors, through the backend layer (the audit's l0-peer-resident
    # set-up is its only other caller).
    clean.set("mirror", "peer-resident")
    buf = backend.allocate(0, 1 << 20)
    assert clean.mirror_bytes() == 0
    if backend.context_mode == "single":  # another device's context: refused, nothing made
        with pytest.raises(ValueError, match="not in the context"):
            backend.make_resident(buf, 1)
        assert clean.mirror_bytes() == 0
    else:
        backend.make_resident(buf, 1)
        assert clean.mirror_bytes() == 1 << 20
    with pytest.raises(IndexError):
        backend.make_resident(buf, 2)
    buf.close()
    assert clean.mirror_bytes() == 0
