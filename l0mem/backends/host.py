"""Pinned host memory of a backend: what host-staged copies and the p2p link measurement use.

A driver copies between a device and memory it has pinned and mapped for the
device (Level Zero ``zeMemAllocHost``, SYCL host USM) at the speed of the host
link; a copy to or from pageable memory (a ``bytearray``) goes through the
driver's own staging or page pinning first. :class:`HostMemory` is such an
allocation, or a view into one, and :meth:`Backend.upload` and
:meth:`Backend.download` take it wherever they take a host buffer.

What it may import: :mod:`.buffers` (the backends build on it).
"""

from __future__ import annotations

from typing import Protocol

from l0mem.backends.buffers import BufferBase


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


class HostMemory(BufferBase):
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
        is_view: bool = False,
    ) -> None:
        """Wrap ``allocation`` (starting at ``address``) of ``owner`` (a backend) in ``device``'s context."""
        super().__init__(device, offset, nbytes)
        self.owner = owner
        self._allocation = allocation
        self._base = address
        self._is_view = is_view

    @property
    def closed(self) -> bool:
        """Return whether the allocation behind this memory has been freed."""
        return self._allocation.closed

    def _start(self) -> int:
        return self._base

    def _view(self, offset: int, nbytes: int) -> HostMemory:
        return HostMemory(
            self.owner,
            self._device,
            self._allocation,
            self._base,
            nbytes,
            offset=offset,
            is_view=True,
        )

    def check_owner(self, backend: object) -> None:
        """Raise ValueError unless this memory was allocated by ``backend``."""
        if self.owner is not backend:
            raise ValueError("the pinned host memory belongs to another backend")

    def memoryview(self) -> memoryview:
        """Return a writable byte view of this memory, which keeps it allocated while it lives."""
        self.check_open()
        return self._allocation.memoryview()[self._offset : self._offset + self._nbytes]

    def close(self) -> None:
        """Free the allocation (a no-op for views and once closed); views must be dropped first."""
        if not self._is_view and not self.closed:
            self._allocation.close()


__all__ = ["HostMemory", "PinnedAllocation"]
