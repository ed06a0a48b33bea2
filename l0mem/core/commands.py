"""Command queues, command lists (regular and immediate) and fences.

Every append takes ``wait_for`` (events that must be signalled first) and
``signal`` (an event the operation signals when done). On an immediate list an
append without ``signal`` is synchronous: it returns once the work is done.
With ``signal`` it returns that event at once (pyopencl style). On a regular
list appends only record; the list runs when a :class:`CommandQueue` executes it.
Host buffers used by asynchronous work are kept referenced until the signalling
event is waited on (immediate lists) or the list is reset or destroyed.
As in Level Zero itself, one list must not be used from two threads at once.
Using a destroyed list, queue, fence, event or kernel raises ValueError before
any driver call.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Buffer

from l0mem.core import _raw
from l0mem.core._lifetime import OwnedHandle, ReleaseWarning
from l0mem.core.events import Event, EventPool
from l0mem.core.memory import Allocation, HostStage, IpcMapping, release_stages

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device
    from l0mem.core.module import Kernel

Pointer = Allocation | IpcMapping | int
_MODE_ASYNCHRONOUS = 2
UINT32_MAX = 2**32 - 1


def _address(p: Pointer) -> int:
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


def check_uint32(name: str, values: Sequence[int], minimum: int) -> list[int]:
    """Return ``values`` as a list after checking each is an int in [minimum, 2**32 - 1].

    The C routines take ``uint32_t``; ctypes would silently keep the low 32 bits.
    """
    out = list(values)
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= UINT32_MAX:
            raise ValueError(
                f"{name} must be ints from {minimum} to 2**32 - 1 (uint32), got {tuple(out)!r}"
            )
    return out


def _group_count(group_count: int | Sequence[int]) -> Any:
    given: list[Any] = (
        list(group_count) if isinstance(group_count, (tuple, list)) else [group_count]
    )
    if not 1 <= len(given) <= 3:
        raise ValueError(f"group_count must be 1 to 3 non-negative ints, got {group_count!r}")
    counts = check_uint32("group_count", given, 0)
    counts += [1] * (3 - len(counts))
    return _raw.struct(
        "ze_group_count_t", groupCountX=counts[0], groupCountY=counts[1], groupCountZ=counts[2]
    )


class _Appender:
    """Appends shared by regular and immediate command lists."""

    def _live(self) -> int:
        """Return the list's handle; raise ValueError once it is destroyed."""
        raise NotImplementedError

    def _waits(self, wait_for: Sequence[Event]) -> tuple[int, Any]:
        if not wait_for:
            return 0, None
        arr = _raw.handles("ze_event_handle_t", len(wait_for))
        for i, ev in enumerate(wait_for):
            if ev.closed:
                raise ValueError("cannot wait for a closed event")
            arr[i] = ev.handle
        return len(wait_for), arr

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        """Return (event to return, handle to signal) for an append."""
        raise NotImplementedError

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        """Finish an append: wait for it (sync use) or hand back ``signal``."""
        raise NotImplementedError

    def _append(
        self,
        routine: str,
        *args: Any,
        wait_for: Sequence[Event],
        signal: Event | None,
        keep: Sequence[Any] = (),
    ) -> Event | None:
        """Append ``routine(list, *args, signal, waits)``; finish as :meth:`_done` does."""
        handle = self._live()
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        # Allocations become addresses only now, so a closed event is reported before them.
        raw = [_address(a) if isinstance(a, (Allocation, IpcMapping)) else a for a in args]
        _raw.call(routine, handle, *raw, h, nw, waits)
        return self._done(ev, h, keep)

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
            "zeCommandListAppendMemoryCopy", dst, src, n, wait_for=wait_for, signal=signal
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
            "zeCommandListAppendMemoryCopy",
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
            "zeCommandListAppendMemoryFill",
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
        groups = _group_count(group_count)
        return self._append(
            "zeCommandListAppendLaunchKernel",
            kernel._live(),
            ctypes.byref(groups),
            wait_for=wait_for,
            signal=signal,
        )

    def barrier(
        self, *, wait_for: Sequence[Event] = (), signal: Event | None = None
    ) -> Event | None:
        """Order everything appended so far before what follows."""
        return self._append("zeCommandListAppendBarrier", wait_for=wait_for, signal=signal)

    def signal_event(self, event: Event) -> None:
        """Append a signal of ``event`` (it fires when the list reaches this point)."""
        _raw.call("zeCommandListAppendSignalEvent", self._live(), event._live())

    def wait_events(self, events: Sequence[Event]) -> None:
        """Append a wait: later commands start only after ``events`` are signalled."""
        handle = self._live()
        nw, waits = self._waits(events)
        _raw.call("zeCommandListAppendWaitOnEvents", handle, nw, waits)

    def reset_event(self, event: Event) -> None:
        """Append a device-side reset of ``event``."""
        _raw.call("zeCommandListAppendEventReset", self._live(), event._live())


def _ordinal(device: Device, ordinal: int | None) -> int:
    """Return ``ordinal``, or the device's first queue group when it is None."""
    return device.queue_group_ordinals()[0] if ordinal is None else ordinal


class _ListBase(OwnedHandle, _Appender):
    """Lifetime shared by both kinds of command list."""

    def _register(self, context: Context, device: Device, ordinal: int, handle: int) -> None:
        """Keep the list's context, device and ordinal; hand ``handle`` to the context."""
        self._context = context
        self._device = device
        self.ordinal = ordinal
        self._own_handle(context._tracker, handle, "zeCommandListDestroy")

    @property
    def device(self) -> Device:
        """Return the device the list submits to."""
        return self._device

    @property
    def context(self) -> Context:
        """Return the context of the list."""
        return self._context


