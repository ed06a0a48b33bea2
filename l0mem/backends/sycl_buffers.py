"""Buffers and events of the SYCL backend: USM allocations, views, and multi-part events.

What it may import: dpctl through :mod:`l0mem.sycl`; the backend itself only
for type checking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from l0mem.sycl import load_dpctl

if TYPE_CHECKING:
    from l0mem.backends.sycl import SyclBackend


class SyclEvent:
    """Completion of one operation, possibly made of several dpctl events (a staged copy)."""

    def __init__(self, events: Sequence[Any], context: Any, profiled: bool) -> None:
        self._events = tuple(events)
        self._context = context
        self._profiled = profiled

    @property
    def dpctl_events(self) -> tuple[Any, ...]:
        """Return the underlying ``dpctl.SyclEvent`` objects, last one last."""
        return self._events

    @property
    def context(self) -> Any:
        """Return the dpctl context of the queue that ran the last part of the operation."""
        return self._context

    def wait(self) -> None:
        """Block until the operation has finished."""
        for ev in self._events:
            ev.wait()

    def elapsed_ns(self) -> int | None:
        """Return the device-measured duration in ns (summed over parts), or None without profiling."""
        if not self._profiled:
            return None
        self.wait()
        total = 0
        try:
            for ev in self._events:
                total += int(ev.profiling_info_end) - int(ev.profiling_info_start)
        except Exception:
            # Barriers and some runtimes carry no profiling data.
            return None
        return total


class _Span:
    """USM array interface over part of an allocation that keeps the allocation alive.

    dpctl keeps the object it wraps, so work holding the wrapper keeps the
    memory even if the buffer is closed before the work has run.
    """

    def __init__(self, allocation: Any, address: int, nbytes: int, queue: Any) -> None:
        self.allocation = allocation
        self.__sycl_usm_array_interface__ = {
            "data": (address, False),
            "shape": (nbytes,),
            "strides": None,
            "typestr": "|u1",
            "version": 1,
            "syclobj": queue,
        }


class SyclBuffer:
    """A USM device allocation of a :class:`SyclBackend`, or a view into one."""

    def __init__(
        self,
        backend: SyclBackend,
        device: int,
        memory: Any,
        *,
        root: SyclBuffer | None = None,
        offset: int = 0,
        nbytes: int | None = None,
    ) -> None:
        self._backend = backend
        self._device = device
        self._memory = memory  # the owning dpctl MemoryUSMDevice; None for views
        self._root = root
        self._offset = offset
        if root is None:
            self._nbytes = int(memory.nbytes)
            self._base: int = int(memory._pointer)
        else:
            # A view must not hold the allocation: closing the root frees it.
            self._memory = None
            self._nbytes = root._nbytes if nbytes is None else nbytes
            self._base = root._base
        self._queue = backend.queue_of(device)
        self._closed = False

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
        """Return the byte offset of this view in its allocation (0 for an allocation)."""
        return self._offset

    @property
    def closed(self) -> bool:
        """Return whether the allocation behind this buffer has been freed."""
        root = self._root if self._root is not None else self
        return root._closed

    @property
    def address(self) -> int:
        """Return the device virtual address as an integer."""
        self.check_open()
        return self._base + self._offset

    @property
    def backend(self) -> SyclBackend:
        """Return the backend that allocated this buffer."""
        return self._backend

    @property
    def __sycl_usm_array_interface__(self) -> dict[str, Any]:
        """Return the USM array interface describing these bytes (so dpctl can wrap a view)."""
        return {
            "data": (self.address, False),
            "shape": (self._nbytes,),
            "strides": None,
            "typestr": "|u1",
            "version": 1,
            "syclobj": self._queue,
        }

    def check_open(self) -> None:
        """Raise ValueError when the allocation behind this buffer has been freed."""
        if self.closed:
            raise ValueError("the buffer is closed")

    def memory(self) -> Any:
        """Return a dpctl ``MemoryUSMDevice`` over exactly these bytes (non-owning for a view)."""
        self.check_open()
        if self._root is None and self._memory is not None:
            return self._memory
        root = self._root if self._root is not None else self
        span = _Span(root._memory, self.address, self._nbytes, self._queue)
        return load_dpctl().memory.MemoryUSMDevice(span)

    def view(self, offset: int, nbytes: int) -> SyclBuffer:
        """Return a non-owning view of ``nbytes`` starting at ``offset``."""
        self.check_open()
        if offset < 0 or nbytes < 0 or offset + nbytes > self._nbytes:
            raise ValueError(
                f"view [{offset}, {offset + nbytes}) is outside the buffer of {self._nbytes} bytes"
            )
        root = self._root if self._root is not None else self
        return SyclBuffer(
            self._backend,
            self._device,
            None,
            root=root,
            offset=self._offset + offset,
            nbytes=nbytes,
        )

    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers)."""
        if self._root is not None or self._closed:
            return
        self._closed = True
        # Work still in flight holds its own reference; dpctl frees on the last one.
        self._memory = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._nbytes} bytes"
        return f"<SyclBuffer device={self._device} offset={self._offset} {state}>"
