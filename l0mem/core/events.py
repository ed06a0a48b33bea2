"""Event pools and events: completion, host signalling and kernel timestamps.

``Event.hold`` keeps the host buffers of the work that signals the event
until the event is observed signalled or reset. The backends keep objects
for pending work with :class:`l0mem.keepalive.KeepAlive`; core keeps a plain
list, because core may import only ``l0mem._ze`` and because here the event
itself is the one completion check and its pinned buffers must be unpinned,
not only dropped (the module docstring of ``l0mem.keepalive`` says more).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from l0mem._ze import api
from l0mem._ze.enums import ze_event_pool_flag_t, ze_event_scope_flag_t
from l0mem._ze.scalars import ze_device_handle_t
from l0mem._ze.structs import ze_event_desc_t, ze_event_pool_desc_t, ze_kernel_timestamp_result_t
from l0mem.core import _raw
from l0mem.core._lifetime import OwnedHandle
from l0mem.core.memory import release_stages

if TYPE_CHECKING:
    from l0mem.core.context import Context

_HOST = ze_event_scope_flag_t.ZE_EVENT_SCOPE_FLAG_HOST
_EVENT_DESC = ze_event_desc_t(signal=_HOST, wait=_HOST)


def timestamp_ticks(start: int, end: int, valid_bits: int) -> int | None:
    """Return the ticks from ``start`` to ``end`` of a ``valid_bits`` counter, None if implausible.

    Devices report ``kernelTimestampValidBits`` (often 32): only those low bits
    count, and the counter wraps at 2**valid_bits, so the difference is taken
    modulo that. 0 or more than 64 bits is read as 64. An end before its start
    that cannot be one wrap (a 64-bit counter does not wrap in practice, and a
    wrapped difference above half the counter's range is likelier a bad
    timestamp than an operation that long) gives None: "no device timing",
    never a 0 or an absurd duration.
    """
    bits = valid_bits if 0 < valid_bits < 64 else 64
    mask = (1 << bits) - 1
    start &= mask
    end &= mask
    if end >= start:
        return end - start
    if bits == 64:
        return None
    ticks = (end - start) & mask
    return ticks if ticks <= 1 << (bits - 1) else None


class EventPool(OwnedHandle):
    """A pool of ``count`` events in one context."""

    def __init__(
        self, context: Context, count: int, *, host_visible: bool = True, timestamps: bool = False
    ) -> None:
        """Create the pool (use Context.event_pool)."""
        if count < 1:
            raise ValueError(f"event pool size must be at least 1, got {count}")
        self._context = context
        self.count = count
        self.timestamps = timestamps
        flags = 0
        if host_visible:
            flags |= ze_event_pool_flag_t.ZE_EVENT_POOL_FLAG_HOST_VISIBLE
        if timestamps:
            flags |= ze_event_pool_flag_t.ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP
        desc = ze_event_pool_desc_t(flags=flags, count=count)
        devs = _raw.handle_array(ze_device_handle_t, [d.handle for d in context.devices])
        h = _raw.create(
            api().zeEventPoolCreate, context.handle, ctypes.byref(desc), len(devs), devs
        )
        self._own_handle(context, h, api().zeEventPoolDestroy)
        self._events: dict[int, Event] = {}
        self._lock = threading.Lock()

    @property
    def context(self) -> Context:
        """Return the context of the pool."""
        return self._context

    def event(self, index: int) -> Event:
        """Return the event at ``index`` (created on first use, then the same object)."""
        self._check_open()
        if not 0 <= index < self.count:
            raise IndexError(f"event index {index} out of range 0..{self.count - 1}")
        with self._lock:
            ev = self._events.get(index)
            if ev is None or ev.closed:
                ev = Event(self, index)
                self._events[index] = ev
            return ev


class Event(OwnedHandle):
    """One event of a pool: signalled by the device or the host, waited on by either."""

    def __init__(self, pool: EventPool, index: int) -> None:
        """Create event ``index`` of ``pool`` (use EventPool.event)."""
        self._pool = pool
        self.index = index
        desc = ze_event_desc_t.from_buffer_copy(_EVENT_DESC)  # a copy: cheaper than set-up
        desc.index = index
        h = _raw.create(api().zeEventCreate, pool.live_handle(), ctypes.byref(desc))
        self._own_handle(pool, h, api().zeEventDestroy)
        # Host buffers an asynchronous copy reads or writes stay referenced until the wait.
        self._keep: list[Any] = []

    @property
    def pool(self) -> EventPool:
        """Return the pool the event belongs to."""
        return self._pool

    def wait(self, timeout_ns: int | None = None) -> bool:
        """Block until signalled or ``timeout_ns`` passes; return whether it was signalled."""
        return self._signalled(
            _raw.ready(api().zeEventHostSynchronize, self.live_handle(), _raw.timeout(timeout_ns))
        )

    def query(self) -> bool:
        """Return True when the event is signalled (without blocking)."""
        return self._signalled(_raw.ready(api().zeEventQueryStatus, self.live_handle()))

    def hold(self, items: Iterable[Any]) -> None:
        """Keep ``items`` (host buffers the signalling work uses) alive until it is waited on."""
        self._keep.extend(items)

    def _signalled(self, done: bool) -> bool:
        """Drop the host buffers kept for the signalling work once it is done; return ``done``."""
        if done:
            release_stages(self._keep)
        return done

    def signal(self) -> None:
        """Signal the event from the host."""
        _raw.call(api().zeEventHostSignal, self.live_handle())

    def reset(self) -> None:
        """Return the event to the unsignalled state from the host."""
        _raw.call(api().zeEventHostReset, self.live_handle())
        release_stages(self._keep)

    def kernel_timestamp(self) -> tuple[int, int]:
        """Return (start, end) device ticks of the operation that signalled the event."""
        handle = self.live_handle()
        if not self._pool.timestamps:
            raise ValueError("event pool was created without timestamps=True")
        result = ze_kernel_timestamp_result_t()
        _raw.call(api().zeEventQueryKernelTimestamp, handle, ctypes.byref(result))
        data = getattr(result, "global")
        return int(data.kernelStart), int(data.kernelEnd)

    def duration_ns(self, device: Any = None) -> int | None:
        """Return the signalling operation's duration in ns, or None when its timestamps give none."""
        start, end = self.kernel_timestamp()
        dev = device or self._pool.context.devices[0]
        props = dev.properties
        ticks = timestamp_ticks(start, end, props.kernel_timestamp_valid_bits)
        if ticks is None:
            return None
        return ticks * max(1, props.timer_resolution_ns)

    def elapsed_ns(self) -> int | None:
        """Return the duration in ns when the pool records timestamps and they give one, else None."""
        return self.duration_ns() if self._pool.timestamps else None

    def __repr__(self) -> str:
        """Return a short description for debugging."""
        return f"<Event {self.index} of pool 0x{self._pool.handle:x}>"