class CommandList(_ListBase):
    """A recorded list of commands, run by :meth:`CommandQueue.execute`."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create an empty list for ``device`` (use Context.command_list)."""
        ordinal = _ordinal(device, ordinal)
        desc = _raw.struct("ze_command_list_desc_t", commandQueueGroupOrdinal=ordinal)
        h = _raw.create("zeCommandListCreate", context.handle, device.handle, ctypes.byref(desc))
        self._keep: list[Any] = []
        self._register(context, device, ordinal, h)

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        return signal, signal._live() if signal is not None else None

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        self._keep.extend(keep)
        return signal

    def end(self) -> None:
        """Finish recording (``zeCommandListClose``) so the list can be executed."""
        _raw.call("zeCommandListClose", self._live())

    def reset(self) -> None:
        """Drop every recorded command so the list can be recorded again."""
        _raw.call("zeCommandListReset", self._live())
        release_stages(self._keep)

    def close(self) -> None:
        """Destroy the list (a no-op when already destroyed)."""
        self._close()
        release_stages(self._keep)


class ImmediateCommandList(_ListBase):
    """An in-order list whose appends are submitted at once."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create an immediate list on ``device`` (use Context.immediate_command_list)."""
        ordinal = _ordinal(device, ordinal)
        # Synchronous appends wait on this private event, which works on every API version.
        self._sync = EventPool(context, 1)
        try:
            desc = _raw.struct("ze_command_queue_desc_t", ordinal=ordinal, mode=_MODE_ASYNCHRONOUS)
            h = _raw.create(
                "zeCommandListCreateImmediate", context.handle, device.handle, ctypes.byref(desc)
            )
        except BaseException:
            try:
                self._sync.close()
            except Exception as err:
                # Keep the creation error; the pool's failure is only reported.
                warnings.warn(
                    f"l0mem: freeing the list's event pool failed while cleaning up: {err}",
                    ReleaseWarning,
                    stacklevel=2,
                )
            raise
        self._register(context, device, ordinal, h)

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        if signal is not None:
            return signal, signal._live()
        return None, self._sync.event(0)._live()

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        if signal is not None:
            signal._keep.extend(keep)
            return signal
        sync = self._sync.event(0)
        try:
            sync.wait()
            sync.reset()
        finally:
            release_stages(list(keep))
        return None

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until everything appended so far has finished; return False on timeout."""
        handle = self._live()
        sync = self._sync.event(0)
        _raw.call("zeCommandListAppendBarrier", handle, sync._live(), 0, None)
        done = sync.wait(timeout_ns)
        if done:
            sync.reset()
        return done

    def close(self) -> None:
        """Destroy the list (a no-op when already destroyed)."""
        try:
            self._close()
        finally:
            self._sync.close()


class CommandQueue(OwnedHandle):
    """A queue on one device that executes regular command lists."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create a queue on ``device`` (use Context.command_queue)."""
        ordinal = _ordinal(device, ordinal)
        desc = _raw.struct("ze_command_queue_desc_t", ordinal=ordinal, mode=_MODE_ASYNCHRONOUS)
        h = _raw.create("zeCommandQueueCreate", context.handle, device.handle, ctypes.byref(desc))
        self._context = context
        self._device = device
        self.ordinal = ordinal
        self._own_handle(context._tracker, h, "zeCommandQueueDestroy")

    @property
    def device(self) -> Device:
        """Return the device the queue submits to."""
        return self._device

    def fence(self) -> Fence:
        """Return a new fence of this queue."""
        self._check_open()
        return Fence(self)

    def execute(self, lists: Sequence[CommandList], fence: Fence | None = None) -> None:
        """Submit closed command lists; ``fence`` is signalled when they finish."""
        handle = self._live()
        if not lists:
            raise ValueError("execute needs at least one command list")
        arr = _raw.handles("ze_command_list_handle_t", len(lists))
        for i, cl in enumerate(lists):
            if cl.closed:
                raise ValueError("cannot execute a destroyed command list")
            arr[i] = cl.handle
        _raw.call(
            "zeCommandQueueExecuteCommandLists",
            handle,
            len(lists),
            arr,
            fence._live() if fence is not None else None,
        )

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until the queue is idle; return False on timeout."""
        return _raw.ready("zeCommandQueueSynchronize", self._live(), _raw.timeout(timeout_ns))


class Fence(OwnedHandle):
    """Host-visible completion of one queue submission."""

    def __init__(self, queue: CommandQueue) -> None:
        """Create an unsignalled fence of ``queue`` (use CommandQueue.fence)."""
        desc = _raw.struct("ze_fence_desc_t")
        h = _raw.create("zeFenceCreate", queue._live(), ctypes.byref(desc))
        self._queue = queue
        self._own_handle(queue._tracker, h, "zeFenceDestroy", parent=queue._key)

    def wait(self, timeout_ns: int | None = None) -> bool:
        """Block until the fence is signalled or the timeout passes; return whether it was."""
        return _raw.ready("zeFenceHostSynchronize", self._live(), _raw.timeout(timeout_ns))

    def query(self) -> bool:
        """Return True when the fence is signalled (without blocking)."""
        return _raw.ready("zeFenceQueryStatus", self._live())

    def reset(self) -> None:
        """Return the fence to the unsignalled state."""
        _raw.call("zeFenceReset", self._live())
