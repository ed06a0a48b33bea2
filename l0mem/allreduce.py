"""In-place sum of an FP32 buffer held by each of N devices, over any :class:`l0mem.backends.Backend`.

Two paths, chosen by size (``threshold``, default 32768 elements, as in
llama.cpp's split-mode tensor all-reduce for SYCL):

- ``f32`` (below the threshold): FP32 values cross to the peer and are added.
- ``bf16`` (at or above it): a device compresses FP32 to BF16 into an outbox,
  copies it into the peer's inbox (half the bytes), and the peer
  decompresses-and-adds into its FP32 partial.

Algorithms:

- N = 2 (``pair``), as in llama.cpp: every device sends its whole buffer to
  the other. On the bf16 path both devices then compute
  ``bf16(x0) + bf16(x1)``: each rebuilds its own partial from its BF16 outbox
  (zero fill, then decompress-add) before adding the peer's, so both hold the
  same bits (llama.cpp adds the peer's BF16 to its unrounded partial, which
  leaves the two devices with different results).
- N > 2 (``ring``): reduce-scatter then all-gather over N chunks. The chunk
  for device k starts at k and travels k -> k+1 -> ... collecting one partial
  per hop, so device k-1 ends with the full sum of chunk k. The all-gather
  moves the same representation as the reduce-scatter: BF16 on the bf16 path
  (the owner compresses its reduced chunk into its own gather area too and
  every device rebuilds the whole buffer from BF16, so all hold identical
  bits), FP32 on the f32 path. Every device sends ``2 (N-1)/N`` of the buffer
  in total, so the bf16 path moves exactly half the bytes of the f32 path.

Error (see :func:`error_bound`): each input x_d reaches the result multiplied by
at most ``b`` BF16 roundings (unit 2^-8) and ``f`` FP32 roundings (unit
2^-24), so ``|result - sum| <= gamma * sum_d |x_d|`` with
``gamma = t / (1 - t)``, ``t = b 2^-8 + f 2^-24``. Pair: f32 ``b=0, f=1``;
bf16 ``b=1, f=1``. Ring: f32 ``b=0, f=N-1``; bf16 ``b=N, f=N-1`` (N-1 hops
of the reduce-scatter plus the all-gather's rounding).

Scratch: one persistent allocation per device of at least ``4 * nelem``
bytes, grown when a larger call comes, freed by :meth:`AllReduce.close`.
Ordering: every copy between devices runs on the source device's in-order
queue (a host-staged copy: download on the source, upload on the
destination), and a device's last operation waits for every write into its
memory, so after :attr:`AllReduceStats.done` a device's queue may use its
buffer. The call does not wait for the devices, except when the scratch grows
(the old scratch may still be in use) and where a backend must (events of
another context are waited on the host). Bytes are counted per
copy as it is enqueued (:attr:`AllReduceStats.bytes_crossed`).

Events: every dependency between queues is passed explicitly as ``wait_for``
when the waiting operation is enqueued; no operation relies on the order of
another queue through an event the all-reduce no longer holds. Between calls
the all-reduce keeps each device's last event (the guard the next call's
writes into that device wait for, and :attr:`AllReduceStats.done`), updated
per device so a device without work in a call keeps its older guard. Keeping
an event that a pending operation waits for alive until that operation has
run is the backend's part of the contract (:mod:`l0mem.backends.levelzero`,
:mod:`l0mem.backends.sycl`). tests/test_allreduce_sycl_queues.py runs back-to-back
calls on concurrently running SYCL queues and checks every result.

What it may import: :mod:`l0mem.backends` and the layers below it
(:mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`) and the leaf
modules; it runs over the :class:`~l0mem.backends.Backend` interface, so it
never needs more than :mod:`l0mem.backends`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from l0mem.backends import Backend, DeviceBuffer, Event, cleanup, staged_copy
from l0mem.backends.kernels import add_f32, compress_bf16, decompress_add_bf16

DEFAULT_THRESHOLD = 32768
BF16_UNIT = 2.0**-8
F32_UNIT = 2.0**-24
_ALIGN = 256
_ZERO_F32 = b"\x00\x00\x00\x00"

PathName = Literal["f32", "bf16"]
Transport = Literal["auto", "direct", "staged"]


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def roundings(path: PathName, n_devices: int) -> tuple[int, int]:
    """Return (BF16 roundings, FP32 roundings) an input can pass through on ``path`` with ``n_devices``."""
    if path not in ("f32", "bf16"):
        raise ValueError(f"path must be 'f32' or 'bf16', got {path!r}")
    if n_devices < 2:
        return 0, 0
    if n_devices == 2:
        return (1, 1) if path == "bf16" else (0, 1)
    hops = n_devices - 1
    return (n_devices, hops) if path == "bf16" else (0, hops)


def error_bound(path: PathName, n_devices: int) -> float:
    """Return gamma: ``|result - exact| <= gamma * sum |x_d|`` element-wise for this path and N."""
    b, f = roundings(path, n_devices)
    t = b * BF16_UNIT + f * F32_UNIT
    return t / (1.0 - t)


@dataclass(frozen=True)
class AllReduceStats:
    """What one all-reduce call did: path, bytes per ordered device pair, copies and launches.

    ``copies`` counts copies between devices (``staged_copies`` of them went
    through host memory), ``local_copies`` copies within one device.
    """

    path: PathName
    algorithm: Literal["single", "pair", "ring"]
    nelem: int
    devices: tuple[int, ...]
    bytes_crossed: dict[tuple[int, int], int]
    copies: int
    local_copies: int
    staged_copies: int
    kernel_launches: int
    fills: int
    done: tuple[Event, ...] = field(default=(), repr=False, compare=False)

    @property
    def total_bytes(self) -> int:
        """Return the bytes that crossed between distinct devices, summed over all pairs."""
        return sum(self.bytes_crossed.values())

    def wait(self) -> None:
        """Block until every device has finished its part of the call."""
        for ev in self.done:
            ev.wait()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (pairs as ``"src>dst"`` keys)."""
        return {
            "path": self.path,
            "algorithm": self.algorithm,
            "nelem": self.nelem,
            "devices": list(self.devices),
            "bytes_crossed": {f"{s}>{d}": n for (s, d), n in sorted(self.bytes_crossed.items())},
            "total_bytes": self.total_bytes,
            "copies": self.copies,
            "local_copies": self.local_copies,
            "staged_copies": self.staged_copies,
            "kernel_launches": self.kernel_launches,
            "fills": self.fills,
        }


