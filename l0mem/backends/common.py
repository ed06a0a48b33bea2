"""What both backends do the same way: device indices, open state, staged copies, with blocks.

A backend class derives from :class:`CommonBackend`, names itself in
messages by the class attribute ``label``, sets ``_devices``, ``_closed`` and
``_stager`` in its constructor, and defines ``_buffer`` (its check that a
buffer is its own and open) and ``close``.

What it may import: :mod:`.base` and :mod:`.staging`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import Self

from l0mem.backends.base import (
    HANG_BASE_S,
    BackendClosedError,
    DeviceBuffer,
    Event,
    copy_size,
    device_index,
)
from l0mem.backends.staging import Stager


class CommonBackend:
    """The part of :class:`l0mem.backends.Backend` both implementations share."""

    label: ClassVar[str]
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


__all__ = ["CommonBackend"]
