"""Contexts: the owner of allocations, lists, queues, events and modules."""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Self

from l0mem._ze import CFunction, api
from l0mem._ze.scalars import ze_device_handle_t
from l0mem._ze.structs import (
    ze_context_desc_t,
    ze_device_mem_alloc_desc_t,
    ze_external_memory_export_desc_t,
    ze_host_mem_alloc_desc_t,
    ze_ipc_mem_handle_t,
)
from l0mem.core import _raw
from l0mem.core._lifetime import Registration, ReleaseCall, Tracker
from l0mem.core.commands import CommandList, CommandQueue, ImmediateCommandList
from l0mem.core.events import EventPool
from l0mem.core.memory import (
    EXTERNAL_MEMORY_DMA_BUF,
    Allocation,
    DeviceAllocation,
    HostAllocation,
    IpcMapping,
    SharedAllocation,
)
from l0mem.core.module import Module

if TYPE_CHECKING:
    from l0mem.core.device import Device
    from l0mem.core.driver import Driver

AllocT = TypeVar("AllocT", bound=Allocation)
# Descriptors the driver only reads, set up once: building one per call cost more than the call.
_DEVICE_DESC = ctypes.byref(ze_device_mem_alloc_desc_t())
_HOST_DESC = ctypes.byref(ze_host_mem_alloc_desc_t())


