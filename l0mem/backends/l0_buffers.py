"""The buffer of the Level Zero backend: a device allocation, or a view into one.

What it may import: :mod:`l0mem.core`, :mod:`.base`; the backend itself only for type
checking.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from l0mem.backends.base import BufferBase
from l0mem.core import DeviceAllocation

if TYPE_CHECKING:
    from l0mem.backends.levelzero import LevelZeroBackend


class L0Buffer(BufferBase):
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
        super().__init__(device, offset, alloc.nbytes - offset if nbytes is None else nbytes)
        self.backend = backend
        self._alloc = alloc
        self._owner = offset == 0 and nbytes is None

    @property
    def allocation(self) -> DeviceAllocation:
        """Return the underlying :class:`l0mem.core.DeviceAllocation`."""
        return self._alloc

    @property
    def closed(self) -> bool:
        """Return whether the allocation behind this buffer has been freed."""
        return self._alloc.closed

    def _start(self) -> int:
        return self._alloc.address

    def _view(self, offset: int, nbytes: int) -> L0Buffer:
        return L0Buffer(self._alloc, self._device, offset, nbytes, backend=self.backend)

    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers).

        It waits for the backend's operation under way in another thread, which
        may be using it.
        """
        if not self._owner:
            return
        with contextlib.nullcontext() if self.backend is None else self.backend.gate.lock:
            self._alloc.close()
