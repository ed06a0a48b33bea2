"""Command queues, command lists (regular and immediate) and fences.

Every append takes ``wait_for`` (events that must be signalled first) and
``signal`` (an event the operation signals when done). On an immediate list an
append without ``signal`` is synchronous: it returns once the work is done.
With ``signal`` it returns that event at once (pyopencl style). On a regular
list appends only record; the list runs when a :class:`CommandQueue` executes it.
Host buffers used by asynchronous work are kept referenced until the signalling
event is waited on (immediate lists) or the list is reset or destroyed.
As in Level Zero itself, one list must not be used from two threads at once.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Buffer, Self

from l0mem._ze import api, check
from l0mem._ze.enums import ZE_RESULT_NOT_READY
from l0mem.core import _raw
from l0mem.core._lifetime import finalize_child
from l0mem.core.events import WAIT_FOREVER, Event, EventPool
from l0mem.core.memory import Allocation, HostStage, IpcMapping

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device
    from l0mem.core.module import Kernel

Pointer = Allocation | IpcMapping | int
_MODE_ASYNCHRONOUS = 2


def _address(p: Pointer) -> int:
    if isinstance(p, int):
        return p
    if getattr(p, "closed", False):
        raise ValueError(f"{type(p).__name__} is closed")
    return p.address


def _size(p: Pointer) -> int | None:
    return None if isinstance(p, int) else p.nbytes


def _count(dst: Pointer, src: Pointer | None, nbytes: int | None) -> int:
    """Return the byte count of a transfer, checked against the known sizes."""
    sizes = [s for s in (_size(dst), _size(src) if src is not None else None) if s is not None]
    if nbytes is None:
        if not sizes:
            raise ValueError("nbytes is required when both ends are raw addresses")
        nbytes = min(sizes)
    if nbytes < 0:
        raise ValueError(f"nbytes must be non-negative, got {nbytes}")
    if any(nbytes > s for s in sizes):
        raise ValueError(f"{nbytes} bytes exceed the allocation size {min(sizes)}")
    return nbytes


def _group_count(group_count: int | Sequence[int]) -> Any:
    counts = [group_count] if isinstance(group_count, int) else list(group_count)
    if not 1 <= len(counts) <= 3 or any(c < 0 for c in counts):
        raise ValueError(f"group_count must be 1 to 3 non-negative ints, got {group_count!r}")
    counts += [1] * (3 - len(counts))
    return _raw.struct(
        "ze_group_count_t", groupCountX=counts[0], groupCountY=counts[1], groupCountZ=counts[2]
    )


class _Appender:
    """Appends shared by regular and immediate command lists."""

    _handle: int
    _context: Context
    _device: Device

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
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call(
            "zeCommandListAppendMemoryCopy",
            self._handle,
            _address(dst),
            _address(src),
            n,
            h,
            nw,
            waits,
        )
        return self._done(ev, h, ())

    def copy_from_host(
        self,
        dst: Pointer,
        data: Buffer,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Copy a host buffer (bytes, bytearray, memoryview, NumPy array) into ``dst``."""
        stage = HostStage(data, writable=False)
        n = _count(dst, None, stage.nbytes)
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call(
            "zeCommandListAppendMemoryCopy",
            self._handle,
            _address(dst),
            stage.address,
            n,
            h,
            nw,
            waits,
        )
        return self._done(ev, h, (stage,))

    def copy_to_host(
        self,
        src: Pointer,
        out: Buffer,
        *,
        wait_for: Sequence[Event] = (),
        signal: Event | None = None,
    ) -> Event | None:
        """Copy the start of ``src`` into the writable host buffer ``out`` (its full size)."""
        stage = HostStage(out, writable=True)
        n = _count(src, None, stage.nbytes)
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call(
            "zeCommandListAppendMemoryCopy",
            self._handle,
            stage.address,
            _address(src),
            n,
            h,
            nw,
            waits,
        )
        return self._done(ev, h, (stage,))

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
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call(
            "zeCommandListAppendMemoryFill",
            self._handle,
            _address(dst),
            buf,
            size,
            n,
            h,
            nw,
            waits,
        )
        return self._done(ev, h, (buf,))

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
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call(
            "zeCommandListAppendLaunchKernel",
            self._handle,
            kernel.handle,
            ctypes.byref(groups),
            h,
            nw,
            waits,
        )
        return self._done(ev, h, ())

    def barrier(
        self, *, wait_for: Sequence[Event] = (), signal: Event | None = None
    ) -> Event | None:
        """Order everything appended so far before what follows."""
        ev, h = self._signal(signal)
        nw, waits = self._waits(wait_for)
        _raw.call("zeCommandListAppendBarrier", self._handle, h, nw, waits)
        return self._done(ev, h, ())

    def signal_event(self, event: Event) -> None:
        """Append a signal of ``event`` (it fires when the list reaches this point)."""
        _raw.call("zeCommandListAppendSignalEvent", self._handle, event.handle)

    def wait_events(self, events: Sequence[Event]) -> None:
        """Append a wait: later commands start only after ``events`` are signalled."""
        nw, waits = self._waits(events)
        _raw.call("zeCommandListAppendWaitOnEvents", self._handle, nw, waits)

    def reset_event(self, event: Event) -> None:
        """Append a device-side reset of ``event``."""
        _raw.call("zeCommandListAppendEventReset", self._handle, event.handle)


