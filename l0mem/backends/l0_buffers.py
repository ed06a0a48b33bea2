"""The buffer of the Level Zero backend: a device allocation, or a view into one.

What it may import: :mod:`l0mem.core`; the backend itself only for type checking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from l0mem.core import DeviceAllocation

if TYPE_CHECKING:
    from l0mem.backends.levelzero import LevelZeroBackend


class L0Buffer:
    """A device allocation (or a view into one) of a :class:`LevelZeroBackend`."""

    def __init__(
        self,
        alloc: DeviceAllocation,
        device: int,
        offset: int = 0,
        nbytes: int | None = None,
        *,
        backend: LevelZeroBackend | None = None,
    ) -> None:
        """Wrap ``alloc`` (or ``nbytes`` of it from ``offset``) as device ``device``'s buffer."""
        self.backend = backend
        self._alloc = alloc
        self._device = device
        self._offset = offset
        self._nbytes = alloc.nbytes - offset if nbytes is None else nbytes
        self._owner = offset == 0 and nbytes is None

    @property
    def nbytes(self) -> int:
        """Return the size in bytes."""
        return self._nbytes

    @property
    def device(self) -> int:
        """Return the index of the owning device within its backend."""
        return self._device

    @property
    def address(self) -> int:
        """Return the device virtual address as an integer."""
        if self._alloc.closed:
            raise ValueError("the buffer is closed")
        return self._alloc.address + self._offset

    @property
    def allocation(self) -> DeviceAllocation:
        """Return the underlying :class:`l0mem.core.DeviceAllocation`."""
        return self._alloc

    def view(self, offset: int, nbytes: int) -> L0Buffer:
        """Return a non-owning view of ``nbytes`` starting at ``offset``."""
        if self._alloc.closed:
            raise ValueError("the buffer is closed")
        if offset < 0 or nbytes < 0 or offset + nbytes > self._nbytes:
            raise ValueError(
                f"view [{offset}, {offset + nbytes}) is outside the buffer of {self._nbytes} bytes"
            )
        return L0Buffer(
            self._alloc, self._device, self._offset + offset, nbytes, backend=self.backend
        )

    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers)."""
        if self._owner:
            self._alloc.close()
