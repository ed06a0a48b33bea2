"""What every buffer of a backend shares, device memory and pinned host memory alike.

What it may import: the standard library only (:mod:`.host` and :mod:`.base` build on it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing_extensions import Self


class BufferBase(ABC):
    """What every backend's buffer shares: size, device, offset in its allocation, views, closing.

    A subclass says where its allocation starts (:meth:`_start`), whether it
    has been freed (:attr:`closed`), how to make a view (:meth:`_view`) and
    how to free it (:meth:`close`).
    """

    def __init__(self, device: int, offset: int, nbytes: int) -> None:
        """Describe ``nbytes`` at ``offset`` of an allocation on backend device ``device``."""
        self._device = device
        self._offset = offset
        self._nbytes = nbytes

    @property
    def nbytes(self) -> int:
        """Return the size in bytes."""
        return self._nbytes

    @property
    def device(self) -> int:
        """Return the index of the owning device within its backend."""
        return self._device

    @property
    def offset(self) -> int:
        """Return the byte offset of this buffer in its allocation (0 for an allocation)."""
        return self._offset

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Return whether the allocation behind this buffer has been freed."""

    @abstractmethod
    def _start(self) -> int:
        """Return the device address where the allocation starts."""

    @abstractmethod
    def _view(self, offset: int, nbytes: int) -> Self:
        """Return a non-owning buffer over ``nbytes`` at ``offset`` of the allocation."""

    @abstractmethod
    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers)."""

    def check_open(self) -> None:
        """Raise ValueError when the allocation behind this buffer has been freed."""
        if self.closed:
            raise ValueError("the buffer is closed")

    @property
    def address(self) -> int:
        """Return the device virtual address as an integer."""
        self.check_open()
        return self._start() + self._offset

    def view(self, offset: int, nbytes: int) -> Self:
        """Return a non-owning view of ``nbytes`` starting at ``offset``."""
        self.check_open()
        if offset < 0 or nbytes < 0 or offset + nbytes > self._nbytes:
            raise ValueError(
                f"view [{offset}, {offset + nbytes}) is outside the buffer of {self._nbytes} bytes"
            )
        return self._view(self._offset + offset, nbytes)

    def __enter__(self) -> Self:
        """Return the buffer for a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Free the allocation on leaving the with block."""
        self.close()

    def __repr__(self) -> str:
        """Return the class, device, offset and size (or that it is closed)."""
        state = "closed" if self.closed else f"{self._nbytes} bytes"
        return f"<{type(self).__name__} device={self._device} offset={self._offset} {state}>"


__all__ = ["BufferBase"]
