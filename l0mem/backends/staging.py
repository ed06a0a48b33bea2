"""Host-staged device-to-device copies through a pinned ring the backend owns.

A staged copy moves bytes device -> host -> device. Done naively (one fresh
pageable buffer, download then upload) it runs at well under half the host
link's speed: the driver stages or pins pageable pages itself, and the two
legs never overlap. Here each backend keeps a small ring of pinned host slots
per context (:class:`Stager`), cuts a copy into slot-sized chunks and chains
them so that chunk i+1 comes down while chunk i goes up:

- the download of a chunk waits for the previous download (so the last
  download's event covers them all) and for the upload that last read its
  slot (a slot is reused only once its bytes have left);
- the upload of a chunk waits for its download and for the previous upload
  (so the last upload's event covers the whole copy).

Between contexts, device-side waits are not possible, and pinned memory of
one context must not be used by another's devices (Intel's driver crashes in
``zeCommandListAppendMemoryCopy`` when a list writes another context's host
allocation: tests/conformance/test_memory.py). A chunk goes down into the
source context's ring, the host copies it into the destination context's
ring, and it goes up from there. The host waits, each wait bounded by the
watchdog (:func:`copy_deadline` of the copy, from the caller's watchdog
base), for what the copy was told to wait for, for a chunk's download before
it copies it on, and for a slot's upload before the slot is written again;
downloads are submitted up to ``slots - 1`` chunks ahead of those waits, so
the source's queue never idles on the host. A hang is then a
:class:`CopyTimeout`. A copy that fails part way leaves its rings to work
still in flight: they are retired (freed at close) and the next copy makes
new ones.

What it may import: :mod:`.base` and :mod:`.host`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from l0mem.backends.base import HANG_BASE_S, DeviceBuffer, Event, cleanup, copy_deadline
from l0mem.backends.host import HostMemory

if TYPE_CHECKING:
    from l0mem.backends.base import Backend

# Measured with benchmarks/bench_staging.py (simulator with a 1 GB/s link model,
# SYCL CPU sub-devices): 4 MiB chunks reach 0.94 of the slower leg at 64 MiB
# and 0.8 at 16 MiB where 8 MiB chunks reach 0.88 and 0.66 (a pipeline of n
# chunks runs at n / (n + 1) of its slower stage at best), while 2 MiB chunks
# double the host's waits between contexts, which cost more than they gain on
# the SYCL CPU runtime. Between contexts the downloads run slots - 1 chunks
# ahead: two slots (one ahead) reach 0.7 there, three or four 0.9 and more. A
# ring of 4 x 4 MiB is 16 MiB of pinned memory per context (Backend.staging_ring_bytes).
CHUNK_BYTES = 4 << 20
SLOTS = 4


class _Ring:
    """Pinned slots in one context, each remembering the upload that last read it."""

    def __init__(self, memory: HostMemory, chunk: int, slots: int) -> None:
        self.memory = memory
        self.slots = [memory.view(i * chunk, chunk) for i in range(slots)]
        self.read_by: list[Event | None] = [None] * slots
        self.next = 0

    def take(self) -> int:
        """Return the index of the next slot, round robin."""
        i = self.next
        self.next = (i + 1) % len(self.slots)
        return i


class Stager:
    """A backend's host-staged copies: one pinned ring per context, made on first use."""

    def __init__(self, backend: Backend, *, chunk: int = CHUNK_BYTES, slots: int = SLOTS) -> None:
        """Stage ``backend``'s copies through rings of ``slots`` chunks of ``chunk`` bytes."""
        if chunk < 1 or slots < 2:
            raise ValueError(
                f"a staging ring needs chunk >= 1 and slots >= 2, got {chunk}, {slots}"
            )
        self._backend = backend
        self.chunk = chunk
        self.slot_count = slots
        self._rings: list[_Ring] = []
        self._retired: list[_Ring] = []  # rings a failed copy left with work in flight

    @property
    def ring_bytes(self) -> int:
        """Return the pinned host bytes of one context's ring."""
        return self.chunk * self.slot_count

    @property
    def pinned_bytes(self) -> int:
        """Return how many bytes of pinned host memory the rings hold."""
        return sum(r.memory.nbytes for r in (*self._rings, *self._retired))

    def _ring(self, device: int) -> _Ring:
        """Return the ring of ``device``'s context, allocating it on first use."""
        for ring in self._rings:
            if self._backend.same_context(ring.memory.device, device):
                return ring
        # One allocation per ring: a failed create leaves nothing behind.
        memory = self._backend.allocate_host(device, self.chunk * self.slot_count)
        ring = _Ring(memory, self.chunk, self.slot_count)
        self._rings.append(ring)
        return ring

    def copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int,
        wait_for: Sequence[Event] = (),
        watchdog: float = HANG_BASE_S,
    ) -> tuple[Event, Event]:
        """Copy ``nbytes`` from the start of ``src`` to the start of ``dst`` through the ring.

        Returns (last download, last upload): the first completes once every
        byte has reached the host, the second once every byte has arrived.
        """
        backend = self._backend
        across = not backend.same_context(src.device, dst.device)
        if across:
            # Another context's events cannot be waited for on the device: the host
            # waits, bounded by the watchdog, before anything is submitted.
            for ev in wait_for:
                ev.wait(copy_deadline(nbytes, watchdog))
            wait_for = ()
        if nbytes == 0:
            nothing = backend.download(src.view(0, 0), bytearray(), wait_for=wait_for)
            return nothing, backend.upload(dst.view(0, 0), b"", wait_for=[nothing])
        far = self._ring(dst.device)
        near = self._ring(src.device) if across else far
        try:
            if across:
                return self._across(near, far, dst, src, nbytes, watchdog)
            return self._within(far, dst, src, nbytes, wait_for)
        except BaseException:
            # Work already submitted may still use the rings' slots: they are not
            # used again, and are freed only at close, after that work.
            for r in (far,) if near is far else (near, far):
                if r in self._rings:
                    self._rings.remove(r)
                    self._retired.append(r)
            raise

    def _within(
        self, ring: _Ring, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int, wait_for: Sequence[Event]
    ) -> tuple[Event, Event]:
        """Stage within one context: every order is a device-side wait, the host never waits."""
        backend = self._backend
        down: Event | None = None
        up: Event | None = None
        for start in range(0, nbytes, self.chunk):
            n = min(self.chunk, nbytes - start)
            i = ring.take()
            slot = ring.slots[i].view(0, n)
            waits = list(wait_for) if down is None else [down]
            last_reader = ring.read_by[i]
            if last_reader is not None:
                waits.append(last_reader)
            down = backend.download(src.view(start, n), slot, wait_for=waits)
            up = backend.upload(dst.view(start, n), slot, wait_for=[down] if up is None else [down, up])
            ring.read_by[i] = up
        assert down is not None and up is not None
        return down, up

    def _across(
        self,
        near: _Ring,
        far: _Ring,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int,
        watchdog: float,
    ) -> tuple[Event, Event]:
        """Stage between contexts through a ring in each; downloads run ``slots - 1`` chunks ahead.

        A chunk goes down into the source context's ring (``near``), the host
        copies it into the destination context's ring (``far``), and it goes up
        from there: pinned memory is only ever used by its own context's devices.
        """
        backend = self._backend
        pending: deque[tuple[int, int, int, Event]] = deque()  # (start, size, slot, download)
        down: Event | None = None
        up: Event | None = None
        # A wait may also cover work queued ahead on the same queue: the bound is
        # the whole copy's, not one chunk's.
        bound = copy_deadline(nbytes, watchdog)

        def send_oldest() -> None:
            nonlocal up
            start, n, i, ev = pending.popleft()
            ev.wait(bound)
            j = far.take()
            last_reader = far.read_by[j]
            if last_reader is not None:
                last_reader.wait(bound)
            far.slots[j].view(0, n).memoryview()[:] = near.slots[i].view(0, n).memoryview()
            near.read_by[i] = None  # the host has read it: free
            waits = [] if up is None else [up]
            up = backend.upload(dst.view(start, n), far.slots[j].view(0, n), wait_for=waits)
            far.read_by[j] = up

        for start in range(0, nbytes, self.chunk):
            n = min(self.chunk, nbytes - start)
            i = near.take()
            last_reader = near.read_by[i]
            if last_reader is not None:
                # A copy within the source's context read it last.
                last_reader.wait(bound)
            waits = [] if down is None else [down]
            down = backend.download(src.view(start, n), near.slots[i].view(0, n), wait_for=waits)
            pending.append((start, n, i, down))
            if len(pending) == len(near.slots) - 1:
                send_oldest()
        while pending:
            send_oldest()
        assert down is not None and up is not None
        return down, up

    def close(self) -> None:
        """Free every ring (after the backend's work has finished); idempotent."""
        rings = [*self._rings, *self._retired]
        self._rings, self._retired = [], []
        cleanup([r.memory.close for r in rings], strict=True)


__all__ = ["CHUNK_BYTES", "SLOTS", "Stager"]
