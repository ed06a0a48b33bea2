"""The interface every backend implements, its capability records, and shared rules.

The audit, the all-reduce and the benchmarks are written against
:class:`Backend` only, so they run over either implementation. Capability
queries (:meth:`Backend.memory`, :meth:`Backend.peer_access`,
:meth:`Backend.same_context`, :meth:`Backend.copy_route`,
:attr:`Backend.simulated`, :attr:`Backend.no_hardware`) answer what callers
used to find out by asking which backend they had.

The argument checks both backends apply alike (device indices, sizes, fill
patterns) are :mod:`.checks`'.

Ordering model (pyopencl style): every enqueue goes to the in-order queue of
one device and returns an :class:`Event`; ``wait_for`` orders work across
devices. Work on one device's queue runs in submission order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from typing_extensions import Buffer, Self

from l0mem.backends.buffers import BufferBase
from l0mem.backends.host import HostMemory

# Any object with the buffer protocol: bytes, bytearray, memoryview, NumPy arrays.
HostBuffer: TypeAlias = Buffer
RouteKind: TypeAlias = Literal["direct", "staged"]

# The watchdog: an operation moving n bytes that has not completed after
# HANG_BASE_S + n / SLOWEST_BYTES_PER_S seconds counts as hung. 50 MB/s is far
# below any PCIe link or host copy l0mem takes (a x1 gen1 link is 250 MB/s),
# so a loaded machine or a first-touch fault never passes for a hang; the base
# covers a driver's first-use work (page tables, a context's first submission).
HANG_BASE_S = 10.0
SLOWEST_BYTES_PER_S = 50e6


class CopyTimeout(TimeoutError):
    """An operation did not complete within its bound: a hang. ``str()`` is one line."""

    def __init__(self, message: str, device: int | None = None) -> None:
        super().__init__(message)
        self.device = device


def copy_deadline(nbytes: int, base: float = HANG_BASE_S) -> float:
    """Return the seconds an operation moving ``nbytes`` may take before it counts as hung."""
    return base + max(nbytes, 0) / SLOWEST_BYTES_PER_S


# The name every device of l0mem's simulated Level Zero driver reports
# (tests/simdriver). The device name is what the driver itself says; an
# environment variable such as ZE_ENABLE_ALT_DRIVERS may name a real driver too.
_SIMULATOR_NAME = re.compile(r"^l0mem simulated GPU\b")


def is_simulator_name(name: str) -> bool:
    """Return True when a driver-reported device name is one of l0mem's simulated GPUs."""
    return bool(_SIMULATOR_NAME.match(name.strip()))


class BackendClosedError(ValueError, RuntimeError):
    """A backend was used after :meth:`Backend.close`.

    A ValueError (as for a closed file), and also a RuntimeError for callers
    that caught the SYCL backend's earlier error as one.
    """


class ResidencyUnsupported(NotImplementedError):
    """The backend has no call that makes memory resident on another device (SYCL)."""


@dataclass(frozen=True)
class DeviceMemory:
    """What a backend knows about one device's memory (None where it cannot tell)."""

    total: int | None  # bytes of device memory
    max_alloc: int | None  # the largest single allocation
    free: int | None  # free bytes now (Sysman on Level Zero), None where unknown
    host_backed: bool  # allocations take host RAM (a CPU device, the simulator)


@dataclass(frozen=True)
class PeerAccess:
    """What the runtime reports about device ``src`` accessing memory of device ``dst``."""

    src: int
    dst: int
    access: bool | None
    atomics: bool | None
    bandwidth: int | None = None
    bandwidth_unit: str | None = None
    latency: int | None = None
    latency_unit: str | None = None