class Context:
    """A Level Zero context over one or several devices of a driver."""

    def __init__(self, driver: Driver, devices: Sequence[Device]) -> None:
        """Create a context over ``devices`` (use Driver.create_context)."""
        devices = list(devices)
        if not devices:
            raise ValueError("a context needs at least one device")
        for d in devices:
            if d.driver is not driver:
                raise ValueError(f"{d!r} does not belong to {driver!r}")
        if len({d.handle for d in devices}) != len(devices):
            raise ValueError("a device appears twice in the context's device list")
        self._driver = driver
        self._devices = devices
        desc = ze_context_desc_t()
        if [d.handle for d in devices] == [d.handle for d in driver.devices()]:
            self._handle = _raw.create(api().zeContextCreate, driver.handle, ctypes.byref(desc))
        else:
            arr = _raw.handle_array(ze_device_handle_t, [d.handle for d in devices])
            self._handle = _raw.create(
                api().zeContextCreateEx, driver.handle, ctypes.byref(desc), len(devices), arr
            )
        self._tracker = Tracker()
        self._api = api()
        self._final = ReleaseCall.of(self._api.zeContextDestroy, self._handle)
        self._finalizer = weakref.finalize(self, self._tracker.release_all, self._final, False)
        # Handles of the devices (and sub-devices) known to belong, so that a check is one lookup.
        self._members = {d.handle for d in devices}

    @property
    def handle(self) -> int:
        """Return the raw ``ze_context_handle_t``."""
        return self._handle

    @property
    def driver(self) -> Driver:
        """Return the driver of the context."""
        return self._driver

    @property
    def devices(self) -> list[Device]:
        """Return the devices of the context."""
        return list(self._devices)

    @property
    def closed(self) -> bool:
        """Return True once the context has been destroyed."""
        return self._tracker.closed

    @property
    def live_handles(self) -> int:
        """Return how many handles created in the context are not released yet."""
        return len(self._tracker)

    def register_release(
        self, release: CFunction, args: tuple[Any, ...], what: str | None = None
    ) -> Registration:
        """Make the context own ``release(*args)``: it runs at the latest when the context closes.

        For the objects of :mod:`l0mem.core` created in the context; raises
        ValueError once the context is closed.
        """
        return Registration(self._tracker, self._tracker.add(release, args, what))

    def _member(self, device: Device) -> Device:
        if self._tracker.closed:
            raise ValueError("the context is closed")
        if device.handle in self._members:
            return device
        # A context over a device also serves that device's sub-devices (Level Zero spec).
        root: Device | None = device
        while root is not None and root not in self._devices:
            root = root.parent
        if root is None:
            raise ValueError(f"{device!r} is not a device of this context")
        self._members.add(device.handle)
        return device

    @staticmethod
    def _size(nbytes: int) -> int:
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"allocation size must be a positive int, got {nbytes!r}")
        if nbytes >= 1 << 64:  # ctypes would pass it modulo 2**64 as the size_t
            raise ValueError(f"allocation size {nbytes} is past what a size_t holds (2**64 - 1)")
        return nbytes

    def _allocate(
        self, cls: type[AllocT], device: Device | None, nbytes: int, routine: CFunction, *args: Any
    ) -> AllocT:
        """Return ``cls`` over ``routine(context, *args, &ptr)``, made as one call in the context."""
        ptr = ctypes.c_void_p()
        tracker = self._tracker
        tracker.enter()
        try:
            _raw.call(routine, self._handle, *args, ctypes.byref(ptr))
            return cls(self, device, ptr.value or 0, nbytes)
        finally:
            tracker.leave()

    def allocate_device(
        self, device: Device, nbytes: int, *, alignment: int = 0, export_dmabuf: bool = False
    ) -> DeviceAllocation:
        """Return ``nbytes`` of device memory on ``device`` (optionally dma-buf exportable)."""
        self._member(device)
        self._size(nbytes)
        desc: Any = _DEVICE_DESC
        if export_dmabuf:
            export = ze_external_memory_export_desc_t(flags=EXTERNAL_MEMORY_DMA_BUF)
            own = ze_device_mem_alloc_desc_t()
            own.pNext = ctypes.cast(ctypes.pointer(export), ctypes.c_void_p)
            desc = ctypes.byref(own)
        return self._allocate(
            DeviceAllocation,
            device,
            nbytes,
            self._api.zeMemAllocDevice,
            desc,
            nbytes,
            alignment,
            device.handle,
        )

    def allocate_host(self, nbytes: int, *, alignment: int = 0) -> HostAllocation:
        """Return ``nbytes`` of host memory visible to the context's devices."""
        if self.closed:
            raise ValueError("the context is closed")
        self._size(nbytes)
        return self._allocate(
            HostAllocation, None, nbytes, self._api.zeMemAllocHost, _HOST_DESC, nbytes, alignment
        )

    def allocate_shared(
        self, device: Device | None, nbytes: int, *, alignment: int = 0
    ) -> SharedAllocation:
        """Return ``nbytes`` of shared memory associated with ``device`` (None: any device)."""
        if device is not None:
            self._member(device)
        elif self.closed:
            raise ValueError("the context is closed")
        self._size(nbytes)
        return self._allocate(
            SharedAllocation,
            device,
            nbytes,
            self._api.zeMemAllocShared,
            _DEVICE_DESC,
            _HOST_DESC,
            nbytes,
            alignment,
            device.handle if device is not None else None,
        )

    def _range(self, alloc: Allocation, nbytes: int | None) -> tuple[int, int]:
        """Return (address, size) of the first ``nbytes`` of an open allocation of this context."""
        if alloc.context is not self:
            raise ValueError(f"{alloc!r} belongs to another context")
        if alloc.closed:
            raise ValueError(f"{type(alloc).__name__} is closed")
        n = alloc.nbytes if nbytes is None else nbytes
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= alloc.nbytes:
            raise ValueError(f"nbytes must be an int from 1 to {alloc.nbytes}, got {nbytes!r}")
        return alloc.address, n

    def make_resident(self, device: Device, alloc: Allocation, nbytes: int | None = None) -> None:
        """Make ``alloc`` (default: all of it) resident on ``device``."""
        self._member(device)
        address, n = self._range(alloc, nbytes)
        _raw.call(api().zeContextMakeMemoryResident, self._handle, device.handle, address, n)

    def evict(self, device: Device, alloc: Allocation, nbytes: int | None = None) -> None:
        """Allow ``alloc`` (default: all of it) to be evicted from ``device``."""
        self._member(device)
        address, n = self._range(alloc, nbytes)
        _raw.call(api().zeContextEvictMemory, self._handle, device.handle, address, n)

    def open_ipc_handle(self, device: Device, handle: bytes, nbytes: int = 0) -> IpcMapping:
        """Map another process's allocation from its IPC handle into this context.

        ``nbytes`` is the allocation's size as its owner reports it; 0 means
        unknown, and then every copy or fill through the mapping needs an
        explicit byte count.
        """
        self._member(device)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be an int >= 0 (0: unknown), got {nbytes!r}")
        h = ze_ipc_mem_handle_t()
        if len(handle) != ctypes.sizeof(h):
            raise ValueError(f"IPC handle must be {ctypes.sizeof(h)} bytes, got {len(handle)}")
        ctypes.memmove(ctypes.addressof(h), handle, len(handle))
        ptr = ctypes.c_void_p()
        no_flags = 0  # ze_ipc_memory_flags_t: no cache bias requested
        _raw.call(
            api().zeMemOpenIpcHandle, self._handle, device.handle, h, no_flags, ctypes.byref(ptr)
        )
        return IpcMapping(self, device, _raw.address(ptr), nbytes)

    def immediate_command_list(
        self, device: Device, *, ordinal: int | None = None
    ) -> ImmediateCommandList:
        """Return a new in-order immediate command list on ``device``."""
        return ImmediateCommandList(self, self._member(device), ordinal=ordinal)

    def command_list(self, device: Device, *, ordinal: int | None = None) -> CommandList:
        """Return a new regular command list for ``device``."""
        return CommandList(self, self._member(device), ordinal=ordinal)

    def command_queue(self, device: Device, *, ordinal: int | None = None) -> CommandQueue:
        """Return a new command queue on ``device``."""
        return CommandQueue(self, self._member(device), ordinal=ordinal)

    def event_pool(
        self, count: int, *, host_visible: bool = True, timestamps: bool = False
    ) -> EventPool:
        """Return a pool of ``count`` events usable on every device of the context."""
        if self.closed:
            raise ValueError("the context is closed")
        return EventPool(self, count, host_visible=host_visible, timestamps=timestamps)

    def create_module(self, device: Device, spirv: bytes, build_flags: str = "") -> Module:
        """Return ``spirv`` built for ``device``; a failed build raises ModuleBuildError."""
        return Module(self, self._member(device), spirv, build_flags)

    def close(self) -> None:
        """Free everything the context still owns, then destroy it (idempotent).

        Raises BufferError, freeing nothing, while a memoryview of one of its
        host allocations is alive.
        """
        self._tracker.check_unpinned()
        if self._finalizer.detach() is not None:
            self._tracker.release_all(self._final, True)

    def __enter__(self) -> Self:
        """Return self for use in a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on leaving the with block."""
        self.close()

    def __repr__(self) -> str:
        """Return a short description for debugging."""
        state = "closed" if self.closed else f"0x{self._handle:x}"
        return f"<Context {state} over {len(self._devices)} device(s)>"
