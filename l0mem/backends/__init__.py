"""Backends: one interface over Level Zero (:mod:`l0mem.core`) and SYCL (:mod:`l0mem.sycl`).

What lives here: the :class:`Backend` protocol with its capability queries
(:mod:`.base`), the argument checks both backends apply (:mod:`.checks`), the
buffer base every buffer shares (:mod:`.buffers`), what both backend classes
share (:mod:`.common`), the Level Zero backend (:mod:`.levelzero`, buffers in
:mod:`.l0_buffers`, events in :mod:`.l0_events`, kernels in
:mod:`.l0_kernels`, synchronizing and closing in :mod:`.l0_lifetime`), the
SYCL backend (:mod:`.sycl`, buffers and events in :mod:`.sycl_buffers`,
kernels and work-group sizes in :mod:`.sycl_kernels`, synchronizing and
closing in :mod:`.sycl_lifetime`, device facts and the default device choice
in :mod:`.sycl_info`), l0mem's kernel catalog and launchers (:mod:`.kernels`),
pinned host memory (:mod:`.host`), host-staged copies through a pinned ring
(:mod:`.staging`), and the device inventory with
:func:`open_backend` (:mod:`.select`), which the CLI and library users share.

Threads: a backend may be called from several threads. Its operations run
one at a time (a lock per backend: Level Zero's command lists take one caller
at a time); ``close()`` from any thread waits for the operation under way and
for other threads' event waits, then refuses every new call with
:class:`BackendClosedError` (or ValueError naming the closed buffer). A
buffer's ``close()`` waits for the operation under way too. No handle is ever
destroyed under a call (``tests/contracts/test_threads.py``). Work that
hung: a ``close()`` waits for another thread's wait on it only up to the
watchdog's bound, then leaves the contexts to the process's end (a
:class:`l0mem.core.ReleaseWarning` says so).

What it may import: :mod:`l0mem._ze`, :mod:`l0mem.core`, :mod:`l0mem.sycl` and
the leaf modules (``units``, ``files``, ``bf16``, ``keepalive``). The measurement, audit and
CLI layers import from here, never the other way.
"""

from l0mem.backends.allocation import FailedAllocation, failed_allocation
from l0mem.backends.base import (
    HANG_BASE_S,
    Backend,
    BackendClosedError,
    CopyTimeout,
    DeviceBuffer,
    DeviceMemory,
    Event,
    HostBuffer,
    PeerAccess,
    ResidencyUnsupported,
    RouteKind,
    cleanup,
    copy_deadline,
    is_simulator_name,
)
from l0mem.backends.checks import check_fill, fill_size
from l0mem.backends.host import HostMemory
from l0mem.backends.l0_info import device_memory
from l0mem.backends.levelzero import L0Buffer, LevelZeroBackend
from l0mem.backends.select import (
    DeviceSelectionError,
    NoDeviceError,
    level_zero_devices,
    open_backend,
    resolve_kind,
    select_devices,
    sycl_devices,
)
from l0mem.backends.sycl import SyclBackend, SyclBuffer, SyclEvent

__all__ = [
    "HANG_BASE_S",
    "Backend",
    "BackendClosedError",
    "CopyTimeout",
    "DeviceBuffer",
    "DeviceMemory",
    "DeviceSelectionError",
    "Event",
    "FailedAllocation",
    "HostBuffer",
    "HostMemory",
    "L0Buffer",
    "LevelZeroBackend",
    "NoDeviceError",
    "PeerAccess",
    "ResidencyUnsupported",
    "RouteKind",
    "SyclBackend",
    "SyclBuffer",
    "SyclEvent",
    "check_fill",
    "cleanup",
    "copy_deadline",
    "device_memory",
    "failed_allocation",
    "fill_size",
    "is_simulator_name",
    "level_zero_devices",
    "open_backend",
    "resolve_kind",
    "select_devices",
    "sycl_devices",
]
