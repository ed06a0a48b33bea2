"""The public all-reduce: :class:`AllReduce` with its scratch and guards, its stats, and error bounds.

The schedules it enqueues are in :mod:`l0mem.allreduce.schedules`; the
package docstring describes the algorithms, the error bound and the ordering.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from l0mem.allreduce.schedules import Call, PathName, Step, layout, pair, ring, scratch_bytes
from l0mem.backends import HANG_BASE_S, Backend, DeviceBuffer, Event, cleanup, copy_deadline

DEFAULT_THRESHOLD = 32768
BF16_UNIT = 2.0**-8
F32_UNIT = 2.0**-24

Transport = Literal["auto", "direct", "staged"]


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
    # What the call enqueued, in order, with what each step waited for.
    steps: tuple[Step, ...] = field(default=(), repr=False, compare=False)

    @property
    def total_bytes(self) -> int:
        """Return the bytes that crossed between distinct devices, summed over all pairs."""
        return sum(self.bytes_crossed.values())

    def deadline(self, base: float = HANG_BASE_S) -> float:
        """Return the seconds the call may take before it counts as hung (its bytes' copy deadline)."""
        return copy_deadline(self.total_bytes + 4 * self.nelem * len(self.devices), base)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every device has finished its part; raise CopyTimeout after ``timeout`` s."""
        for ev in self.done:
            ev.wait(timeout)

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
        """Check ``devices`` and fix each pair's copy route (``transport`` may force one)."""
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
        call = Call(self.backend, self.routes)
        if n > 1 and nelem > 0:
            places = layout(n, nelem, chosen)
            self._ensure_scratch(self.scratch_bytes_for(nelem, chosen))
            regions = {
                d: {name: self._scratch[d].view(o, b) for name, (o, b) in places.items()}
                for d in self.devices
            }
            bufs = dict(zip(self.devices, buffers, strict=True))
            schedule = pair if n == 2 else ring
            schedule(call, self.devices, self._guard, bufs, regions, nelem, chosen)
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
            steps=tuple(call.steps),
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
        """Return the all-reduce for a with block."""
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        """Close on leaving the with block."""
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
        stats.wait(stats.deadline())
    return stats
