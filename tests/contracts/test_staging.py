"""Contract: pinned host memory (``allocate_host``) and host-staged copies through the ring."""

from __future__ import annotations

import pytest

from l0mem._ze.errors import OutOfDeviceMemoryError
from l0mem.backends import Backend, HostMemory
from l0mem.backends.staging import CHUNK_BYTES, SLOTS, Stager
from l0mem.backends.sycl import CPU_CHUNK_BYTES
from tests.contracts import cases
from tests.contracts.cases import Case
from tests.contracts.helpers import filled, pairs, random_bytes, read
from tests.support import ze_session


def _contexts(backend: Backend) -> int:
    n = backend.device_count()
    return len({min(j for j in range(n) if backend.same_context(i, j)) for i in range(n)})


def test_pinned_memory_round_trips_on_every_device(backend: Backend) -> None:
    for dev in range(backend.device_count()):
        data = random_bytes(5000, seed=dev)
        with backend.allocate_host(dev, 6000) as pinned:
            assert isinstance(pinned, HostMemory) and pinned.device == dev
            pinned.memoryview()[:5000] = data
            buf = backend.allocate(dev, 5000)
            backend.upload(buf, pinned.view(0, 5000)).wait()
            assert read(backend, buf) == data
            backend.fill(buf, b"\x11").wait()
            backend.download(buf, pinned.view(1000, 5000)).wait()
            view = pinned.memoryview()
            assert bytes(view[1000:6000]) == b"\x11" * 5000
            assert bytes(view[:1000]) == data[:1000]
            del view
            buf.close()
        assert pinned.closed


def test_pinned_memory_refuses_misuse(backend: Backend, twin: Backend) -> None:
    pinned = backend.allocate_host(0, 4096)
    buf = backend.allocate(0, 1024)
    with pytest.raises(ValueError):
        pinned.view(4000, 200)
    with pytest.raises(ValueError):
        pinned.view(-1, 10)
    with pytest.raises(ValueError):
        backend.download(buf, pinned.view(0, 2048))  # larger than the buffer
    with pytest.raises(ValueError):
        backend.allocate_host(0, 0)
    other = twin.allocate(0, 1024)
    with pytest.raises(ValueError, match="another backend"):
        twin.upload(other, pinned.view(0, 1024))
    pinned.close()
    pinned.close()  # idempotent
    with pytest.raises(ValueError):
        backend.upload(buf, pinned)
    with pytest.raises(ValueError):
        pinned.memoryview()


@pytest.mark.parametrize("n", [1, 4096 * 3 + 123, 4096 * 7])
def test_staged_copies_through_a_small_ring(backend: Backend, n: int) -> None:
    # Chunks of 4 KiB in 2 slots: many chunks per copy, every slot reused many times.
    stager = Stager(backend, chunk=4096, slots=2)
    try:
        for s, d in pairs(backend):
            data = random_bytes(n + 64, seed=n + 10 * s + d)
            src = backend.allocate(s, n + 64)
            backend.upload(src, data).wait()
            dst = filled(backend, d, n + 32, 0x5A)
            first = stager.copy(dst.view(32, n), src.view(64, n), n)
            # A second copy queued behind the first reuses the same slots.
            again = filled(backend, d, n, 0)
            down, up = stager.copy(again, src, n, wait_for=[first[1]])
            up.wait()
            down.wait()
            got = read(backend, dst)
            assert got[:32] == b"\x5a" * 32 and got[32:] == data[64 : 64 + n], (s, d)
            assert read(backend, again) == data[:n], (s, d)
            for b in (src, dst, again):
                b.close()
        # One ring per context the copies went into, made once.
        assert stager.pinned_bytes == 2 * 4096 * _contexts(backend)
    finally:
        backend.synchronize()
        stager.close()
    assert stager.pinned_bytes == 0


def test_backend_staged_copy_larger_than_its_ring(backend: Backend) -> None:
    # Every slot used, the first one twice, whichever ring shape the backend chose.
    n = max(CHUNK_BYTES, CPU_CHUNK_BYTES) * SLOTS + 4097
    s, d = (0, 1) if backend.device_count() > 1 else (0, 0)
    data = random_bytes(n, seed=7)
    src, dst = backend.allocate(s, n), backend.allocate(d, n)
    backend.upload(src, data).wait()
    down, up = backend.staged_copy(dst, src, n)
    up.wait()
    down.wait()
    assert read(backend, dst) == data
    with pytest.raises(ValueError):
        backend.staged_copy(dst, src, n + 1)


def test_staging_ring_bytes_is_what_a_ring_allocates(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The memory checks of p2p and the copy checks count on this figure.
    made: list[int] = []
    allocate_host = backend.allocate_host

    def counting(device: int, nbytes: int) -> HostMemory:
        made.append(nbytes)
        return allocate_host(device, nbytes)

    monkeypatch.setattr(backend, "allocate_host", counting)
    last = backend.device_count() - 1
    src, dst = backend.allocate(0, 4096), backend.allocate(last, 4096)
    backend.staged_copy(dst, src, 4096)[1].wait()
    assert made == [backend.staging_ring_bytes] * (1 if backend.same_context(0, last) else 2)


def test_close_frees_the_ring_and_pinned_memory(case: Case) -> None:
    for b in cases.opened(case):
        control = ze_session.simulator() if case.simulated else None
        before = control.host_used() if control else 0
        pinned = b.allocate_host(0, 8192)
        last = b.device_count() - 1
        src, dst = b.allocate(0, 4096), b.allocate(last, 4096)
        b.staged_copy(dst, src, 4096)[1].wait()
        if control is not None:
            rings = 1 if b.same_context(0, last) else 2  # one in each context between two
            assert control.host_used() == before + 8192 + rings * b.staging_ring_bytes
        b.close()
        assert pinned.closed
        if control is not None:
            assert control.host_used() == before
    case.check_released()


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id) for c in cases.CASES if c.simulated]
)
def test_a_ring_that_cannot_be_allocated_leaves_nothing(case: Case) -> None:
    # The simulator injects the allocation failure.
    for b in cases.opened(case):
        control = ze_session.simulator()
        src, dst = b.allocate(0, 4096), b.allocate(b.device_count() - 1, 4096)
        before = control.host_used()
        control.set("fail_alloc_at", "1")
        with pytest.raises(OutOfDeviceMemoryError):
            b.staged_copy(dst, src, 4096)
        assert control.host_used() == before
        control.set("fail_alloc_at", "0")
        b.staged_copy(dst, src, 4096)[1].wait()  # the next copy makes its ring
    case.check_released()
