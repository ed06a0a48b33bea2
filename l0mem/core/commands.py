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

from l0mem._ze import api
from l0mem._ze.enums import ze_command_queue_mode_t
from l0mem._ze.scalars import ze_command_list_handle_t
from l0mem._ze.structs import ze_command_list_desc_t, ze_command_queue_desc_t, ze_fence_desc_t
from l0mem.core import _raw
from l0mem.core._lifetime import OwnedHandle, ReleaseWarning
from l0mem.core._raw import UINT32_MAX
from l0mem.core.appends import Appender
from l0mem.core.events import Event, EventPool
from l0mem.core.memory import release_stages

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device

# Re-exported: l0mem.backends.levelzero takes UINT32_MAX from here.
__all__ = [
    "UINT32_MAX",
    "CommandList",
    "CommandQueue",
    "Fence",
    "ImmediateCommandList",
]

_ASYNCHRONOUS = ze_command_queue_mode_t.ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS
_FOREVER = _raw.timeout(None)


def _ordinal(device: Device, ordinal: int | None) -> int:
    """Return ``ordinal``, or the device's first queue group when it is None."""
    return device.queue_group_ordinals()[0] if ordinal is None else ordinal


class _ListBase(OwnedHandle, Appender):
    """Lifetime shared by both kinds of command list."""

    def _register(self, context: Context, device: Device, ordinal: int, handle: int) -> None:
        """Keep the list's context, device and ordinal; hand ``handle`` to the context."""
        self._context = context
        self._device = device
        self.ordinal = ordinal
        self._own_handle(context, handle, api().zeCommandListDestroy)

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
        desc = ze_command_list_desc_t(commandQueueGroupOrdinal=ordinal)
        h = _raw.create(
            api().zeCommandListCreate, context.handle, device.handle, ctypes.byref(desc)
        )
        self._keep: list[Any] = []
        self._register(context, device, ordinal, h)

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        return signal, signal.live_handle() if signal is not None else None

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        self._keep.extend(keep)
        return signal

    def end(self) -> None:
        """Finish recording (``zeCommandListClose``) so the list can be executed."""
        _raw.call(api().zeCommandListClose, self.live_handle())

    def reset(self) -> None:
        """Drop every recorded command so the list can be recorded again."""
        _raw.call(api().zeCommandListReset, self.live_handle())
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
            desc = ze_command_queue_desc_t(ordinal=ordinal, mode=_ASYNCHRONOUS)
            h = _raw.create(
                api().zeCommandListCreateImmediate,
                context.handle,
                device.handle,
                ctypes.byref(desc),
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
        self._sync_event: Event | None = None

    def _signal(self, signal: Event | None) -> tuple[Event | None, int | None]:
        if signal is not None:
            return signal, signal.live_handle()
        if self._sync_event is None:
            # Made at the first synchronous append, then kept: it lives as long as the list.
            self._sync_event = self._sync.event(0)
        return None, self._sync_event.handle

    def _done(self, signal: Event | None, handle: int | None, keep: Sequence[Any]) -> Event | None:
        if signal is not None:
            signal.hold(keep)
            return signal
        try:
            functions = api()
            _raw.ready(functions.zeEventHostSynchronize, handle, _FOREVER)
            _raw.call(functions.zeEventHostReset, handle)
        finally:
            if keep:
                release_stages(list(keep))
        return None

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until everything appended so far has finished; return False on timeout."""
        handle = self.live_handle()
        sync = self._sync.event(0)
        _raw.call(api().zeCommandListAppendBarrier, handle, sync.live_handle(), 0, None)
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
        desc = ze_command_queue_desc_t(ordinal=ordinal, mode=_ASYNCHRONOUS)
        h = _raw.create(
            api().zeCommandQueueCreate, context.handle, device.handle, ctypes.byref(desc)
        )
        self._context = context
        self._device = device
        self.ordinal = ordinal
        self._own_handle(context, h, api().zeCommandQueueDestroy)

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
        handle = self.live_handle()
        if not lists:
            raise ValueError("execute needs at least one command list")
        if any(cl.closed for cl in lists):
            raise ValueError("cannot execute a destroyed command list")
        arr = _raw.handle_array(ze_command_list_handle_t, [cl.handle for cl in lists])
        _raw.call(
            api().zeCommandQueueExecuteCommandLists,
            handle,
            len(lists),
            arr,
            fence.live_handle() if fence is not None else None,
        )

    def synchronize(self, timeout_ns: int | None = None) -> bool:
        """Wait until the queue is idle; return False on timeout."""
        return _raw.ready(
            api().zeCommandQueueSynchronize, self.live_handle(), _raw.timeout(timeout_ns)
        )


class Fence(OwnedHandle):
    """Host-visible completion of one queue submission."""

    def __init__(self, queue: CommandQueue) -> None:
        """Create an unsignalled fence of ``queue`` (use CommandQueue.fence)."""
        desc = ze_fence_desc_t()
        h = _raw.create(api().zeFenceCreate, queue.live_handle(), ctypes.byref(desc))
        self._queue = queue
        self._own_handle(queue, h, api().zeFenceDestroy)

    def wait(self, timeout_ns: int | None = None) -> bool:
        """Block until the fence is signalled or the timeout passes; return whether it was."""
        return _raw.ready(
            api().zeFenceHostSynchronize, self.live_handle(), _raw.timeout(timeout_ns)
        )

    def query(self) -> bool:
        """Return True when the fence is signalled (without blocking)."""
        return _raw.ready(api().zeFenceQueryStatus, self.live_handle())

    def reset(self) -> None:
        """Return the fence to the unsignalled state."""
        _raw.call(api().zeFenceReset, self.live_handle())
