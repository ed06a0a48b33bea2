"""Unified shared memory allocations (device, host and shared) and host-buffer helpers."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from typing_extensions import Buffer

from l0mem._ze import CFunction, api
from l0mem._ze.enums import ze_external_memory_type_flag_t, ze_memory_type_t
from l0mem._ze.errors import UnsupportedFeatureError
from l0mem._ze.structs import (
    ze_external_memory_export_fd_t,
    ze_ipc_mem_handle_t,
    ze_memory_allocation_properties_t,
)
from l0mem.core import _raw
from l0mem.core._lifetime import Owned

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device

_MEMORY_TYPES: dict[int, str] = {
    ze_memory_type_t.ZE_MEMORY_TYPE_UNKNOWN: "unknown",
    ze_memory_type_t.ZE_MEMORY_TYPE_HOST: "host",
    ze_memory_type_t.ZE_MEMORY_TYPE_DEVICE: "device",
    ze_memory_type_t.ZE_MEMORY_TYPE_SHARED: "shared",
}
EXTERNAL_MEMORY_DMA_BUF = ze_external_memory_type_flag_t.ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF
# One lock for every allocation's dma-buf query: they are rare, a lock per allocation is not.
_DMABUF_LOCK = threading.Lock()


@dataclass(frozen=True)
class AllocationProperties:
    """What the driver reports about an allocation (``ze_memory_allocation_properties_t``)."""

    type: str
    id: int
    page_size: int
    device_handle: int


class _Memory(Owned):
    """Memory at an address of a context, released by a C routine taking (context, address)."""

    def __init__(self, context: Context, ptr: int, nbytes: int, release: CFunction) -> None:
        """Take ownership of ``ptr``, calling ``release`` at once if that fails."""
        self._context = context
        self._address = ptr
        self._nbytes = nbytes
        self._own(context, release, (context.handle, ptr))

    @property
    def address(self) -> int:
        """Return the virtual address of the memory in this process."""
        return self._address

    @property
    def nbytes(self) -> int:
        """Return the size in bytes (requested, or given when opening a mapping: 0 if unknown)."""
        return self._nbytes


def _close_fd(fd: int) -> int:
    """Close ``fd`` as a release call (ZE_RESULT_SUCCESS; an OSError propagates)."""
    os.close(fd)
    return 0


class Allocation(_Memory):
    """Memory allocated in a context; freed by close(), the context, or garbage collection."""

    kind = "unknown"

    def __init__(self, context: Context, device: Device | None, ptr: int, nbytes: int) -> None:
        """Take ownership of ``ptr``, freeing it if that fails (use the Context.allocate_* methods)."""
        self._device = device
        self._dmabuf: int | None = None
        super().__init__(context, ptr, nbytes, api().zeMemFree)

    @property
    def device(self) -> Device | None:
        """Return the owning device, or None for host allocations."""
        return self._device

    @property
    def context(self) -> Context:
        """Return the context the allocation belongs to."""
        return self._context

    def properties(self) -> AllocationProperties:
        """Return the driver's view of the allocation (type, id, page size, device)."""
        self._check_open()
        props = ze_memory_allocation_properties_t()
        dev = ctypes.c_void_p()
        _raw.call(
            api().zeMemGetAllocProperties,
            self._context.handle,
            self._address,
            ctypes.byref(props),
            ctypes.byref(dev),
        )
        return AllocationProperties(
            type=_MEMORY_TYPES.get(int(props.type), f"type {int(props.type)}"),
            id=int(props.id),
            page_size=int(props.pageSize),
            device_handle=_raw.address(dev),
        )

    def address_range(self) -> tuple[int, int]:
        """Return (base address, size) of the driver allocation containing this one."""
        self._check_open()
        base = ctypes.c_void_p()
        size = ctypes.c_size_t()
        _raw.call(
            api().zeMemGetAddressRange,
            self._context.handle,
            self._address,
            ctypes.byref(base),
            ctypes.byref(size),
        )
        return _raw.address(base), int(size.value)

    def dmabuf_fd(self) -> int:
        """Return the dma-buf file descriptor of an allocation made with export_dmabuf=True.

        Ownership rule: the driver hands out a new descriptor per query, and
        the allocation takes it. Every call returns that same descriptor, and
        it is closed exactly once, just before the memory is freed (close(),
        the context closing, or garbage collection). Do not close it yourself;
        ``os.dup()`` it to keep a descriptor beyond the allocation's lifetime.

        Raises UnsupportedFeatureError, without asking the driver, when the
        allocation's device lists no dma-buf export type: Intel's driver without
        hardware then still answers success, with a descriptor (0) that is not a
        new dma-buf but one the process already had, which closing would lose.
        """
        with _DMABUF_LOCK:
            self._check_open()
            if self._dmabuf is not None:
                return self._dmabuf
            if self._device is not None and not self._device.supports_dmabuf_export:
                raise UnsupportedFeatureError(
                    detail=f"device {self._device.name!r} cannot export allocations as dma-buf "
                    "(zeDeviceGetExternalMemoryProperties); no descriptor was asked for",
                )
            out = ze_external_memory_export_fd_t(flags=EXTERNAL_MEMORY_DMA_BUF, fd=-1)
            props = ze_memory_allocation_properties_t()
            props.pNext = ctypes.cast(ctypes.pointer(out), ctypes.c_void_p)
            _raw.call(
                api().zeMemGetAllocProperties,
                self._context.handle,
                self._address,
                ctypes.byref(props),
                None,
            )
            fd = int(out.fd)
            if fd < 0:
                raise RuntimeError("the driver returned no dma-buf file descriptor")
            try:
                # A child of the allocation: released (closed) before zeMemFree.
                self.register_release(_close_fd, (fd,), "close(dma-buf fd)")
            except BaseException:
                os.close(fd)
                raise
            self._dmabuf = fd
            return fd

    def ipc_handle(self) -> bytes:
        """Return the opaque IPC handle other processes can open (64 bytes)."""
        self._check_open()
        h = ze_ipc_mem_handle_t()
        _raw.call(api().zeMemGetIpcHandle, self._context.handle, self._address, ctypes.byref(h))
        return ctypes.string_at(ctypes.addressof(h), ctypes.sizeof(h))

    def __repr__(self) -> str:
        """Return a short description for debugging."""
        state = "closed" if self.closed else f"0x{self._address:x}"
        return f"<{type(self).__name__} {self._nbytes} bytes at {state}>"


