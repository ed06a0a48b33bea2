"""What both backends do the same way: device indices, open state, staged copies, with blocks.

A backend class derives from :class:`CommonBackend`, names itself in
messages by the class attribute ``label``, sets ``gate``, ``_devices``,
``_closed`` and ``_stager`` in its constructor, marks each operation
:func:`one_at_a_time`, and defines ``_buffer`` (its check that a buffer is
its own and open) and ``close``.

Threads: a backend may be called from several threads. Its operations run one
at a time (Level Zero's command lists, and the backend's bookkeeping of
them, take one caller at a time), so ``close()`` from any thread waits for
the operation under way and then refuses new ones; a buffer's ``close()``
waits the same way. A thread waiting on an event holds no lock (another
thread may be about to queue what it waits for) but is counted, and
``close()`` destroys no event while such a wait is under way.

What it may import: :mod:`.base`, :mod:`.checks` and :mod:`.staging`.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from typing_extensions import Self

from l0mem.backends.base import HANG_BASE_S, BackendClosedError, DeviceBuffer, Event
from l0mem.backends.checks import copy_size, device_index
from l0mem.backends.staging import Stager


class Gate:
    """A backend's operations one at a time, and the event waits under way in other threads."""

    def __init__(self) -> None:
        """Start open, with no operation and no wait under way."""
        self.lock = threading.RLock()
        self._idle = threading.Condition(threading.Lock())
        self._waits = 0
        self._shut = False

    @contextlib.contextmanager
    def waiting(self) -> Iterator[bool]:
        """Count an event wait while it lasts (no lock held); yield False once the events are gone."""
        with self._idle:
            if self._shut:
                yield False
                return
            self._waits += 1
        try:
            yield True
        finally:
            with self._idle:
                self._waits -= 1
                if not self._waits:
                    self._idle.notify_all()

    def shut(self, timeout: float | None) -> bool:
        """Wait until no event wait is under way (at most ``timeout`` s), then admit none; return whether it could."""
        with self._idle:
            self._shut = self._idle.wait_for(lambda: not self._waits, timeout)
            return self._shut


_F = TypeVar("_F", bound=Callable[..., Any])


def one_at_a_time(method: _F) -> _F:
    """Mark a backend operation: it holds the backend's :class:`Gate` lock while it runs."""

    @functools.wraps(method)
    def call(self: CommonBackend, *args: Any, **kwargs: Any) -> Any:
        with self.gate.lock:
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


class CommonBackend:
    """The part of :class:`l0mem.backends.Backend` both implementations share."""

    label: ClassVar[str]
    gate: Gate
    _devices: list[Any]
    _closed: bool
    _stager: Stager

    if TYPE_CHECKING:  # what each backend defines

        def _buffer(self, buf: DeviceBuffer, what: str) -> DeviceBuffer: ...
        def close(self) -> None: ...

    @property
    def closed(self) -> bool:
        """Return True once :meth:`~l0mem.backends.Backend.close` has run."""
        return self._closed

    def device_count(self) -> int:
        """Return how many devices this backend drives."""
        return len(self._devices)

    def _check_open(self) -> None:
        if self._closed:
            raise BackendClosedError(f"the {self.label} backend is closed")

    def _index(self, device: int) -> int:
        self._check_open()
        return device_index(device, len(self._devices))

    @one_at_a_time
    def staged_copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int,
        *,
        wait_for: Sequence[Event] = (),
        watchdog: float = HANG_BASE_S,
    ) -> tuple[Event, Event]:
        """Copy ``nbytes`` through the backend's pinned host ring; return (download, upload) events."""
        d = self._buffer(dst, "copy destination")
        s = self._buffer(src, "copy source")
        return self._stager.copy(d, s, copy_size(nbytes, s, d), wait_for, watchdog)

    @property
    def staging_ring_bytes(self) -> int:
        """Return the pinned host bytes of one context's staging ring (made on first staged copy)."""
        return self._stager.ring_bytes

    def __enter__(self) -> Self:
        """Return the backend for a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the backend on leaving the with block."""
        self.close()


__all__ = ["CommonBackend", "Gate", "one_at_a_time"]
