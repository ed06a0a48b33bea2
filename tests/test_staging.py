"""The staging ring's ordering, on a lazy backend that runs an operation only when something waits.

Real backends here run copies in submission order (the simulator at once, the
SYCL CPU runtime nearly so), so a missing dependency would go unseen there.
This backend runs nothing until an event is waited on, then runs exactly
that event's dependencies first, in the order they were given: a chunk's
upload that did not wait for its download reads a stale slot, and a download
into a slot whose upload it did not wait for overwrites bytes still to go up.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

import pytest

from l0mem.backends import HostMemory
from l0mem.backends.base import CopyTimeout, copy_deadline
from l0mem.backends.staging import Stager


class LazyEvent:
    ids = count()

    def __init__(self, backend: LazyBackend, kind: str, run, waits: Sequence[LazyEvent]) -> None:
        self.backend, self._run, self.waits, self.done = backend, run, list(waits), False
        self.kind = kind
        self.device_ctx = -1
        self.id = next(self.ids)

    def execute(self) -> None:
        if self.done:
            return
        for ev in self.waits:
            ev.execute()
        self._run()
        self.done = True
        self.backend.ran.append(self.kind)

    def wait(self, timeout: float | None = None) -> None:
        self.backend.host_waits.append((self.id, timeout))
        self.execute()

    def elapsed_ns(self) -> int | None:
        return None


class Buf:
    def __init__(self, mem: bytearray, device: int, offset: int = 0, nbytes: int | None = None):
        self.mem, self.device, self.offset = mem, device, offset
        self.nbytes = len(mem) - offset if nbytes is None else nbytes

    def view(self, offset: int, nbytes: int) -> Buf:
        return Buf(self.mem, self.device, self.offset + offset, nbytes)


class Pinned:
    def __init__(self, n: int) -> None:
        self.data, self.closed = bytearray(n), False

    def memoryview(self) -> memoryview:
        return memoryview(self.data)

    def close(self) -> None:
        self.closed = True


class LazyBackend:
    def __init__(self, devices: int, contexts: Sequence[int]) -> None:
        self.contexts = contexts
        self.host_waits: list[tuple[int, float | None]] = []
        self.pinned: list[Pinned] = []
        self.ran: list[str] = []
        self.device_count = devices

    def same_context(self, a: int, b: int) -> bool:
        return self.contexts[a] == self.contexts[b]

    def allocate_host(self, device: int, nbytes: int) -> HostMemory:
        p = Pinned(nbytes)
        self.pinned.append(p)
        return HostMemory(self, device, p, 0x1000, nbytes)

    def _check_waits(self, device: int, waits: Sequence[LazyEvent]) -> None:
        # A device-side wait on another context's event is impossible on a real backend.
        for ev in waits:
            assert ev.done or ev.device_ctx == self.contexts[device], "cross-context device wait"

    def _op(self, device: int, kind: str, run, wait_for: Sequence[LazyEvent]) -> LazyEvent:
        self._check_waits(device, wait_for)
        ev = LazyEvent(self, kind, run, wait_for)
        ev.device_ctx = self.contexts[device]
        return ev

    def _check_pinned(self, device: int, host: object) -> None:
        if isinstance(host, HostMemory):
            assert self.same_context(host.device, device), "pinned memory of another context"

    def download(self, src: Buf, out: HostMemory | bytearray, *, wait_for=()) -> LazyEvent:
        self._check_pinned(src.device, out)

        def run() -> None:
            view = out.memoryview() if isinstance(out, HostMemory) else memoryview(out)
            view[: len(view)] = src.mem[src.offset : src.offset + len(view)]

        return self._op(src.device, "down", run, wait_for)

    def upload(self, dst: Buf, data: HostMemory | bytes, *, wait_for=()) -> LazyEvent:
        self._check_pinned(dst.device, data)

        def run() -> None:
            view = data.memoryview() if isinstance(data, HostMemory) else memoryview(data)
            dst.mem[dst.offset : dst.offset + len(view)] = bytes(view)

        return self._op(dst.device, "up", run, wait_for)


def _pattern(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(n))


@pytest.mark.parametrize("contexts", [(0, 0), (0, 1)], ids=["one-context", "two-contexts"])
@pytest.mark.parametrize("slots", [2, 3])
def test_every_chunk_arrives_whatever_order_the_work_runs_in(contexts, slots) -> None:
    backend = LazyBackend(2, contexts)
    stager = Stager(backend, chunk=16, slots=slots)  # type: ignore[arg-type]
    data = _pattern(16 * 9 + 5, 1)
    src, dst = Buf(bytearray(data), 0), Buf(bytearray(len(data)), 1)
    down, up = stager.copy(dst, src, len(data))  # type: ignore[arg-type]
    # The download event covers every download: waiting on it alone runs them all.
    down.wait()
    assert backend.ran.count("down") == 10
    up.wait()
    assert bytes(dst.mem) == data and backend.ran.count("up") == 10
    # A second copy through the same ring, into another buffer, after the first.
    other = _pattern(16 * 5, 2)
    src2, dst2 = Buf(bytearray(other), 0), Buf(bytearray(len(other)), 1)
    up2 = stager.copy(dst2, src2, len(other), wait_for=[up])[1]  # type: ignore[arg-type]
    up2.wait()
    assert bytes(dst2.mem) == other and bytes(dst.mem) == data
    # A ring per context the copies went through, each made once.
    assert len(backend.pinned) == len(set(contexts))
    assert all(len(p.data) == 16 * slots for p in backend.pinned)


def test_one_context_never_waits_on_the_host() -> None:
    backend = LazyBackend(2, (0, 0))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    src, dst = Buf(bytearray(200), 0), Buf(bytearray(200), 1)
    stager.copy(dst, src, 200)  # type: ignore[arg-type]
    assert backend.host_waits == []


def test_across_contexts_every_host_wait_has_the_watchdogs_bound() -> None:
    backend = LazyBackend(2, (0, 1))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    src, dst = Buf(bytearray(16 * 4 + 3), 0), Buf(bytearray(16 * 4 + 3), 1)
    stager.copy(dst, src, 16 * 4 + 3)  # type: ignore[arg-type]
    timeouts = [t for _, t in backend.host_waits]
    # Five downloads waited for, and the uploads of chunks 0..2 before their slots were reused,
    # each with the whole copy's bound (a wait may cover work queued ahead of the chunk).
    assert timeouts == [copy_deadline(16 * 4 + 3)] * (5 + 3)
    # A ring in each context: pinned memory is only used by its own context's devices.
    assert stager.pinned_bytes == 2 * 32


def test_across_contexts_the_waits_take_the_callers_watchdog() -> None:
    backend = LazyBackend(2, (0, 1))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    src, dst = Buf(bytearray(40), 0), Buf(bytearray(40), 1)
    stager.copy(dst, src, 40, watchdog=0.5)[1].wait()  # type: ignore[arg-type]
    timeouts = {t for _, t in backend.host_waits if t is not None}
    assert timeouts == {copy_deadline(40, 0.5)}


def test_across_contexts_what_the_copy_waits_for_is_waited_for_on_the_host() -> None:
    backend = LazyBackend(2, (0, 1))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    data = _pattern(40, 3)
    src, dst = Buf(bytearray(40), 0), Buf(bytearray(40), 1)
    # An upload into the source, on the destination's context's clock: not done yet.
    filled = backend.upload(src, data)
    filled.device_ctx = 1
    stager.copy(dst, src, 40, wait_for=[filled])[1].wait()  # type: ignore[arg-type]
    assert backend.host_waits[0] == (filled.id, copy_deadline(40))
    assert bytes(dst.mem) == data


def test_a_copy_that_fails_retires_its_ring() -> None:
    backend = LazyBackend(2, (0, 1))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    src, dst = Buf(bytearray(64), 0), Buf(bytearray(64), 1)
    stager.copy(dst, src, 64)[1].wait()  # type: ignore[arg-type]
    real_download = backend.download

    def hung_download(*args, **kwargs):
        ev = real_download(*args, **kwargs)
        ev.wait = lambda timeout=None: (_ for _ in ()).throw(CopyTimeout("hung"))  # type: ignore[method-assign]
        return ev

    backend.download = hung_download  # type: ignore[method-assign]
    with pytest.raises(CopyTimeout):
        stager.copy(dst, src, 64)  # type: ignore[arg-type]
    backend.download = real_download  # type: ignore[method-assign]
    stager.copy(dst, src, 64)[1].wait()  # type: ignore[arg-type]
    # The failed copy's ring was not used again: a second one was made; close frees both.
    assert len(backend.pinned) == 4 and stager.pinned_bytes == 4 * 32
    stager.close()
    assert all(p.closed for p in backend.pinned)


def test_close_frees_every_ring_once() -> None:
    backend = LazyBackend(3, (0, 1, 1))
    stager = Stager(backend, chunk=16, slots=2)  # type: ignore[arg-type]
    for d in (1, 2, 0):
        stager.copy(Buf(bytearray(40), d), Buf(bytearray(40), 0), 40)[1].wait()  # type: ignore[arg-type]
    assert len(backend.pinned) == 2  # devices 1 and 2 share a context, so a ring
    stager.close()
    stager.close()
    assert all(p.closed for p in backend.pinned) and stager.pinned_bytes == 0


def test_bad_ring_shapes() -> None:
    backend = LazyBackend(1, (0,))
    with pytest.raises(ValueError):
        Stager(backend, chunk=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Stager(backend, slots=1)  # type: ignore[arg-type]
