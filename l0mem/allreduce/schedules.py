"""The all-reduce's schedules: what the pair (N = 2) and the ring (N > 2) enqueue, and their scratch.

:class:`Call` enqueues one call's copies, kernels and fills on a backend,
counting bytes and remembering each device's last event; :func:`pair` and
:func:`ring` enqueue the two algorithms the package docstring describes;
:func:`layout` places the regions they use in each device's scratch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from l0mem.backends import Backend, DeviceBuffer, Event
from l0mem.backends.kernels import add_f32, compress_bf16, decompress_add_bf16

PathName = Literal["f32", "bf16"]
_ALIGN = 256
_ZERO_F32 = b"\x00\x00\x00\x00"


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


# The launchers of the steps that add into an FP32 accumulator.
ACCUMULATORS: dict[str, Callable[..., Event]] = {
    "decompress_add": decompress_add_bf16,
    "add": add_f32,
}


def present(*events: Event | None) -> list[Event]:
    """Return the events that exist (a device without an earlier call has no guard)."""
    return [e for e in events if e is not None]


StepOp = Literal["copy", "staged_copy", "compress", "decompress_add", "add", "fill"]


@dataclass(frozen=True)
class Step:
    """One operation a call enqueued: what, where, how big, and the earlier steps it waits for.

    ``size`` is bytes for copies and fills, elements for kernels; a kernel or
    a fill has ``src == dst``, its device.
    """

    op: StepOp
    src: int
    dst: int
    size: int
    after: tuple[int, ...] = ()

    @property
    def queues(self) -> tuple[int, ...]:
        """Return the device queues the step occupies: a copy the source's (a staged one both)."""
        if self.op == "staged_copy":
            return (self.src, self.dst)
        return (self.src,) if self.op == "copy" else (self.dst,)


