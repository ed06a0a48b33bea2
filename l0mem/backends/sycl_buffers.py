"""Buffers and events of the SYCL backend: USM allocations, views, multi-part events, host views.

What it may import: dpctl through :mod:`l0mem.sycl`, :mod:`.base`; the backend
itself only for type checking.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from l0mem.backends.base import BufferBase, CopyTimeout
from l0mem.sycl import load_dpctl

if TYPE_CHECKING:
    from l0mem.backends.sycl import SyclBackend


def host_view(data: object, *, writable: bool, what: str) -> memoryview:
    """Return ``data`` as a flat byte view; TypeError/ValueError unless it is a C-contiguous buffer."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"{what} must support the buffer protocol") from exc
    if not view.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    if writable and view.readonly:
        raise ValueError(f"{what} must be writable")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


class SyclEvent:
    """Completion of one operation, possibly made of several dpctl events (a staged copy)."""

    def __init__(
        self,
        events: Sequence[Any],
        context: Any,
        profiled: bool,
        on_hang: Callable[[float], None] | None = None,
    ) -> None:
        self._events = tuple(events)
        self._context = context
        self._profiled = profiled
        self._on_hang = on_hang

    @property
    def dpctl_events(self) -> tuple[Any, ...]:
        """Return the underlying ``dpctl.SyclEvent`` objects, last one last."""
        return self._events

    @property
    def context(self) -> Any:
        """Return the dpctl context of the queue that ran the last part of the operation."""
        return self._context

    def wait(self, timeout: float | None = None) -> None:
        """Block until the operation has finished; raise CopyTimeout after ``timeout`` seconds."""
        if timeout is None:
            for ev in self._events:
                ev.wait()
            return
        complete = load_dpctl().event_status_type.complete
        if all(ev.execution_status == complete for ev in self._events):
            for ev in self._events:
                ev.wait()  # complete: returns at once, and lets dpctl release the event's work
            return
        # dpctl has no timed wait, but its wait releases the GIL: a waiter thread
        # waits, this one waits for it with the bound. Polling instead would
        # oversleep every short operation (or spin on a core the runtime needs).
        finished = threading.Event()
        failure: list[BaseException] = []

        def waiter() -> None:
            try:
                for ev in self._events:
                    ev.wait()
            except BaseException as err:  # raised again in the waiting thread
                failure.append(err)
            finally:
                finished.set()

        # A daemon: a hung operation keeps its waiter blocked, not the process.
        threading.Thread(target=waiter, name="l0mem-sycl-wait", daemon=True).start()
        if not finished.wait(timeout):
            if self._on_hang is not None:
                self._on_hang(timeout)
            raise CopyTimeout(f"an operation did not complete within {timeout:.1f} s (a hang)")
        if failure:
            raise failure[0]

    def elapsed_ns(self) -> int | None:
        """Return the device-measured duration in ns (summed over parts), or None without profiling."""
        if not self._profiled:
            return None
        self.wait()
        total = 0
        try:
            for ev in self._events:
                start, end = int(ev.profiling_info_start), int(ev.profiling_info_end)
                if end < start:
                    # 64-bit ns counters do not wrap: a bad timestamp, no device timing.
                    return None
                total += end - start
        except Exception:
            # Barriers and some runtimes carry no profiling data.
            return None
        return total


def usm_allocate(kind: str, nbytes: int, queue: Any) -> Any:
    """Return a dpctl USM allocation (``device`` or ``host``) on ``queue``; MemoryError if refused.

    The error names the dpctl call; the backend names the size and the device
    (:func:`l0mem.backends.allocation.naming_allocation`).
    """
    memory = load_dpctl().memory
    make = memory.MemoryUSMDevice if kind == "device" else memory.MemoryUSMHost
    try:
        return make(nbytes, queue=queue)
    except memory.USMAllocationError as exc:
        raise MemoryError(f"{make.__name__}: {exc}") from exc


class UsmHost:
    """A host USM allocation (dpctl ``MemoryUSMHost``) as :class:`.host.HostMemory` holds it."""

    def __init__(self, memory: Any) -> None:
        """Own ``memory``; dpctl frees it once neither this nor work in flight refers to it."""
        self._memory: Any = memory
        self.address = int(memory.__sycl_usm_array_interface__["data"][0])

    @property
    def closed(self) -> bool:
        """Return whether :meth:`close` has run."""
        return self._memory is None

    def memoryview(self) -> memoryview:
        """Return a writable byte view that keeps the allocation alive while it lives."""
        if self._memory is None:
            raise ValueError("the host USM allocation is closed")
        return memoryview(self._memory).cast("B")

    def close(self) -> None:
        """Drop the allocation; views and work in flight keep it until they are done."""
        self._memory = None


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


class SyclBuffer(BufferBase):
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
        """Wrap the dpctl ``memory`` of ``device`` (or, with ``root``, ``nbytes`` of it at ``offset``)."""
        self._backend = backend
        self._root = root
        if root is None:
            super().__init__(device, offset, int(memory.nbytes))
            self._memory = memory  # the owning dpctl MemoryUSMDevice
            # The public USM array interface: dpctl's own pointer attribute is private.
            self._base: int = int(memory.__sycl_usm_array_interface__["data"][0])
        else:
            super().__init__(device, offset, root.nbytes if nbytes is None else nbytes)
            # A view must not hold the allocation: closing the root frees it.
            self._memory = None
            self._base = root._base
        self._queue = backend.queue_of(device)
        self._closed = False

    @property
    def closed(self) -> bool:
        """Return whether the allocation behind this buffer has been freed."""
        root = self._root if self._root is not None else self
        return root._closed

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

    def _start(self) -> int:
        return self._base

    def _view(self, offset: int, nbytes: int) -> SyclBuffer:
        root = self._root if self._root is not None else self
        return SyclBuffer(
            self._backend, self._device, None, root=root, offset=offset, nbytes=nbytes
        )

    def memory(self) -> Any:
        """Return a dpctl ``MemoryUSMDevice`` over exactly these bytes (non-owning for a view)."""
        self.check_open()
        if self._root is None and self._memory is not None:
            return self._memory
        root = self._root if self._root is not None else self
        span = _Span(root._memory, self.address, self._nbytes, self._queue)
        return load_dpctl().memory.MemoryUSMDevice(span)

    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers)."""
        if self._root is not None or self._closed:
            return
        self._closed = True
        # Work still in flight holds its own reference; dpctl frees on the last one.
        self._memory = None
