"""Events of the Level Zero backend: recycled timestamp events, one recycler per context.

Event slots are recycled, so a slot is handed out again only when nothing
can still refer to it: its backend event is gone, it has completed, and no
command that waits on it is still pending. Each command's device-side waits
are kept (:class:`l0mem.keepalive.KeepAlive`, the SYCL backend's mechanism
too) until its own event is observed complete (``Event.wait``, a later
recycling pass, or ``synchronize``). The backend's :class:`WaitGraph` also
holds, until the waiting device is synchronized, the events other devices'
work waits for.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from l0mem._ze.errors import NotReadyError
from l0mem.backends.base import CopyTimeout
from l0mem.backends.common import Gate
from l0mem.core import Context, Device, EventPool
from l0mem.core import Event as CoreEvent
from l0mem.keepalive import KeepAlive

POOL_SIZE = 64


class L0Event:
    """A backend event: one recycled Level Zero event with kernel timestamps."""

    def __init__(
        self,
        recycler: Recycler,
        device: Device,
        on_hang: Callable[[float], None] | None = None,
        *,
        index: int,
        seq: int,
        on_submit: Callable[[L0Event], None] | None = None,
        gate: Gate | None = None,
    ) -> None:
        """Take an event from ``recycler`` for work on ``device``; it goes back when this is collected.

        ``on_hang(timeout)`` runs when a wait with a timeout finds the work hung;
        ``index`` is the device's index in its backend, ``seq`` the event's
        place in the order the backend made its events; ``on_submit(self)``
        runs once its command is queued, while :attr:`after` holds the other
        devices' events that command waits for; a wait is counted in ``gate``
        (the backend's close destroys no event while one is under way).
        """
        event = recycler.take()
        self._event = event
        self._recycler = recycler
        self._device = device
        self._on_hang = on_hang
        self.index = index
        self.seq = seq
        self.after: list[L0Event] = []
        self._on_submit = on_submit
        self._gate = gate
        weakref.finalize(self, recycler.give_back, event)

    @property
    def core(self) -> CoreEvent:
        """Return the underlying :class:`l0mem.core.Event`."""
        return self._event

    def submitted(self, waits: Sequence[CoreEvent]) -> L0Event:
        """Record that this event's command waits on ``waits`` until it completes; return self."""
        self._recycler.depend(self._event, waits)
        if self._on_submit is not None:
            self._on_submit(self)
        self.after = []
        return self

    def done(self) -> bool:
        """Return whether the operation has finished (or the backend closed), without waiting."""
        return self._event.closed or self._event.query()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the operation has finished; raise CopyTimeout after ``timeout`` seconds."""
        with self._counted() as live:
            if live:
                self._wait(timeout)

    def _counted(self) -> contextlib.AbstractContextManager[bool]:
        # False once the backend's close is past every wait: its events are finished or gone.
        return contextlib.nullcontext(True) if self._gate is None else self._gate.waiting()

    def _wait(self, timeout: float | None) -> None:
        if self._event.closed:
            return  # the backend's close finished it, or gave it up as hung
        ns = None if timeout is None else max(int(timeout * 1e9), 0)
        if self._event.wait(ns):
            self._recycler.completed(self._event)
        elif timeout is not None:
            if self._on_hang is not None:
                self._on_hang(timeout)
            raise CopyTimeout(f"an operation did not complete within {timeout:.1f} s (a hang)")

    def elapsed_ns(self) -> int | None:
        """Return the device-measured duration in ns once done; None when there is none to give.

        None after the backend closed, when the timestamps are implausible
        (``l0mem.core.events.timestamp_ticks``), and when the driver answers
        NOT_READY for the timestamp of an event the wait saw signalled (seen on
        a real driver): the timing routine then falls back to the host clock.
        """
        with self._counted() as live:
            if not live or self._event.closed:
                return None
            done = self._event.wait()
            try:
                return self._event.duration_ns(self._device)
            except NotReadyError:
                if not done:
                    raise
                return None


class Awaited(Protocol):
    """What :class:`WaitGraph` needs of an event: its device, its place in order, whether it finished."""

    index: int
    seq: int

    def done(self) -> bool:
        """Return whether it has completed."""
        ...


class WaitGraph:
    """Which devices are stuck behind a hung operation, from the waits between their queues.

    A device's queue runs in order: once a command waits (on the device) for an
    event that never completes, neither it nor anything queued after it runs.
    :meth:`note` records such a wait with the waiting command's sequence
    number, until :meth:`synced` says the device finished all it was given;
    :meth:`stuck` follows the records out from the devices holding a hung
    operation, so that nobody waits the watchdog's bound again for them.
    Sequence numbers follow the order commands are made, which is the order
    they are queued while one thread submits to the backend (as l0mem does).
    """

    KEEP = 64  # records per device before finished ones are dropped (they pin event slots)

    def __init__(self, devices: int) -> None:
        """Record the waits between ``devices`` queues."""
        self._waits: list[list[tuple[int, Awaited]]] = [[] for _ in range(devices)]

    def note(self, device: int, seq: int, event: Awaited) -> None:
        """Record that ``device``'s command ``seq`` waits for ``event`` of another device."""
        waits = self._waits[device]
        if len(waits) >= self.KEEP:
            waits[:] = [(s, e) for s, e in waits if not e.done()]
        waits.append((seq, event))

    def queued(self, event: L0Event) -> None:
        """Record the waits of ``event``'s command (:attr:`L0Event.after`), now that it is queued."""
        for dep in event.after:
            self.note(event.index, event.seq, dep)

    def synced(self, device: int) -> None:
        """Forget ``device``'s records: everything queued on it has finished."""
        self._waits[device] = []

    def stuck(self, hung: Iterable[int]) -> dict[int, int]:
        """Return, for every device stuck behind the ``hung`` ones, the device it waits for.

        A hung device's unfinished events never complete; a device stuck from
        command ``seq`` on has its events from ``seq`` on never complete.
        """
        doomed = dict.fromkeys(hung, -1)  # device -> events from this seq on never complete
        via: dict[int, int] = {}
        changed = True
        while changed:
            changed = False
            for i, waits in enumerate(self._waits):
                for seq, ev in waits:
                    if seq >= doomed.get(i, seq + 1) or ev.index not in doomed:
                        continue
                    if ev.seq >= doomed[ev.index] and not ev.done():
                        doomed[i], via[i], changed = seq, ev.index, True
        return via


class Recycler:
    """Events of one context, handed out unsignalled and taken back once signalled."""

    def __init__(self, context: Context) -> None:
        """Hand out events of ``context``, creating pools on demand."""
        self._context = context
        self._pools: list[EventPool] = []
        self._clean: list[CoreEvent] = []
        self._returned: list[CoreEvent] = []
        # The events each pending command waits on: those slots must not be reset
        # and reused until the command (the key) has completed.
        self._waits = KeepAlive()
        # Reentrant: a collection inside take() can run give_back() on the same thread.
        self._lock = threading.RLock()

    def take(self) -> CoreEvent:
        """Return an unsignalled event, reusing finished, unreferenced ones before growing."""
        with self._lock:
            if not self._clean:
                self.sweep()
                for ev in list(self._returned):
                    if ev.closed:
                        self._returned.remove(ev)
                    elif not self._waits.holds(ev) and ev.query():
                        self._returned.remove(ev)
                        self.completed(ev)
                        ev.reset()
                        self._clean.append(ev)
            if not self._clean:
                pool = self._context.event_pool(POOL_SIZE, timestamps=True)
                self._pools.append(pool)
                self._clean.extend(pool.event(i) for i in range(POOL_SIZE))
            return self._clean.pop()

    def depend(self, event: CoreEvent, waits: Sequence[CoreEvent]) -> None:
        """Record that the command signalling ``event`` waits on ``waits`` until it completes."""
        if not waits:
            return
        with self._lock:
            self._waits.add(lambda: event.closed or event.query(), waits, key=event)

    def completed(self, event: CoreEvent) -> None:
        """Forget the waits of the command signalling ``event``, observed complete."""
        with self._lock:
            self._waits.forget(event)

    def sweep(self) -> None:
        """Forget the waits of every recorded command that has completed."""
        with self._lock:
            self._waits.prune()

    def referenced(self, event: CoreEvent) -> bool:
        """Return True while a pending command waits on ``event``."""
        with self._lock:
            return self._waits.holds(event)

    def give_back(self, event: CoreEvent) -> None:
        """Accept an event whose backend wrapper is gone; it is reused once signalled."""
        with self._lock:
            if not event.closed:
                self._returned.append(event)