class Call:
    """Enqueues one call's work, counting bytes and remembering each queue's last event."""

    def __init__(self, backend: Backend, routes: dict[tuple[int, int], str]) -> None:
        """Enqueue on ``backend``, copying between devices by ``routes`` ("direct" or "staged")."""
        self.backend = backend
        self.routes = routes
        self.bytes: dict[tuple[int, int], int] = {}
        self.copies = 0
        self.local_copies = 0
        self.staged = 0
        self.launches = 0
        self.fills = 0
        self.last: dict[int, Event] = {}
        self.steps: list[Step] = []
        self._step_of: dict[int, int] = {}  # id(event) -> step; the events are kept below
        self._events: list[Event] = []

    def _record(
        self, op: StepOp, src: int, dst: int, size: int, waits: Sequence[Event], *made: Event
    ) -> None:
        """Add a step that waited for ``waits`` and signals ``made``."""
        after = sorted({self._step_of[id(ev)] for ev in waits if id(ev) in self._step_of})
        for ev in made:
            self._step_of[id(ev)] = len(self.steps)
            self._events.append(ev)
        self.steps.append(Step(op, src, dst, size, tuple(after)))

    def copy(
        self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Copy ``nbytes`` from ``src`` to ``dst`` on the source's queue (staged by the route)."""
        s, d = src.device, dst.device
        waits = present(*wait_for)
        if s != d and self.routes[(s, d)] == "staged":
            down, up = self.backend.staged_copy(dst, src, nbytes, wait_for=waits)
            self.staged += 1
            self.last[s], self.last[d] = down, up
            self._record("staged_copy", s, d, nbytes, waits, down, up)
            ev = up
        else:
            ev = self.backend.copy(dst, src, nbytes, queue_device=s, wait_for=waits)
            self.last[s] = ev
            self._record("copy", s, d, nbytes, waits, ev)
        if s != d:
            self.bytes[(s, d)] = self.bytes.get((s, d), 0) + nbytes
            self.copies += 1
        else:
            self.local_copies += 1
        return ev

    def compress(self, src: DeviceBuffer, dst: DeviceBuffer, n: int) -> Event:
        """Compress ``n`` FP32 elements of ``src`` to BF16 in ``dst``."""
        self.launches += 1
        ev = compress_bf16(self.backend, src, dst, n)
        self.last[src.device] = ev
        self._record("compress", src.device, src.device, n, (), ev)
        return ev

    def decompress_add(
        self, src: DeviceBuffer, acc: DeviceBuffer, n: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Add ``n`` BF16 elements of ``src`` into the FP32 ``acc``."""
        return self._accumulate("decompress_add", src, acc, n, wait_for)

    def add(
        self, src: DeviceBuffer, acc: DeviceBuffer, n: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Add ``n`` FP32 elements of ``src`` into ``acc``."""
        return self._accumulate("add", src, acc, n, wait_for)

    def _accumulate(
        self,
        op: Literal["decompress_add", "add"],
        src: DeviceBuffer,
        acc: DeviceBuffer,
        n: int,
        wait_for: Sequence[Event],
    ) -> Event:
        """Launch the kernel adding ``src`` into ``acc`` on ``acc``'s device."""
        self.launches += 1
        kernel = ACCUMULATORS[op]
        ev = kernel(self.backend, src, acc, n, wait_for=wait_for)
        self.last[acc.device] = ev
        self._record(op, acc.device, acc.device, n, wait_for, ev)
        return ev

    def zero(self, buf: DeviceBuffer) -> Event:
        """Fill ``buf`` with FP32 zeros."""
        self.fills += 1
        ev = self.backend.fill(buf, _ZERO_F32)
        self.last[buf.device] = ev
        self._record("fill", buf.device, buf.device, buf.nbytes, (), ev)
        return ev


def chunks(nelem: int, parts: int) -> list[tuple[int, int]]:
    """Return (first element, length) of each of ``parts`` chunks; trailing chunks may be empty."""
    size = -(-nelem // parts)
    out = []
    for k in range(parts):
        start = min(k * size, nelem)
        out.append((start, max(0, min(nelem, start + size) - start)))
    return out


def layout(n: int, nelem: int, path: PathName) -> dict[str, tuple[int, int]]:
    """Return region name -> (offset, bytes) of one device's scratch for a call over ``n`` devices."""
    if n == 2:
        if path == "f32":
            return {"in": (0, 4 * nelem)}
        return {"out": (0, 2 * nelem), "in": (_align(2 * nelem), 2 * nelem)}
    c = -(-nelem // n)
    if path == "f32":
        # The inbox overlaps the gather area: all-gather writes wait for the reduce-scatter.
        return {"in": (0, 4 * c), "gather": (0, 4 * nelem)}
    out_at, in_at = 0, _align(2 * c)
    gather_at = _align(in_at + 2 * c)
    return {"out": (out_at, 2 * c), "in": (in_at, 2 * c), "gather": (gather_at, 2 * nelem)}


def scratch_bytes(n_devices: int, nelem: int, path: PathName | None = None) -> int:
    """Return the scratch bytes per device an all-reduce of ``nelem`` over ``n_devices`` needs.

    ``path=None`` gives the larger of the two paths; 0 when nothing crosses.
    """
    if n_devices < 2 or nelem <= 0:
        return 0
    paths: tuple[PathName, ...] = ("f32", "bf16") if path is None else (path,)
    return max(
        max(4 * nelem, *(o + b for o, b in layout(n_devices, nelem, p).values())) for p in paths
    )


def pair(
    call: Call,
    devices: tuple[int, ...],
    guard: dict[int, Event],
    bufs: dict[int, DeviceBuffer],
    regions: dict[int, dict[str, DeviceBuffer]],
    nelem: int,
    path: PathName,
) -> None:
    """Enqueue the two-device exchange; ``guard`` holds each device's last event of earlier calls."""
    a, b = devices
    peer = {a: b, b: a}
    sent: dict[int, Event] = {}
    if path == "f32":
        for d in (a, b):
            sent[d] = call.copy(
                regions[peer[d]]["in"], bufs[d], 4 * nelem, present(guard.get(peer[d]))
            )
        for d in (a, b):
            call.add(regions[d]["in"], bufs[d], nelem, [sent[peer[d]]])
        return
    # Both compressions first: a staged copy between contexts holds the host until
    # its downloads are done, and the other device's kernel should not wait for that.
    for d in (a, b):
        call.compress(bufs[d], regions[d]["out"], nelem)
    for d in (a, b):
        sent[d] = call.copy(
            regions[peer[d]]["in"], regions[d]["out"], 2 * nelem, present(guard.get(peer[d]))
        )
    for d in (a, b):
        # Rebuild the own partial from BF16 so both devices add the same two values.
        call.zero(bufs[d].view(0, 4 * nelem))
        call.decompress_add(regions[d]["out"], bufs[d], nelem)
        call.decompress_add(regions[d]["in"], bufs[d], nelem, [sent[peer[d]]])


def ring(
    call: Call,
    devices: tuple[int, ...],
    guard: dict[int, Event],
    bufs: dict[int, DeviceBuffer],
    regions: dict[int, dict[str, DeviceBuffer]],
    nelem: int,
    path: PathName,
) -> None:
    """Enqueue reduce-scatter then all-gather around the ring of ``devices`` (N > 2)."""
    devs = devices
    n = len(devs)
    parts = chunks(nelem, n)
    width = 4 if path == "f32" else 2

    def f32_chunk(pos: int, k: int) -> DeviceBuffer:
        start, length = parts[k]
        return bufs[devs[pos]].view(4 * start, 4 * length)

    def gathered(pos: int, k: int) -> DeviceBuffer:
        start, length = parts[k]
        return regions[devs[pos]]["gather"].view(width * start, width * length)

    # Reduce-scatter: at step s, position i sends chunk (i - s) to position i + 1.
    inbox_free: dict[int, Event | None] = {i: guard.get(devs[i]) for i in range(n)}
    for s in range(n - 1):
        arrivals = []
        for i in range(n):
            j, k = (i + 1) % n, (i - s) % n
            length = parts[k][1]
            if length == 0:
                continue
            inbox = regions[devs[j]]["in"].view(0, width * length)
            waits = present(inbox_free[j], guard.get(devs[j]))
            if path == "f32":
                ev = call.copy(inbox, f32_chunk(i, k), 4 * length, waits)
            else:
                outbox = regions[devs[i]]["out"].view(0, 2 * length)
                call.compress(f32_chunk(i, k), outbox, length)
                ev = call.copy(inbox, outbox, 2 * length, waits)
            arrivals.append((j, k, inbox, ev))
        for j, k, inbox, ev in arrivals:
            length = parts[k][1]
            if path == "f32":
                inbox_free[j] = call.add(inbox, f32_chunk(j, k), length, [ev])
            else:
                inbox_free[j] = call.decompress_add(inbox, f32_chunk(j, k), length, [ev])
    rs_done = {i: call.last.get(devs[i]) for i in range(n)}

    # All-gather: position i owns chunk (i + 1) and forwards chunk (i + 1 - s) at step s.
    ready: dict[tuple[int, int], Event] = {}
    if path == "bf16":
        for i in range(n):
            k = (i + 1) % n
            if parts[k][1]:
                ready[(i, k)] = call.compress(f32_chunk(i, k), gathered(i, k), parts[k][1])
    for s in range(n - 1):
        for i in range(n):
            j, k = (i + 1) % n, (i + 1 - s) % n
            length = parts[k][1]
            if length == 0:
                continue
            own = k == (i + 1) % n
            src = f32_chunk(i, k) if path == "f32" and own else gathered(i, k)
            waits = present(ready.get((i, k)), rs_done[j], guard.get(devs[j]))
            ready[(j, k)] = call.copy(gathered(j, k), src, width * length, waits)

    for j in range(n):
        incoming = [ev for (pos, k), ev in ready.items() if pos == j and k != (j + 1) % n]
        if path == "bf16":
            call.zero(bufs[devs[j]].view(0, 4 * nelem))
            call.decompress_add(
                regions[devs[j]]["gather"],
                bufs[devs[j]],
                nelem,
                [*incoming, *present(ready.get((j, (j + 1) % n)))],
            )
            continue
        # Move the received FP32 chunks from the gather area into place on this device's queue.
        own_start, own_len = parts[(j + 1) % n]
        gather, buf = regions[devs[j]]["gather"], bufs[devs[j]]
        spans = [(0, own_start), (own_start + own_len, nelem - own_start - own_len)]
        for start, length in spans:
            if length > 0:
                call.copy(
                    buf.view(4 * start, 4 * length),
                    gather.view(4 * start, 4 * length),
                    4 * length,
                    incoming,
                )