class _ListBase(_Appender):
    """Lifetime shared by both kinds of command list."""

    def _register(self, context: Context, device: Device, handle: int) -> None:
        self._context = context
        self._device = device
        self._handle = handle
        self._tracker = context._tracker
        try:
            self._key = self._tracker.add(
                _raw.fn("zeCommandListDestroy"), (handle,), "zeCommandListDestroy"
            )
        except BaseException:
            _raw.call("zeCommandListDestroy", handle)
            raise
        self._close = finalize_child(self, self._tracker, self._key)

    @property
    def handle(self) -> int:
        """Return the raw ``ze_command_list_handle_t``."""
        return self._handle

    @property
    def device(self) -> Device:
        """Return the device the list submits to."""
        return self._device

    @property
    def context(self) -> Context:
        """Return the context of the list."""
        return self._context

    @property
    def closed(self) -> bool:
        """Return True once the list has been destroyed."""
        return not self._tracker.owns(self._key)

    def __enter__(self) -> Self:
        """Return self for use in a with block."""
        return self

    def close(self) -> None:
        """Destroy the list (a no-op when already destroyed)."""
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        """Close on leaving the with block."""
        self.close()


class CommandList(_ListBase):
    """A recorded list of commands, run by :meth:`CommandQueue.execute`."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create an empty list for ``device`` (use Context.command_list)."""
        if ordinal is None:
            ordinal = device.queue_group_ordinals()[0]
        desc = _raw.struct("ze_command_list_desc_t", commandQueueGroupOrdinal=ordinal)
        h = ctypes.c_void_p()
        _raw.call(
            "zeCommandListCreate",
            context.handle,
            device.handle,
            ctypes.byref(desc),
            ctypes.byref(h),
        )
        self._keep: list[Any] = []
        self.ordinal = ordinal
        self._register(context, device, _raw.address(h))

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        return signal, signal.handle if signal is not None else None

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        self._keep.extend(keep)
        return signal

    def end(self) -> None:
        """Finish recording (``zeCommandListClose``) so the list can be executed."""
        _raw.call("zeCommandListClose", self._handle)

    def reset(self) -> None:
        """Drop every recorded command so the list can be recorded again."""
        _raw.call("zeCommandListReset", self._handle)
        self._release_keep()

    def _release_keep(self) -> None:
        for item in self._keep:
            release = getattr(item, "release", None)
            if release is not None:
                release()
        self._keep.clear()

    def close(self) -> None:
        """Destroy the list (a no-op when already destroyed)."""
        self._close()
        self._release_keep()


