"""Appending work to command lists: copies, fills, launches, barriers and event operations.

:class:`Appender` holds what regular and immediate lists share; each kind
decides how an append is signalled and finished (see :mod:`l0mem.core.commands`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from typing_extensions import Buffer

from l0mem._ze import CFunction, api
from l0mem._ze.scalars import ze_event_handle_t
from l0mem._ze.structs import ze_group_count_t
from l0mem.core import _raw
from l0mem.core._raw import UINT32_MAX
from l0mem.core.events import Event
from l0mem.core.memory import Allocation, HostStage, IpcMapping

if TYPE_CHECKING:
    from l0mem.core.module import Kernel

Pointer = Allocation | IpcMapping | int
_MEMORY = (Allocation, IpcMapping)


def _address(p: Pointer) -> int:
    """Return the address ``p`` stands for; raise ValueError for a closed allocation."""
    if isinstance(p, int):
        return p
    if p.closed:
        raise ValueError(f"{type(p).__name__} is closed")
    return p.address


def _size(p: Pointer) -> int | None:
    """Return the known size of ``p``: None for raw addresses and mappings opened without one."""
    if isinstance(p, int) or (isinstance(p, IpcMapping) and p.nbytes == 0):
        return None
    return p.nbytes


def _count(dst: Pointer, src: Pointer | None, nbytes: int | None) -> int:
    """Return the byte count of a transfer, checked against the known sizes."""
    if nbytes is None and isinstance(dst, Allocation):
        # The common case first: whole allocations, both sizes known.
        if src is None:
            return dst.nbytes
        if isinstance(src, Allocation):
            return min(dst.nbytes, src.nbytes)
    ends = [dst] if src is None else [dst, src]
    sizes = [s for s in map(_size, ends) if s is not None]
    if nbytes is None:
        if any(isinstance(p, IpcMapping) and p.nbytes == 0 for p in ends):
            raise ValueError(
                "nbytes is required: the IPC mapping's size is unknown "
                "(pass nbytes, or give it to Context.open_ipc_handle)"
            )
        if not sizes:
            raise ValueError("nbytes is required when both ends are raw addresses")
        nbytes = min(sizes)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
    if any(nbytes > s for s in sizes):
        raise ValueError(f"{nbytes} bytes exceed the allocation size {min(sizes)}")
    return nbytes


@lru_cache(maxsize=256)
def _groups_of(x: int) -> Any:
    """Return a reference to the C struct of ``x`` work-groups (shared: the driver only reads it)."""
    return ctypes.byref(ze_group_count_t(groupCountX=x, groupCountY=1, groupCountZ=1))


def _group_count(group_count: int | Sequence[int]) -> ze_group_count_t:
    """Return ``group_count`` (1 to 3 uint32 values, the rest 1) as the C struct."""
    given: list[Any] = (
        list(group_count) if isinstance(group_count, (tuple, list)) else [group_count]
    )
    if not 1 <= len(given) <= 3:
        raise ValueError(f"group_count must be 1 to 3 non-negative ints, got {group_count!r}")
    counts = _raw.check_uint32("group_count", given, 0)
    counts += [1] * (3 - len(counts))
    return ze_group_count_t(groupCountX=counts[0], groupCountY=counts[1], groupCountZ=counts[2])


class Appender:
    """Appends shared by regular and immediate command lists."""

    def live_handle(self) -> int:
        """Return the list's handle; raise ValueError once it is destroyed."""
        raise NotImplementedError

    def _enter(self) -> int:
        """Count an append as a call in the context; return the list's open handle."""
        raise NotImplementedError

    def _leave(self) -> None:
        """End the call :meth:`_enter` counted."""
        raise NotImplementedError

    def _waits(self, wait_for: Sequence[Event]) -> tuple[int, Any]:
        """Return (count, C array) of the events to wait for; raise ValueError for a closed one."""
        if not wait_for:
            return 0, None
        if any(ev.closed for ev in wait_for):
            raise ValueError("cannot wait for a closed event")
        return len(wait_for), _raw.handle_array(ze_event_handle_t, [ev.handle for ev in wait_for])

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        """Return (event to return, handle to signal) for an append."""
        raise NotImplementedError

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        """Finish an append: wait for it (sync use) or hand back ``signal``."""
        raise NotImplementedError

    def _append(
        self,
        routine: CFunction,
        *args: Any,
        wait_for: Sequence[Event],
        signal: Event | None,
        keep: Sequence[Any] = (),
    ) -> Event | None:
        """Append ``routine(list, *args, signal, waits)``; finish as :meth:`_done` does.

        Counted as one call in the context until it is finished: closing the
        context from another thread waits for it.
        """
        handle = self._enter()
        try:
            ev, h = self._signal(signal)
            nw, waits = self._waits(wait_for) if wait_for else (0, None)
            # Allocations become addresses only now, so a closed event is reported before them.
            raw = [_address(a) if isinstance(a, _MEMORY) else a for a in args]
            _raw.call(routine, handle, *raw, h, nw, waits)
            return self._done(ev, h, keep)
        finally:
            self._leave()

    def copy(
        self,
        dst: Pointer,
        src: Pointer,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Copy ``nbytes`` (default: the smaller size) from ``src`` to ``dst``."""
        n = _count(dst, src, nbytes)
        return self._append(
            api().zeCommandListAppendMemoryCopy, dst, src, n, wait_for=wait_for, signal=signal
        )

    def copy_from_host(
        self,
        dst: Pointer,
        data: Buffer,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Copy a host buffer (bytes, bytearray, memoryview, NumPy array) into ``dst``."""
        return self._host_copy(dst, data, False, wait_for, signal)

    def copy_to_host(
        self,
        src: Pointer,
        out: Buffer,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Copy the start of ``src`` into the writable host buffer ``out`` (its full size)."""
        return self._host_copy(src, out, True, wait_for, signal)

    def _host_copy(
        self,
        memory: Pointer,
        host: Buffer,
        to_host: bool,
        wait_for: Sequence[Event],
        signal: Event | None,
    ) -> Event | None:
        """Copy all of ``host`` into the start of ``memory``, or (``to_host``) the other way."""
        stage = HostStage(host, writable=to_host)
        n = _count(memory, None, stage.nbytes)
        ends = (stage.address, memory) if to_host else (memory, stage.address)
        return self._append(
            api().zeCommandListAppendMemoryCopy,
            *ends,
            n,
            wait_for=wait_for,
            signal=signal,
            keep=(stage,),
        )

    def fill(
        self,
        dst: Pointer,
        pattern: bytes,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Fill ``nbytes`` (default: all) of ``dst`` with the repeated ``pattern``."""
        size = len(pattern)
        if size == 0 or size & (size - 1):
            raise ValueError(f"fill pattern size must be a power of two, got {size}")
        n = _count(dst, None, nbytes)
        if n % size:
            raise ValueError(f"fill size {n} is not a multiple of the pattern size {size}")
        buf = ctypes.create_string_buffer(bytes(pattern), size)
        return self._append(
            api().zeCommandListAppendMemoryFill,
            dst,
            buf,
            size,
            n,
            wait_for=wait_for,
            signal=signal,
            keep=(buf,),
        )

    def launch(
        self,
        kernel: Kernel,
        group_count: int | Sequence[int],
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Launch ``kernel`` over ``group_count`` work-groups (its group size set beforehand)."""
        if type(group_count) is int and 0 <= group_count <= UINT32_MAX:
            groups = _groups_of(group_count)
        else:
            groups = ctypes.byref(_group_count(group_count))
        return self._append(
            api().zeCommandListAppendLaunchKernel,
            kernel.live_handle(),
            groups,
            wait_for=wait_for,
            signal=signal,
        )

    def barrier(
        self, *, wait_for: Sequence[Event] = (), signal: Event | None = None
    ) -> Event | None:
        """Order everything appended so far before what follows."""
        return self._append(api().zeCommandListAppendBarrier, wait_for=wait_for, signal=signal)

    def signal_event(self, event: Event) -> None:
        """Append a signal of ``event`` (it fires when the list reaches this point)."""
        _raw.call(api().zeCommandListAppendSignalEvent, self.live_handle(), event.live_handle())

    def wait_events(self, events: Sequence[Event]) -> None:
        """Append a wait: later commands start only after ``events`` are signalled."""
        handle = self.live_handle()
        nw, waits = self._waits(events)
        _raw.call(api().zeCommandListAppendWaitOnEvents, handle, nw, waits)

    def reset_event(self, event: Event) -> None:
        """Append a device-side reset of ``event``."""
        _raw.call(api().zeCommandListAppendEventReset, self.live_handle(), event.live_handle())