class DeviceAllocation(Allocation):
    """Memory on one device (``zeMemAllocDevice``)."""

    kind = "device"


class HostAllocation(Allocation):
    """Host memory visible to every device of the context (``zeMemAllocHost``)."""

    kind = "host"

    def memoryview(self) -> memoryview:
        """Return a writable byte view of the memory.

        The memory outlives every view: while this view, a slice of it or an
        object made from it (e.g. ``numpy.frombuffer``) is alive, close() and
        closing the context raise BufferError, and garbage collection leaves
        the memory allocated. Drop the views (``del`` or ``.release()``) first.
        """
        self._check_open()
        arr = (ctypes.c_char * self._nbytes).from_address(self._address)
        # Every view derived from this one keeps ``arr`` alive, and ``arr`` keeps
        # the allocation object alive; the tracker refuses to free while it lives.
        arr._l0mem_owner = self  # type: ignore[attr-defined]
        self._pin(arr)
        return memoryview(arr).cast("B")


class SharedAllocation(HostAllocation):
    """Memory migrating between host and one device (``zeMemAllocShared``)."""

    kind = "shared"


class IpcMapping(_Memory):
    """A peer process's allocation opened through its IPC handle.

    Its size is what the opener passed (0 when unknown); copies and fills
    from or to a mapping of unknown size need an explicit byte count.
    """

    def __init__(self, context: Context, device: Device, ptr: int, nbytes: int) -> None:
        """Take ownership of a mapping, closing it if that fails (use Context.open_ipc_handle)."""
        self._device = device
        super().__init__(context, ptr, nbytes, api().zeMemCloseIpcHandle)

    @property
    def device(self) -> Device:
        """Return the device the mapping was opened on."""
        return self._device


class HostStage:
    """A host buffer pinned as a ctypes array for the duration of a copy."""

    def __init__(self, data: Buffer, *, writable: bool) -> None:
        """Pin ``data``; ``writable`` requires a buffer the copy may write."""
        view = memoryview(data)
        if not view.c_contiguous:
            raise ValueError("host buffer must be C-contiguous")
        view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self.nbytes = view.nbytes
        if writable and view.readonly:
            raise ValueError("output host buffer is read-only")
        self._view = view
        self._array: Any
        if view.readonly:
            self._array = (ctypes.c_char * max(self.nbytes, 1)).from_buffer_copy(
                view.tobytes() or b"\0"
            )
        else:
            self._array = (ctypes.c_char * self.nbytes).from_buffer(view) if self.nbytes else None

    @property
    def address(self) -> int:
        """Return the address of the pinned bytes (0 for an empty buffer)."""
        return ctypes.addressof(self._array) if self._array is not None else 0

    def release(self) -> None:
        """Drop the pin so the source buffer may be resized again."""
        self._array = None
        # A view still exported elsewhere is simply dropped with this object.
        with contextlib.suppress(BufferError):
            self._view.release()


def release_stages(kept: list[Any]) -> None:
    """Release every :class:`HostStage` in ``kept`` (other objects need nothing) and empty it."""
    for item in kept:
        release = getattr(item, "release", None)
        if release is not None:
            release()
    kept.clear()
