"""The SYCL implementation of :class:`l0mem.backends.Backend`, through dpctl.

Every device gets one in-order queue. ``context="default"`` puts each queue in
the context a plain ``sycl::queue(device)`` gets (for root devices, the
platform's default context holding every root device: the layout in which the
SYCL runtime makes allocations resident on peers); ``context="single"`` gives
each device index a fresh context holding that device alone. Memory of one
context cannot be addressed from another, so a copy between contexts is staged
through host memory.

dpctl runs work asynchronously and does not keep host buffers or device
allocations alive for it, so the backend holds a reference to everything an
enqueued operation touches until its event has completed (one
:class:`l0mem.keepalive.KeepAlive` per queue, the mechanism the Level Zero
backend's event recycler uses too).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any, Literal

from l0mem.backends.allocation import naming_allocation
from l0mem.backends.base import (
    DeviceBuffer,
    DeviceMemory,
    Event,
    HostBuffer,
    PeerAccess,
    ResidencyUnsupported,
    RouteKind,
    is_simulator_name,
)
from l0mem.backends.checks import check_allocation_size, copy_size, fill_size
from l0mem.backends.common import CommonBackend, Gate, one_at_a_time
from l0mem.backends.host import HostMemory
from l0mem.backends.staging import Stager
from l0mem.backends.sycl_buffers import SyclBuffer, SyclEvent, UsmHost, host_view, usm_allocate
from l0mem.backends.sycl_info import (
    default_devices,
    device_memory,
    device_name,
    direct_copy_hazard,
    open_queues,
    peer_access,
)
from l0mem.backends.sycl_kernels import (
    CPU_GROUPS_PER_UNIT,
    CPU_MAX_WORK_GROUP_SIZE,
    SyclKernels,
    check_group_size_type,
)
from l0mem.backends.sycl_lifetime import SyclLifetime
from l0mem.driverenv import no_hardware_reason
from l0mem.keepalive import KeepAlive
from l0mem.sycl import SyclNoDeviceError, load_dpctl, resolve_device

_FILL_SEED_BYTES = 1 << 16
CPU_CHUNK_BYTES = 16 << 20

# Re-exported: tests and the p2p measurement import these from here.
__all__ = [
    "CPU_GROUPS_PER_UNIT",
    "CPU_MAX_WORK_GROUP_SIZE",
    "SyclBackend",
    "SyclBuffer",
    "SyclEvent",
    "direct_copy_hazard",
]


class SyclBackend(SyclKernels, SyclLifetime, CommonBackend):
    """l0mem's backend protocol over SYCL devices, with dpctl doing the work.

    Synchronizing and closing, where an operation may have hung: :class:`SyclLifetime`.
    """

    name = "sycl"
    label = "SYCL"

    def __init__(
        self,
        devices: Sequence[str | Any] | None = None,
        *,
        context: Literal["default", "single"] = "default",
        profiling: bool = False,
        work_group_size: int | None = None,
    ) -> None:
        """Open an in-order queue per device (default: :func:`.sycl_info.default_devices`)."""
        self.gate = Gate()
        dpctl = load_dpctl()
        if context not in ("default", "single"):
            raise ValueError(f"context must be 'default' or 'single', got {context!r}")
        check_group_size_type(work_group_size)
        # dpctl reports a missing device or runtime as its own creation errors;
        # every l0mem caller knows them as SyclNoDeviceError.
        creation_errors = (
            dpctl.SyclDeviceCreationError,
            dpctl.SyclContextCreationError,
            dpctl.SyclQueueCreationError,
        )
        self._closed = False
        self._hung: set[int] = set()  # devices whose queue holds an operation that hung
        self._start_kernels()
        try:
            chosen = default_devices() if devices is None else devices
            self._devices = [resolve_device(d) for d in chosen]
            if not self._devices:
                raise ValueError("the backend needs at least one device")
            self._contexts, self._queues = open_queues(self._devices, context, profiling)
        except creation_errors as err:
            raise SyclNoDeviceError(f"no usable SYCL device: {err}") from None
        self.context_mode = context
        self.profiling = profiling
        self._pending = [KeepAlive() for _ in self._devices]
        self._complete = dpctl.event_status_type.complete
        self._buffers: weakref.WeakSet[SyclBuffer] = weakref.WeakSet()
        self._host: weakref.WeakSet[UsmHost] = weakref.WeakSet()
        # A CPU device runs every copy on all its cores, at a cost per copy that
        # small chunks pay too often (benchmarks/bench_staging.py: 16 MiB chunks
        # stage 1.5x faster there than 4 MiB); GPUs keep the default shape.
        cpu = all(bool(d.is_cpu) for d in self._devices)
        self._stager = Stager(self, chunk=CPU_CHUNK_BYTES) if cpu else Stager(self)
        if work_group_size is not None:
            self.set_work_group_size(work_group_size)

    # -- introspection -----------------------------------------------------

    def device_name(self, index: int) -> str:
        """Return a human-readable name of device ``index``."""
        return device_name(self._devices[self._index(index)])

    def device_of(self, index: int) -> Any:
        """Return the ``dpctl.SyclDevice`` of device ``index``."""
        return self._devices[self._index(index)]

    def context_of(self, index: int) -> Any:
        """Return the ``dpctl.SyclContext`` holding device ``index``."""
        return self._contexts[self._index(index)]

    def queue_of(self, index: int) -> Any:
        """Return the in-order ``dpctl.SyclQueue`` of device ``index``."""
        return self._queues[self._index(index)]

    @property
    def simulated(self) -> bool:
        """Return True when a device is l0mem's simulated driver (by the name the driver reports)."""
        return any(is_simulator_name(str(d.name)) for d in self._devices)

    @property
    def no_hardware(self) -> str | None:
        """Return why no GPU executes the work (Intel's GPU driver in a no-hardware mode), or None."""
        gpus = [d for d in self._devices if str(d.device_type.name) == "gpu"]
        if self.simulated or not gpus:
            return None
        return no_hardware_reason(os.environ)

    def memory(self, device: int) -> DeviceMemory:
        """Return device ``device``'s global memory and largest allocation (free bytes unknown)."""
        return device_memory(self._devices[self._index(device)])

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        """Return what ``ext_oneapi_can_access_peer`` reports for the pair (None if it cannot say)."""
        a, b = self._devices[self._index(src)], self._devices[self._index(dst)]
        return peer_access(src, dst, a, b)

    def copy_route(self, src: int, dst: int) -> tuple[RouteKind, str]:
        """Return "direct" within one context (unless known to hang), else "staged", and why."""
        if self._index(src) == self._index(dst):
            return "direct", "same device"
        if not self.same_context(src, dst):
            return "staged", "separate contexts"
        if direct_copy_hazard(self._devices[src], self._devices[dst]):
            return "staged", "CPU sub-devices: direct copies hang"
        return "direct", "one context"

    # -- bookkeeping -------------------------------------------------------

    def _buffer(self, buf: object, what: str) -> SyclBuffer:
        if not isinstance(buf, SyclBuffer):
            raise TypeError(f"{what}: expected a SyclBuffer, got {type(buf).__name__}")
        if buf.backend is not self:
            raise ValueError(f"{what}: the buffer belongs to another SYCL backend")
        buf.check_open()
        return buf

    def _keep(self, device: int, event: Any, refs: tuple[object, ...]) -> None:
        """Keep ``refs`` (memory, host buffers) until the dpctl ``event`` has completed."""
        complete = self._complete
        self._pending[device].add(lambda: event.execution_status == complete, refs)

    def _deps(self, device: int, wait_for: Sequence[Event]) -> list[Any]:
        """Return the dpctl events ``device``'s queue can wait on; host-wait the rest."""
        ctx = self._contexts[device]
        deps: list[Any] = []
        for ev in wait_for:
            if isinstance(ev, SyclEvent) and ev.context == ctx:
                deps.extend(ev.dpctl_events)
            elif callable(getattr(ev, "wait", None)):
                ev.wait()
            else:
                raise TypeError(f"cannot wait for {type(ev).__name__}")
        return deps

    def _event(self, device: int, events: Sequence[Any]) -> SyclEvent:
        return SyclEvent(
            events, self._contexts[device], self.profiling, lambda t: self._hung.add(device)
        )

    def _marker(self, device: int, wait_for: Sequence[Event]) -> SyclEvent:
        """Return an event that completes once ``wait_for`` has, without doing work."""
        ev = self._queues[device].submit_barrier(self._deps(device, wait_for))
        return self._event(device, [ev])

    # -- memory ------------------------------------------------------------

    @one_at_a_time
    def allocate(self, device: int, nbytes: int) -> SyclBuffer:
        """Return a new USM device allocation (``malloc_device``) of ``nbytes`` on ``device``."""
        i = self._index(device)
        check_allocation_size(nbytes)
        with naming_allocation(nbytes, i, self.device_name(i)):
            mem = usm_allocate("device", nbytes, self._queues[i])
        buf = SyclBuffer(self, i, mem)
        self._buffers.add(buf)
        return buf

    def make_resident(self, buf: DeviceBuffer, device: int) -> None:
        """Raise :class:`ResidencyUnsupported`: SYCL makes memory resident itself, when a kernel touches it."""
        self._buffer(buf, "make_resident")  # misuse is said as such first
        self._index(device)
        raise ResidencyUnsupported(
            "SYCL has no call that makes memory resident on another device: "
            "open the Level Zero backend (open_backend('l0')) for that step"
        )

    @one_at_a_time
    def allocate_host(self, device: int, nbytes: int) -> HostMemory:
        """Return ``nbytes`` of host USM (``malloc_host``) in ``device``'s context."""
        i = self._index(device)
        check_allocation_size(nbytes)
        with naming_allocation(nbytes, i, self.device_name(i), "host"):
            usm = UsmHost(usm_allocate("host", nbytes, self._queues[i]))
        self._host.add(usm)
        return HostMemory(self, i, usm, usm.address, nbytes)

    def upload(
        self, dst: DeviceBuffer, data: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> SyclEvent:
        """Copy host ``data`` into the start of ``dst``; return its event."""
        return self._host_copy(dst, data, False, wait_for)

    def download(
        self, src: DeviceBuffer, out: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> SyclEvent:
        """Copy the start of ``src`` into the writable host buffer ``out``; return its event."""
        return self._host_copy(src, out, True, wait_for)

    @one_at_a_time
    def _host_copy(
        self,
        buf: DeviceBuffer,
        data: HostBuffer | HostMemory,
        to_host: bool,
        wait_for: Sequence[Event],
    ) -> SyclEvent:
        """Copy all of host ``data`` into the start of ``buf``, or (``to_host``) the other way."""
        kind, way = ("download", "from") if to_host else ("upload", "into")
        b = self._buffer(buf, "download source" if to_host else "upload destination")
        if isinstance(data, HostMemory):
            data.check_owner(self)
            # The view carries the USM pointer, which the runtime knows as host USM.
            data = data.memoryview()
        host = host_view(
            data, writable=to_host, what=f"{kind} {'destination' if to_host else 'source'}"
        )
        if host.nbytes > b.nbytes:
            raise ValueError(f"{kind} of {host.nbytes} bytes {way} a buffer of {b.nbytes} bytes")
        if host.nbytes == 0:
            return self._marker(b.device, wait_for)
        mem = b.memory()
        dst, src = (host, mem) if to_host else (mem, host)
        deps = self._deps(b.device, wait_for)
        ev = self._queues[b.device].memcpy_async(dst, src, host.nbytes, deps)
        self._keep(b.device, ev, (mem, host))
        return self._event(b.device, [ev])

    def same_context(self, a: int, b: int) -> bool:
        """Return whether devices ``a`` and ``b`` share a context (so direct copies are possible)."""
        return bool(self._contexts[self._index(a)] == self._contexts[self._index(b)])

    @one_at_a_time
    def copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int | None = None,
        *,
        queue_device: int | None = None,
        wait_for: Sequence[Event] = (),
        staged: bool | None = None,
    ) -> SyclEvent:
        """Copy ``nbytes`` (default: all of ``src``) device to device; return its event.

        ``staged=None`` copies directly on the queue of ``queue_device`` (default
        ``src.device``) when both buffers share its context and :meth:`copy_route`
        allows it, and through host memory otherwise; ``True`` forces the
        host-staged (legacy) path, ``False`` forbids it.
        """
        d = self._buffer(dst, "copy destination")
        s = self._buffer(src, "copy source")
        n = copy_size(nbytes, s, d)
        q = s.device if queue_device is None else self._index(queue_device)
        direct_ok = self.same_context(d.device, s.device) and self.same_context(q, s.device)
        if staged is None and direct_ok and d.device != s.device:
            direct_ok = self.copy_route(s.device, d.device)[0] == "direct"
        if staged is False and not direct_ok:
            raise ValueError(
                "direct copy needs both buffers and the queue in one context; use staged=True"
            )
        if n == 0:
            return self._marker(q, wait_for)
        if staged is None:
            staged = not direct_ok
        if not staged:
            dmem, smem = d.view(0, n).memory(), s.view(0, n).memory()
            ev = self._queues[q].memcpy_async(dmem, smem, n, self._deps(q, wait_for))
            self._keep(q, ev, (dmem, smem))
            return self._event(q, [ev])
        down, up = self.staged_copy(d, s, n, wait_for=wait_for)
        assert isinstance(down, SyclEvent) and isinstance(up, SyclEvent)
        return self._event(d.device, [*down.dpctl_events, *up.dpctl_events])

    @one_at_a_time
    def fill(
        self,
        dst: DeviceBuffer,
        pattern: bytes,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
    ) -> SyclEvent:
        """Fill ``nbytes`` (default: all) of ``dst`` with the repeated ``pattern``; return its event."""
        d = self._buffer(dst, "fill destination")
        pattern = bytes(pattern)
        # The Level Zero rules, so that code tested here also runs there.
        n = fill_size(pattern, nbytes, d.nbytes)
        if n == 0:
            return self._marker(d.device, wait_for)
        if pattern.count(pattern[0]) == len(pattern):
            # One repeated byte: the runtime's own fill (zeCommandListAppendMemoryFill
            # on Level Zero). dpctl's memset blocks, so the waits happen first.
            for ev in wait_for:
                ev.wait()
            d.view(0, n).memory().memset(pattern[0])
            return self._marker(d.device, ())
        # dpctl's memset is blocking and byte-only: upload one seed block,
        # then double the filled prefix with in-queue copies.
        seed_len = min(n, max(len(pattern), _FILL_SEED_BYTES // len(pattern) * len(pattern)))
        seed = pattern * (seed_len // len(pattern))
        events = [self.upload(d, seed, wait_for=wait_for).dpctl_events[-1]]
        filled = seed_len
        queue = self._queues[d.device]
        while filled < n:
            step = min(filled, n - filled)
            dmem, smem = d.view(filled, step).memory(), d.view(0, step).memory()
            ev = queue.memcpy_async(dmem, smem, step)
            self._keep(d.device, ev, (dmem, smem))
            events.append(ev)
            filled += step
        return self._event(d.device, events)

    def __repr__(self) -> str:
        """Return the context mode and the device count (or that it is closed)."""
        state = "closed" if self._closed else f"{len(self._devices)} device(s)"
        return f"<SyclBackend context={self.context_mode} {state}>"