class _Call:
    """Enqueues one call's work, counting bytes and remembering each queue's last event."""

    def __init__(self, backend: Backend, routes: dict[tuple[int, int], str]) -> None:
        self.backend = backend
        self.routes = routes
        self.bytes: dict[tuple[int, int], int] = {}
        self.copies = 0
        self.local_copies = 0
        self.staged = 0
        self.launches = 0
        self.fills = 0
        self.last: dict[int, Event] = {}

    def copy(
        self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        s, d = src.device, dst.device
        waits = [w for w in wait_for if w is not None]
        if s != d and self.routes[(s, d)] == "staged":
            down, up = staged_copy(self.backend, dst, src, nbytes, wait_for=waits)
            self.staged += 1
            self.last[s], self.last[d] = down, up
            ev = up
        else:
            ev = self.backend.copy(dst, src, nbytes, queue_device=s, wait_for=waits)
            self.last[s] = ev
        if s != d:
            self.bytes[(s, d)] = self.bytes.get((s, d), 0) + nbytes
            self.copies += 1
        else:
            self.local_copies += 1
        return ev

    def compress(self, src: DeviceBuffer, dst: DeviceBuffer, n: int) -> Event:
        self.launches += 1
        ev = compress_bf16(self.backend, src, dst, n)
        self.last[src.device] = ev
        return ev

    def decompress_add(
        self, src: DeviceBuffer, acc: DeviceBuffer, n: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        self.launches += 1
        ev = decompress_add_bf16(self.backend, src, acc, n, wait_for=wait_for)
        self.last[acc.device] = ev
        return ev

    def add(
        self, src: DeviceBuffer, acc: DeviceBuffer, n: int, wait_for: Sequence[Event] = ()
    ) -> Event:
        self.launches += 1
        ev = add_f32(self.backend, src, acc, n, wait_for=wait_for)
        self.last[acc.device] = ev
        return ev

    def zero(self, buf: DeviceBuffer) -> Event:
        self.fills += 1
        ev = self.backend.fill(buf, _ZERO_F32)
        self.last[buf.device] = ev
        return ev


def _chunks(nelem: int, parts: int) -> list[tuple[int, int]]:
    """Return (first element, length) of each of ``parts`` chunks; trailing chunks may be empty."""
    size = -(-nelem // parts)
    out = []
    for k in range(parts):
        start = min(k * size, nelem)
        out.append((start, max(0, min(nelem, start + size) - start)))
    return out


def _layout(n: int, nelem: int, path: PathName) -> dict[str, tuple[int, int]]:
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
        max(4 * nelem, *(o + b for o, b in _layout(n_devices, nelem, p).values())) for p in paths
    )


class AllReduce:
    """A reusable all-reduce over ``devices`` of ``backend`` with persistent per-device scratch."""

    def __init__(
        self,
        backend: Backend,
        devices: Sequence[int],
        *,
        threshold: int = DEFAULT_THRESHOLD,
        transport: Transport = "auto",
    ) -> None:
        devs = list(devices)
        if not devs:
            raise ValueError("all-reduce needs at least one device")
        if len(set(devs)) != len(devs):
            raise ValueError(f"devices must be distinct backend indices, got {devs}")
        count = backend.device_count()
        for d in devs:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < count:
                raise ValueError(f"device {d!r} is not a backend index 0..{count - 1}")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ValueError(f"threshold must be an int >= 0, got {threshold!r}")
        if transport not in ("auto", "direct", "staged"):
            raise ValueError(f"transport must be auto, direct or staged, got {transport!r}")
        self.backend = backend
        self.devices = tuple(devs)
        self.threshold = threshold
        self.transport = transport
        self.routes: dict[tuple[int, int], str] = {}
        for s in devs:
            for d in devs:
                if s == d:
                    continue
                route, why = backend.copy_route(s, d)
                if transport == "direct" and route != "direct":
                    raise ValueError(f"no direct copy from device {s} to {d}: {why}")
                self.routes[(s, d)] = "staged" if transport == "staged" else route
        self._scratch: dict[int, DeviceBuffer] = {}
        self._guard: dict[int, Event] = {}
        self._closed = False

    @property
    def scratch_bytes(self) -> int:
        """Return the bytes of scratch currently allocated per device (0 before the first call)."""
        return min((b.nbytes for b in self._scratch.values()), default=0)

    def path_for(self, nelem: int) -> PathName:
        """Return the path a call with ``nelem`` elements takes: "f32" below the threshold, else "bf16"."""
        return "f32" if nelem < self.threshold else "bf16"

    def scratch_bytes_for(self, nelem: int, path: PathName | None = None) -> int:
        """Return the scratch bytes per device a call of ``nelem`` elements needs (default: worst path)."""
        return scratch_bytes(len(self.devices), nelem, path)

    def _ensure_scratch(self, need: int) -> None:
        need = max(need, 1)
        if all(d in self._scratch and self._scratch[d].nbytes >= need for d in self.devices):
            return
        # Growing frees the old scratch, which in-flight work of an earlier call may still use.
        for d in self.devices:
            self.backend.synchronize(d)
        for d in self.devices:
            old = self._scratch.pop(d, None)
            if old is not None:
                old.close()
            self._scratch[d] = self.backend.allocate(d, need)
        self._guard.clear()

    def _check(self, buffers: Sequence[DeviceBuffer], nelem: int) -> None:
        if self._closed:
            raise RuntimeError("the all-reduce is closed")
        if isinstance(nelem, bool) or not isinstance(nelem, int) or nelem < 0:
            raise ValueError(f"nelem must be an int >= 0, got {nelem!r}")
        if len(buffers) != len(self.devices):
            raise ValueError(
                f"expected {len(self.devices)} buffers (one per device), got {len(buffers)}"
            )
        for i, (buf, dev) in enumerate(zip(buffers, self.devices, strict=True)):
            if buf.device != dev:
                raise ValueError(f"buffer {i} is on device {buf.device}, expected device {dev}")
            if buf.nbytes < 4 * nelem:
                raise ValueError(
                    f"buffer {i} holds {buf.nbytes} bytes, {nelem} FP32 elements need {4 * nelem}"
                )

    def __call__(
        self,
        buffers: Sequence[DeviceBuffer],
        nelem: int,
        *,
        path: Literal["auto", "f32", "bf16"] = "auto",
    ) -> AllReduceStats:
        """Sum ``nelem`` FP32 elements of ``buffers`` (one per device, in device order) in place; return stats."""
        self._check(buffers, nelem)
        if path not in ("auto", "f32", "bf16"):
            raise ValueError(f"path must be auto, f32 or bf16, got {path!r}")
        chosen: PathName = self.path_for(nelem) if path == "auto" else path
        n = len(self.devices)
        algorithm: Literal["single", "pair", "ring"] = (
            "single" if n == 1 else "pair" if n == 2 else "ring"
        )
        call = _Call(self.backend, self.routes)
        if n > 1 and nelem > 0:
            layout = _layout(n, nelem, chosen)
            self._ensure_scratch(self.scratch_bytes_for(nelem, chosen))
            regions = {
                d: {name: self._scratch[d].view(o, b) for name, (o, b) in layout.items()}
                for d in self.devices
            }
            bufs = dict(zip(self.devices, buffers, strict=True))
            if n == 2:
                self._pair(call, bufs, regions, nelem, chosen)
            else:
                self._ring(call, bufs, regions, nelem, chosen)
            self._guard.update(call.last)
        done = tuple(self._guard[d] for d in self.devices if d in self._guard) if call.last else ()
        return AllReduceStats(
            path=chosen,
            algorithm=algorithm,
            nelem=nelem,
            devices=self.devices,
            bytes_crossed=call.bytes,
            copies=call.copies,
            local_copies=call.local_copies,
            staged_copies=call.staged,
            kernel_launches=call.launches,
            fills=call.fills,
            done=done,
        )

    def _waits(self, *events: Event | None) -> list[Event]:
        return [e for e in events if e is not None]

    def _pair(
        self,
        call: _Call,
        bufs: dict[int, DeviceBuffer],
        regions: dict[int, dict[str, DeviceBuffer]],
        nelem: int,
        path: PathName,
    ) -> None:
        a, b = self.devices
        peer = {a: b, b: a}
        sent: dict[int, Event] = {}
        if path == "f32":
            for d in (a, b):
                sent[d] = call.copy(
                    regions[peer[d]]["in"],
                    bufs[d],
                    4 * nelem,
                    self._waits(self._guard.get(peer[d])),
                )
            for d in (a, b):
                call.add(regions[d]["in"], bufs[d], nelem, [sent[peer[d]]])
            return
        for d in (a, b):
            call.compress(bufs[d], regions[d]["out"], nelem)
            sent[d] = call.copy(
                regions[peer[d]]["in"],
                regions[d]["out"],
                2 * nelem,
                self._waits(self._guard.get(peer[d])),
            )
        for d in (a, b):
            # Rebuild the own partial from BF16 so both devices add the same two values.
            call.zero(bufs[d].view(0, 4 * nelem))
            call.decompress_add(regions[d]["out"], bufs[d], nelem)
            call.decompress_add(regions[d]["in"], bufs[d], nelem, [sent[peer[d]]])

    def _ring(
        self,
        call: _Call,
        bufs: dict[int, DeviceBuffer],
        regions: dict[int, dict[str, DeviceBuffer]],
        nelem: int,
        path: PathName,
    ) -> None:
        devs = self.devices
        n = len(devs)
        chunks = _chunks(nelem, n)
        width = 4 if path == "f32" else 2

        def f32_chunk(pos: int, k: int) -> DeviceBuffer:
            start, length = chunks[k]
            return bufs[devs[pos]].view(4 * start, 4 * length)

        def gathered(pos: int, k: int) -> DeviceBuffer:
            start, length = chunks[k]
            return regions[devs[pos]]["gather"].view(width * start, width * length)

        # Reduce-scatter: at step s, position i sends chunk (i - s) to position i + 1.
        inbox_free: dict[int, Event | None] = {i: self._guard.get(devs[i]) for i in range(n)}
        for s in range(n - 1):
            arrivals = []
            for i in range(n):
                j, k = (i + 1) % n, (i - s) % n
                length = chunks[k][1]
                if length == 0:
                    continue
                inbox = regions[devs[j]]["in"].view(0, width * length)
                guard = self._waits(inbox_free[j], self._guard.get(devs[j]))
                if path == "f32":
                    ev = call.copy(inbox, f32_chunk(i, k), 4 * length, guard)
                else:
                    outbox = regions[devs[i]]["out"].view(0, 2 * length)
                    call.compress(f32_chunk(i, k), outbox, length)
                    ev = call.copy(inbox, outbox, 2 * length, guard)
                arrivals.append((j, k, inbox, ev))
            for j, k, inbox, ev in arrivals:
                length = chunks[k][1]
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
                if chunks[k][1]:
                    ready[(i, k)] = call.compress(f32_chunk(i, k), gathered(i, k), chunks[k][1])
        for s in range(n - 1):
            for i in range(n):
                j, k = (i + 1) % n, (i + 1 - s) % n
                length = chunks[k][1]
                if length == 0:
                    continue
                own = k == (i + 1) % n
                src = f32_chunk(i, k) if path == "f32" and own else gathered(i, k)
                guard = self._waits(ready.get((i, k)), rs_done[j], self._guard.get(devs[j]))
                ready[(j, k)] = call.copy(gathered(j, k), src, width * length, guard)

        for j in range(n):
            incoming = [ev for (pos, k), ev in ready.items() if pos == j and k != (j + 1) % n]
            if path == "bf16":
                call.zero(bufs[devs[j]].view(0, 4 * nelem))
                call.decompress_add(
                    regions[devs[j]]["gather"],
                    bufs[devs[j]],
                    nelem,
                    [*incoming, *self._waits(ready.get((j, (j + 1) % n)))],
                )
                continue
            # Move the received FP32 chunks from the gather area into place on this device's queue.
            own_start, own_len = chunks[(j + 1) % n]
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

    def close(self) -> None:
        """Wait for outstanding work on the devices and free the scratch buffers."""
        self._close(strict=True)

    def _close(self, *, strict: bool) -> None:
        if self._closed:
            return
        self._closed = True
        scratch = list(self._scratch.items())
        self._scratch.clear()
        self._guard.clear()
        waits = [functools.partial(self.backend.synchronize, d) for d, _ in scratch]
        cleanup([*waits, *(buf.close for _, buf in scratch)], strict=strict)

    def __enter__(self) -> AllReduce:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # After a failure in the block, a teardown error must not replace it.
        self._close(strict=exc_type is None)


def allreduce(
    backend: Backend,
    buffers: Sequence[DeviceBuffer],
    nelem: int,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    transport: Transport = "auto",
    path: Literal["auto", "f32", "bf16"] = "auto",
) -> AllReduceStats:
    """Sum ``nelem`` FP32 elements of ``buffers`` in place once, wait for it, and return the stats."""
    with AllReduce(
        backend, [b.device for b in buffers], threshold=threshold, transport=transport
    ) as ar:
        stats = ar(buffers, nelem, path=path)
        stats.wait()
    return stats


__all__ = [
    "BF16_UNIT",
    "DEFAULT_THRESHOLD",
    "F32_UNIT",
    "AllReduce",
    "AllReduceStats",
    "allreduce",
    "error_bound",
    "roundings",
    "scratch_bytes",
]
