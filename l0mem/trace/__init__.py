"""Allocation tracing of a watched workload: which calls allocated and made memory resident.

A small C library, shipped here as source and built on first use, sits between
the Level Zero loader and the real driver of a workload that ``l0mem run
--trace`` starts, and records every allocation, free and residency call; this
package builds it, prepares the workload's environment and reads the records.

The tracer is loaded by the loader as *the driver* (``ZE_ENABLE_ALT_DRIVERS``)
and forwards to the real one (``L0MEM_TRACE_DRIVERS``): SYCL runtimes and
l0mem's own binding dlopen the loader and look its functions up with dlsym,
which an LD_PRELOAD shim cannot interpose, while every loader reaches a driver
through the tables it exports. ``no_peer_residency`` skips
``zeContextMakeMemoryResident`` on a device other than the allocation's owner
(a workaround: a peer that really needs the memory pays at first touch).

What it may import: the leaf modules (``units``, ``files``, ``keepalive``, ``bf16``,
``driverenv``) and nothing else of l0mem: the tracer must work without any GPU
runtime loaded into l0mem itself.
"""

from l0mem.trace.build import library
from l0mem.trace.errors import TraceBuildError, TraceError
from l0mem.trace.session import TracedDevice, TraceSession, TraceTotals

__all__ = [
    "TraceBuildError",
    "TraceError",
    "TraceSession",
    "TraceTotals",
    "TracedDevice",
    "library",
]