@runtime_checkable
class Event(Protocol):
    """Completion of one enqueued operation."""

    def wait(self, timeout: float | None = None) -> None:
        """Block until the operation has finished; raise CopyTimeout after ``timeout`` seconds."""
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

    # -- capabilities ------------------------------------------------------

    @property
    def simulated(self) -> bool:
        """Return True when a device is l0mem's simulated driver (numbers are not hardware's)."""
        ...

    @property
    def no_hardware(self) -> str | None:
        """Return why no GPU executes the work (NEO's no-hardware modes), or None."""
        ...

    @property
    def closed(self) -> bool:
        """Return True once :meth:`close` has run."""
        ...

    def device_count(self) -> int:
        """Return how many devices this backend drives."""
        ...

    def device_name(self, index: int) -> str:
        """Return a human-readable name of device ``index``."""
        ...

    def memory(self, device: int) -> DeviceMemory:
        """Return what is known about device ``device``'s memory."""
        ...

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        """Return whether device ``src`` can access (and do atomics on) ``dst``'s memory."""
        ...

    def same_context(self, a: int, b: int) -> bool:
        """Return whether devices ``a`` and ``b`` share a context (so memory is mutually addressable)."""
        ...

    def copy_route(self, src: int, dst: int) -> tuple[RouteKind, str]:
        """Return how :meth:`copy` moves bytes from ``src`` to ``dst`` ("direct" or "staged") and why."""
        ...

    # -- work --------------------------------------------------------------

    def allocate(self, device: int, nbytes: int) -> DeviceBuffer:
        """Return a new device allocation of ``nbytes`` on ``device``."""
        ...

    def allocate_host(self, device: int, nbytes: int) -> HostMemory:
        """Return ``nbytes`` of pinned host memory in ``device``'s context (freed at close)."""
        ...

    def make_resident(self, buf: DeviceBuffer, device: int) -> None:
        """Make ``buf`` resident on ``device`` too, the step that mirrors on affected stacks.

        Level Zero: ``zeContextMakeMemoryResident`` (``device`` in the buffer's
        context). SYCL has no such call: :class:`ResidencyUnsupported`.
        """
        ...

    def upload(
        self, dst: DeviceBuffer, data: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Copy host ``data`` into the start of ``dst``; return its event."""
        ...

    def download(
        self, src: DeviceBuffer, out: HostBuffer | HostMemory, *, wait_for: Sequence[Event] = ()
    ) -> Event:
        """Copy the start of ``src`` into the writable host buffer ``out``; return its event."""
        ...

    @property
    def staging_ring_bytes(self) -> int:
        """Return the pinned host bytes of one context's staging ring (made on first staged copy)."""
        ...

    def staged_copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int,
        *,
        wait_for: Sequence[Event] = (),
        watchdog: float = HANG_BASE_S,
    ) -> tuple[Event, Event]:
        """Copy ``nbytes`` through the backend's pinned host ring; return (download, upload) events.

        The copy is chunked and pipelined (:mod:`l0mem.backends.staging`); the
        download event completes once every byte reached the host, the upload
        event once every byte arrived. Between contexts the host waits inside
        the call, each wait bounded by :func:`copy_deadline` with base
        ``watchdog``: a hang raises :class:`CopyTimeout`.
        """
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
        """Finish outstanding work, then release every queue, context and allocation.

        Idempotent. Afterwards :attr:`closed` is True, events of the backend
        have completed (``wait`` returns), and every call that names a device
        or a buffer raises a ValueError: :class:`BackendClosedError`, or the
        error of the buffer that closed with the backend.
        """
        ...

    def __enter__(self) -> Self:
        """Return the backend for a with block."""
        ...

    def __exit__(self, *exc: object) -> None:
        """Close the backend on leaving the with block."""
        ...


def cleanup(
    steps: Iterable[Callable[[], object]], *, strict: bool, after: BaseException | None = None
) -> None:
    """Run every step; raise the first error if ``strict``, else (after a failure) swallow them.

    Teardown after a failure must not replace the original exception with a
    release error of its own (a lost device fails every later call). ``after``
    is that original exception: each error swallowed is added to it as a note
    (Python 3.11 and later), so a traceback still shows it.
    """
    first: Exception | None = None
    for step in steps:
        try:
            step()
        except Exception as err:
            first = first or err
            add_note = getattr(after, "add_note", None)
            if add_note is not None:
                add_note(f"cleaning up afterwards failed too: {type(err).__name__}: {err}")
    if strict and first is not None:
        raise first


__all__: list[str] = [
    "HANG_BASE_S",
    "Backend",
    "BackendClosedError",
    "BufferBase",
    "CopyTimeout",
    "DeviceBuffer",
    "DeviceMemory",
    "Event",
    "HostBuffer",
    "PeerAccess",
    "RouteKind",
    "cleanup",
    "copy_deadline",
    "is_simulator_name",
]