class ImmediateCommandList(_ListBase):
    """An in-order list whose appends are submitted at once."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create an immediate list on ``device`` (use Context.immediate_command_list)."""
        if ordinal is None:
            ordinal = device.queue_group_ordinals()[0]
        # Synchronous appends wait on this private event, which works on every API version.
        self._sync = EventPool(context, 1)
        try:
            desc = _raw.struct("ze_command_queue_desc_t", ordinal=ordinal, mode=_MODE_ASYNCHRONOUS)
            h = ctypes.c_void_p()
            _raw.call(
                "zeCommandListCreateImmediate",
                context.handle,
                device.handle,
                ctypes.byref(desc),
                ctypes.byref(h),
            )
        except BaseException:
            self._sync.close()
            raise
        self.ordinal = ordinal
        self._register(context, device, _raw.address(h))

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        if signal is not None:
            return signal, signal.handle
        return None, self._sync.event(0).handle

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        if signal is not None:
            signal._keep.extend(keep)
            return signal
        sync = self._sync.event(0)
        try:
            sync.wait()
            sync.reset()
        finally:
            for item in keep:
                release = getattr(item, "release", None)
                if release is not None:
                    release()
        return None

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until everything appended so far has finished; return False on timeout."""
        sync = self._sync.event(0)
        _raw.call("zeCommandListAppendBarrier", self._handle, sync.handle, 0, None)
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


class CommandQueue:
    """A queue on one device that executes regular command lists."""

    def __init__(self, context: Context, device: Device, *, ordinal: int | None = None) -> None:
        """Create a queue on ``device`` (use Context.command_queue)."""
        if ordinal is None:
            ordinal = device.queue_group_ordinals()[0]
        desc = _raw.struct("ze_command_queue_desc_t", ordinal=ordinal, mode=_MODE_ASYNCHRONOUS)
        h = ctypes.c_void_p()
        _raw.call(
            "zeCommandQueueCreate",
            context.handle,
            device.handle,
            ctypes.byref(desc),
            ctypes.byref(h),
        )
        self._context = context
        self._device = device
        self.ordinal = ordinal
        self._handle = _raw.address(h)
        self._tracker = context._tracker
        try:
            self._key = self._tracker.add(
                _raw.fn("zeCommandQueueDestroy"), (self._handle,), "zeCommandQueueDestroy"
            )
        except BaseException:
            _raw.call("zeCommandQueueDestroy", self._handle)
            raise
        self._close = finalize_child(self, self._tracker, self._key)

    @property
    def handle(self) -> int:
        """Return the raw ``ze_command_queue_handle_t``."""
        return self._handle

    @property
    def device(self) -> Device:
        """Return the device the queue submits to."""
        return self._device

    @property
    def closed(self) -> bool:
        """Return True once the queue has been destroyed."""
        return not self._tracker.owns(self._key)

    def fence(self) -> Fence:
        """Return a new fence of this queue."""
        return Fence(self)

    def execute(self, lists: Sequence[CommandList], fence: Fence | None = None) -> None:
        """Submit closed command lists; ``fence`` is signalled when they finish."""
        if not lists:
            raise ValueError("execute needs at least one command list")
        arr = _raw.handles("ze_command_list_handle_t", len(lists))
        for i, cl in enumerate(lists):
            if cl.closed:
                raise ValueError("cannot execute a destroyed command list")
            arr[i] = cl.handle
        _raw.call(
            "zeCommandQueueExecuteCommandLists",
            self._handle,
            len(lists),
            arr,
            fence.handle if fence is not None else None,
        )

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until the queue is idle; return False on timeout."""
        timeout = WAIT_FOREVER if timeout_ns is None else max(0, int(timeout_ns))
        rc = api().zeCommandQueueSynchronize(self._handle, ctypes.c_uint64(timeout))
        if rc == ZE_RESULT_NOT_READY:
            return False
        check(rc, "zeCommandQueueSynchronize")
        return True

    def close(self) -> None:
        """Destroy the queue and its fences (a no-op when already destroyed)."""
        self._close()

    def __enter__(self) -> Self:
        """Return self for use in a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on leaving the with block."""
        self.close()


class Fence:
    """Host-visible completion of one queue submission."""

    def __init__(self, queue: CommandQueue) -> None:
        """Create an unsignalled fence of ``queue`` (use CommandQueue.fence)."""
        desc = _raw.struct("ze_fence_desc_t")
        h = ctypes.c_void_p()
        _raw.call("zeFenceCreate", queue.handle, ctypes.byref(desc), ctypes.byref(h))
        self._queue = queue
        self._handle = _raw.address(h)
        self._tracker = queue._tracker
        try:
            self._key = self._tracker.add(
                _raw.fn("zeFenceDestroy"), (self._handle,), "zeFenceDestroy", parent=queue._key
            )
        except BaseException:
            _raw.call("zeFenceDestroy", self._handle)
            raise
        self._close = finalize_child(self, self._tracker, self._key)

    @property
    def handle(self) -> int:
        """Return the raw ``ze_fence_handle_t``."""
        return self._handle

    @property
    def closed(self) -> bool:
        """Return True once the fence has been destroyed."""
        return not self._tracker.owns(self._key)

    def wait(self, timeout_ns: int | None = None) -> bool:
        """Block until the fence is signalled or the timeout passes; return whether it was."""
        timeout = WAIT_FOREVER if timeout_ns is None else max(0, int(timeout_ns))
        rc = api().zeFenceHostSynchronize(self._handle, ctypes.c_uint64(timeout))
        if rc == ZE_RESULT_NOT_READY:
            return False
        check(rc, "zeFenceHostSynchronize")
        return True

    def query(self) -> bool:
        """Return True when the fence is signalled (without blocking)."""
        rc = api().zeFenceQueryStatus(self._handle)
        if rc == ZE_RESULT_NOT_READY:
            return False
        check(rc, "zeFenceQueryStatus")
        return True

    def reset(self) -> None:
        """Return the fence to the unsignalled state."""
        _raw.call("zeFenceReset", self._handle)

    def close(self) -> None:
        """Destroy the fence (a no-op when already destroyed)."""
        self._close()

    def __enter__(self) -> Self:
        """Return self for use in a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on leaving the with block."""
        self.close()
