"""The Level Zero implementation of :class:`l0mem.backends.Backend`.

One in-order immediate command list per device carries every operation;
events come from recycled timestamp pools (:mod:`l0mem.backends.l0_events`),
so ``Event.elapsed_ns`` reports the device-measured duration. l0mem's kernels
are built per device from the shipped SPIR-V on first use (:mod:`.l0_kernels`).
``context="multi"`` puts all devices of a driver in one context (the layout
the SYCL runtime uses, and where peer residency applies); ``context="single"``
gives every device its own context, so a device-to-device copy between
contexts is staged through host memory.

Beyond the protocol, the backend offers what the audit's Level Zero set-ups
need: allocations with the dma-buf export descriptor, residency on a peer
device (``zeContextMakeMemoryResident``) and Sysman's view of device memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Literal

from l0mem.backends.allocation import naming_allocation
from l0mem.backends.base import (
    HANG_BASE_S,
    DeviceBuffer,
    DeviceMemory,
    Event,
    HostBuffer,
    PeerAccess,
    RouteKind,
    cleanup,
    is_simulator_name,
)
from l0mem.backends.checks import check_allocation_size, copy_size, fill_size
from l0mem.backends.common import CommonBackend, Gate, one_at_a_time
from l0mem.backends.host import HostMemory
from l0mem.backends.l0_buffers import L0Buffer
from l0mem.backends.l0_events import L0Event, Recycler, WaitGraph
from l0mem.backends.l0_info import (
    INTEL_VENDOR_ID,
    device_memory,
    open_contexts,
    peer_access,
    sysman_used,
)
from l0mem.backends.l0_kernels import L0Kernels
from l0mem.backends.l0_lifetime import L0Lifetime
from l0mem.backends.staging import Stager
from l0mem.core import Context, Device, ImmediateCommandList
from l0mem.core import Event as CoreEvent
from l0mem.driverenv import no_hardware_reason


class LevelZeroBackend(L0Kernels, L0Lifetime, CommonBackend):
    """l0mem's backend protocol over Level Zero devices (kernels: :class:`L0Kernels`).

    Synchronizing and closing, where an operation may have hung: :class:`L0Lifetime`.
    """

    name = "l0"
    label = "Level Zero"

    def __init__(
        self,
        devices: Sequence[Device],
        *,
        context: Literal["single", "multi"] = "multi",
    ) -> None:
        """Open contexts and one immediate command list per device (see :func:`open_backend`)."""
        if context not in ("single", "multi"):
            raise ValueError(f"context must be 'single' or 'multi', got {context!r}")
        self.gate = Gate()
        self._devices = list(devices)
        if not self._devices:
            raise ValueError("the backend needs at least one device")
        self.context_mode = context
        self._contexts: list[Context] = []
        self._ctx_of: list[Context] = []
        self._lists: list[ImmediateCommandList] = []
        self._recyclers: list[Recycler] = []
        self._start_kernels()
        self._closed = False
        self._hung: set[int] = set()  # devices whose queue holds an operation that hung
        self._hang_wait = HANG_BASE_S  # the bound of waits once one hung: the watchdog's
        self._graph = WaitGraph(len(self._devices))  # who is stuck behind a hung operation
        self._stuck: dict[int, int] = {}
        self._seq = 0
        self._stager = Stager(self)
        try:
            open_contexts(self._devices, context, self._contexts, self._ctx_of)
            self._recyclers = [Recycler(ctx) for ctx in self._contexts]
            self._lists = [
                self._ctx_of[i].immediate_command_list(d) for i, d in enumerate(self._devices)
            ]
        except BaseException as err:
            # The call that failed is the error: with a lost device, destroying
            # the contexts made so far fails too, and must not replace it.
            cleanup([self._release], strict=False, after=err)
            raise

    # -- capabilities ------------------------------------------------------

    @property
    def devices(self) -> list[Device]:
        """Return the core devices in backend index order."""
        return list(self._devices)

    @property
    def simulated(self) -> bool:
        """Return True when a device is l0mem's simulated driver (by the name the driver reports)."""
        return any(is_simulator_name(d.name) for d in self._devices)

    @property
    def no_hardware(self) -> str | None:
        """Return why no GPU executes the work (Intel's driver in a no-hardware mode), or None."""
        if self.simulated or not any(d.vendor_id == INTEL_VENDOR_ID for d in self._devices):
            return None
        return no_hardware_reason(os.environ)

    def context_of(self, device: int) -> Context:
        """Return the context holding device ``device``."""
        return self._ctx_of[self._index(device)]

    def device_name(self, index: int) -> str:
        """Return a human-readable name of device ``index``."""
        return self._devices[self._index(index)].name

    def memory(self, device: int) -> DeviceMemory:
        """Return device ``device``'s memory size, largest allocation and Sysman free bytes."""
        return device_memory(self._devices[self._index(device)])

    def sysman_used(self, device: int) -> int | None:
        """Return the device memory in use by Sysman's count, None without Sysman."""
        return sysman_used(self._devices[self._index(device)])

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        """Return ``zeDeviceCanAccessPeer`` and the P2P properties of the pair."""
        a, b = self._devices[self._index(src)], self._devices[self._index(dst)]
        return peer_access(src, dst, a, b)

    def same_context(self, a: int, b: int) -> bool:
        """Return whether devices ``a`` and ``b`` share a context."""
        return self._ctx_of[self._index(a)] is self._ctx_of[self._index(b)]

    def copy_route(self, src: int, dst: int) -> tuple[RouteKind, str]:
        """Return "direct" for one context with peer access, else "staged", and why."""
        if self._index(src) == self._index(dst):
            return "direct", "same device"
        if not self.same_context(src, dst):
            return "staged", "separate contexts"
        if not self._devices[src].can_access_peer(self._devices[dst]):
            return "staged", "no peer access"
        return "direct", "peer access in one context"

    def _recycler(self, device: int) -> Recycler:
        return self._recyclers[self._contexts.index(self._ctx_of[device])]

    def _event(self, device: int) -> L0Event:
        self._seq += 1
        return L0Event(
            self._recycler(device),
            self._devices[device],
            self._hang_on(device),
            index=device,
            seq=self._seq,
            on_submit=self._graph.queued,
            gate=self.gate,
        )

    def _hang_on(self, device: int) -> Callable[[float], None]:
        def hung(timeout: float) -> None:
            self._hung.add(device)
            self._hang_wait = min(self._hang_wait, timeout)

        return hung

    def _waits(self, device: int, wait_for: Sequence[Event], ev: L0Event) -> list[CoreEvent]:
        """Return the device-side waits of ``ev``'s command in ``device``'s context; host-wait the others."""
        ctx = self._ctx_of[device]
        waits = []
        for dep in wait_for:
            if isinstance(dep, L0Event) and dep.core.pool.context is ctx:
                waits.append(dep.core)
                if dep.index != device:
                    ev.after.append(dep)  # recorded once the command is queued
            else:
                dep.wait()
        return waits

    def _buffer(self, buf: DeviceBuffer, what: str = "buffer") -> L0Buffer:
        if not isinstance(buf, L0Buffer):
            raise TypeError(
                f"{what}: expected a buffer of the Level Zero backend, got {type(buf).__name__}"
            )
        if buf.backend is not self:
            raise ValueError(f"{what}: the buffer belongs to another Level Zero backend")
        self._check_open()
        return buf

    @one_at_a_time
    def allocate(self, device: int, nbytes: int, *, export_dmabuf: bool = False) -> L0Buffer:
        """Return a new device allocation of ``nbytes`` on ``device`` (``zeMemAllocDevice``).

        ``export_dmabuf`` chains the dma-buf export descriptor; the allocation
        (:attr:`L0Buffer.allocation`) then hands out its dma-buf descriptor.
        """
        i = self._index(device)
        check_allocation_size(nbytes)
        with naming_allocation(nbytes, i, self._devices[i].name):
            alloc = self._ctx_of[i].allocate_device(
                self._devices[i], nbytes, export_dmabuf=export_dmabuf
            )
        return L0Buffer(alloc, i, backend=self)

    @one_at_a_time
    def make_resident(self, buf: DeviceBuffer, device: int) -> None:
        """Make ``buf`` resident on ``device`` too (``zeContextMakeMemoryResident``)."""
        b = self._buffer(buf)
        i = self._index(device)
        if not self.same_context(i, b.device):
            raise ValueError(f"device {i} is not in the context of the buffer's device {b.device}")
        self._ctx_of[i].make_resident(self._devices[i], b.allocation)

    @one_at_a_time
    def allocate_host(self, device: int, nbytes: int) -> HostMemory:
        """Return ``nbytes`` of pinned host memory in ``device``'s context (``zeMemAllocHost``)."""
        i = self._index(device)
        check_allocation_size(nbytes)
        with naming_allocation(nbytes, i, self._devices[i].name, "host"):
            alloc = self._ctx_of[i].allocate_host(nbytes)
        return HostMemory(self, i, alloc, alloc.address, nbytes)

    def upload(
        self, dst: DeviceBuffer, data: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> L0Event:
        """Copy host ``data`` into the start of ``dst``; return its event."""
        return self._host_copy(dst, data, False, wait_for)

    def download(
        self, src: DeviceBuffer, out: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> L0Event:
        """Copy the start of ``src`` into the writable host buffer ``out``; return its event."""
        return self._host_copy(src, out, True, wait_for)

    @one_at_a_time
    def _host_copy(
        self,
        buf: DeviceBuffer,
        host: HostBuffer | HostMemory,
        to_host: bool,
        wait_for: Sequence[Event],
    ) -> L0Event:
        """Copy all of ``host`` into the start of ``buf``, or (``to_host``) the other way."""
        b = self._buffer(buf)
        if isinstance(host, HostMemory):
            host.check_owner(self)
            pinned: HostMemory | None = host
            n = host.nbytes
        else:
            pinned = None
            n = memoryview(host).nbytes
        if n > b.nbytes:
            raise ValueError(
                f"output of {n} bytes is larger than the buffer of {b.nbytes} bytes"
                if to_host
                else f"{n} bytes of data do not fit the buffer of {b.nbytes} bytes"
            )
        address = b.address  # a closed buffer refuses even an empty transfer
        ev = self._event(b.device)
        cl = self._lists[b.device]
        waits = self._waits(b.device, wait_for, ev)
        if n == 0:
            # Nothing to move, and an empty host buffer may have no address at all
            # (zeCommandListAppendMemoryCopy refuses a null pointer): order only.
            cl.barrier(wait_for=waits, signal=ev.core)
            return ev.submitted(waits)
        if pinned is not None:
            # Pinned memory is addressed directly: no host stage, the driver's fast path.
            ends = (pinned.address, address) if to_host else (address, pinned.address)
            cl.copy(*ends, n, wait_for=waits, signal=ev.core)
            return ev.submitted(waits)
        assert not isinstance(host, HostMemory)
        copy = cl.copy_to_host if to_host else cl.copy_from_host
        copy(address, host, wait_for=waits, signal=ev.core)
        return ev.submitted(waits)

    @one_at_a_time
    def copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int | None = None,
        *,
        queue_device: int | None = None,
        wait_for: Sequence[Event] = (),
    ) -> L0Event:
        """Copy ``nbytes`` (default: all of ``src``) device to device; return its event.

        The copy is direct when :meth:`copy_route` says so and the queue's device
        shares the buffers' context; otherwise it is staged through host memory.
        """
        d, s = self._buffer(dst, "copy destination"), self._buffer(src, "copy source")
        n = copy_size(nbytes, s, d)
        q = s.device if queue_device is None else self._index(queue_device)
        if n == 0:
            d.check_open()  # a closed buffer refuses even an empty copy
            s.check_open()
            ev = self._event(q)
            waits = self._waits(q, wait_for, ev)
            self._lists[q].barrier(wait_for=waits, signal=ev.core)
            return ev.submitted(waits)
        one_context = self._ctx_of[d.device] is self._ctx_of[s.device] is self._ctx_of[q]
        if one_context and (
            d.device == s.device or self.copy_route(s.device, d.device)[0] == "direct"
        ):
            ev = self._event(q)
            waits = self._waits(q, wait_for, ev)
            self._lists[q].copy(d.address, s.address, n, wait_for=waits, signal=ev.core)
            return ev.submitted(waits)
        # Separate contexts cannot address each other's memory, nor a device without
        # peer access its peer's: stage through the host (what copy_route reports).
        up = self.staged_copy(d, s, n, wait_for=wait_for)[1]
        assert isinstance(up, L0Event)
        return up

    @one_at_a_time
    def fill(
        self,
        dst: DeviceBuffer,
        pattern: bytes,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
    ) -> L0Event:
        """Fill ``nbytes`` (default: all) of ``dst`` with the repeated ``pattern``; return its event."""
        d = self._buffer(dst, "fill destination")
        n = fill_size(pattern, nbytes, d.nbytes)
        ev = self._event(d.device)
        waits = self._waits(d.device, wait_for, ev)
        self._lists[d.device].fill(d.address, pattern, n, wait_for=waits, signal=ev.core)
        return ev.submitted(waits)
