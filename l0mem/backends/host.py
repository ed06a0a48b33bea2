"""Pinned host memory of a backend: what host-staged copies and the p2p link measurement use.

A driver copies between a device and memory it has pinned and mapped for the
device (Level Zero ``zeMemAllocHost``, SYCL host USM) at the speed of the host
link; a copy to or from pageable memory (a ``bytearray``) goes through the
driver's own staging or page pinning first. :class:`HostMemory` is such an
allocation, or a view into one, and :meth:`Backend.upload` and
:meth:`Backend.download` take it wherever they take a host buffer.

What it may import: the standard library only (the backends build on it).
"""

from __future__ import annotations

from typing import Protocol

from typing_extensions import Self


class PinnedAllocation(Protocol):
    """What a backend allocates pinned host memory as (``l0mem.core.HostAllocation`` is one)."""

    @property
    def closed(self) -> bool:
        """Return whether the memory has been freed."""
        ...

    def memoryview(self) -> memoryview:
        """Return a writable byte view that keeps the memory allocated while it lives."""
        ...

    def close(self) -> None:
        """Free the memory."""
        ...


class HostMemory:
    """Pinned host memory in the context of one backend device, or a view into it."""

    def __init__(
        self,
        owner: object,
        device: int,
        allocation: PinnedAllocation,
        address: int,
        nbytes: int,
        *,
        offset: int = 0,
        view_of: HostMemory | None = None,
    ) -> None:
        """Wrap ``allocation`` (at ``address``) of ``owner`` (a backend) in ``device``'s context."""
        self.owner = owner
        self._device = device
        self._allocation = allocation
        self._address = address
        self._nbytes = nbytes
        self._offset = offset
        self._is_view = view_of is not None

    @property
    def device(self) -> int:
        """Return the backend index of the device in whose context the memory was allocated."""
        return self._device

    @property
    def nbytes(self) -> int:
        """Return the size in bytes."""
        return self._nbytes

    @property
    def closed(self) -> bool:
        """Return whether the allocation behind this memory has been freed."""
        return self._allocation.closed

    def check_open(self) -> None:
        """Raise ValueError once the allocation has been freed."""
        if self.closed:
            raise ValueError("the pinned host memory is closed")

    @property
    def address(self) -> int:
        """Return the host (and device-visible) address of the first byte."""
        self.check_open()
        return self._address + self._offset

    def view(self, offset: int, nbytes: int) -> HostMemory:
        """Return ``nbytes`` of this memory from ``offset``, sharing the allocation (no copy)."""
        self.check_open()
        for name, value in (("offset", offset), ("nbytes", nbytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"view {name} must be an int >= 0, got {value!r}")
        if offset + nbytes > self._nbytes:
            raise ValueError(
                f"view of {nbytes} bytes at {offset} exceeds the {self._nbytes} bytes of memory"
            )
        return HostMemory(
            self.owner,
            self._device,
            self._allocation,
            self._address,
            nbytes,
            offset=self._offset + offset,
            view_of=self,
        )

    def memoryview(self) -> memoryview:
        """Return a writable byte view of this memory, which keeps it allocated while it lives."""
        self.check_open()
        return self._allocation.memoryview()[self._offset : self._offset + self._nbytes]

    def close(self) -> None:
        """Free the allocation (a no-op for views and once closed); views must be dropped first."""
        if not self._is_view and not self.closed:
            self._allocation.close()

    def __enter__(self) -> Self:
        """Return the memory for a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Free the memory on leaving the with block."""
        self.close()

    def __repr__(self) -> str:
        """Return the size, the device and whether it is closed."""
        state = "closed" if self.closed else f"0x{self._address + self._offset:x}"
        return f"<HostMemory {self._nbytes} bytes of device {self._device} at {state}>"


__all__ = ["HostMemory", "PinnedAllocation"]
