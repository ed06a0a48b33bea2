"""The small interface shared by the Level Zero and SYCL paths.

The audit and the all-reduce are written against these protocols only, so
they run over either backend. Level Zero implements them in
:mod:`l0mem.core.backend`, SYCL in :mod:`l0mem.sycl`.

Ordering model (pyopencl style): every enqueue goes to the in-order queue of
one device and returns an :class:`Event`; ``wait_for`` orders work across
devices. Work on one device's queue runs in submission order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from typing_extensions import Buffer

# Any object with the buffer protocol: bytes, bytearray, memoryview, NumPy arrays.
HostBuffer: TypeAlias = Buffer


@runtime_checkable
class Event(Protocol):
    """Completion of one enqueued operation."""

    def wait(self) -> None:
        """Block until the operation has finished."""
        ...

    def elapsed_ns(self) -> int | None:
        """Return device-measured duration in ns, or None when the backend cannot time it."""
        ...


@runtime_checkable
class DeviceBuffer(Protocol):
    """A device allocation (or a view into one) owned by a backend."""

    @property
    def nbytes(self) -> int:
        """Return the size in bytes."""
        ...

    @property
    def device(self) -> int:
        """Return the index of the owning device within its backend."""
        ...

    @property
    def address(self) -> int:
        """Return the device virtual address as an integer."""
        ...

    def view(self, offset: int, nbytes: int) -> DeviceBuffer:
        """Return a non-owning view of ``nbytes`` starting at ``offset``."""
        ...

    def close(self) -> None:
        """Free the allocation (a no-op for views and for already closed buffers)."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A set of devices that can allocate, copy, fill and run l0mem's kernels."""

    name: str  # "l0" or "sycl"

    def device_count(self) -> int:
        """Return how many devices this backend drives."""
        ...

    def device_name(self, index: int) -> str:
        """Return a human-readable name of device ``index``."""
        ...

    def allocate(self, device: int, nbytes: int) -> DeviceBuffer:
        """Return a new device allocation of ``nbytes`` on ``device``."""
        ...

    def upload(
        self, dst: DeviceBuffer, data: HostBuffer, *, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Copy host ``data`` into the start of ``dst``; return its event."""
        ...

    def download(
        self, src: DeviceBuffer, out: HostBuffer, *, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Copy the start of ``src`` into the writable host buffer ``out``; return its event."""
        ...

    def copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int | None = None,
        *,
        queue_device: int | None = None,
        wait_for: Sequence[Event] = (),
    ) -> Event:
        """Copy ``nbytes`` (default: all of ``src``) device to device on the queue of
        ``queue_device`` (default: ``src.device``); return its event."""
        ...

    def fill(
        self,
        dst: DeviceBuffer,
        pattern: bytes,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
    ) -> Event:
        """Fill ``nbytes`` (default: all) of ``dst`` with the repeated ``pattern``; return its event."""
        ...

    def launch(
        self,
        kernel: str,
        device: int,
        args: Sequence[DeviceBuffer | int],
        global_size: int,
        *,
        wait_for: Sequence[Event] = (),
    ) -> Event:
        """Run one of l0mem's kernels (by name) over ``global_size`` work-items; return its event."""
        ...

    def synchronize(self, device: int | None = None) -> None:
        """Wait until all work on ``device`` (default: every device) has finished."""
        ...

    def close(self) -> None:
        """Release every queue, context and allocation the backend still holds."""
        ...


MAX_FILL_PATTERN = 128


def check_fill(pattern: bytes, nbytes: int) -> None:
    """Raise ValueError unless ``pattern`` can fill ``nbytes`` on every backend.

    Level Zero takes patterns whose size is a power of two up to the device's
    limit (128 bytes on Intel GPUs) and sizes that are a multiple of it; both
    backends apply the same rule so that code written for one runs on the other.
    """
    size = len(pattern)
    if size == 0 or size & (size - 1) or size > MAX_FILL_PATTERN:
        raise ValueError(
            f"fill pattern size must be a power of two from 1 to {MAX_FILL_PATTERN}, got {size}"
        )
    if nbytes % size:
        raise ValueError(f"fill size {nbytes} is not a multiple of the {size}-byte pattern")
