"""Names and meaning of the memory signals a snapshot can hold.

A snapshot is a flat mapping from signal name to a value in bytes; a signal
the machine does not offer is absent from the mapping, never 0. Names:

- ``proc.VmRSS``, ``proc.RssAnon``, ``proc.RssFile``, ``proc.RssShmem``: this process.
- ``tree.VmRSS``, ``tree.RssAnon``, ``tree.RssFile``, ``tree.RssShmem``, ``tree.VmPin``,
  ``tree.VmLck``, ``tree.VmSwap``: summed over a watched process and its descendants
  (:mod:`l0mem.probe.tree`); ``VmPin`` counts pages pinned for devices
  (``pin_user_pages``), ``VmLck`` mlocked pages, ``VmSwap`` pages swapped out (read
  from the same status file, where psutil's ``memory_full_info`` would walk every
  mapping for it).
- ``meminfo.<Key>``: /proc/meminfo (``MemAvailable``, ``MemFree``, ``Committed_AS``,
  ``MemTotal``, ``Shmem``, ``GPUActive``, ``GPUReclaim``).
- ``vmstat.nr_gpu_active``, ``vmstat.nr_gpu_reclaim``: /proc/vmstat, pages turned to bytes.
- ``zoneinfo.pcp_free``: free pages parked on the per-CPU lists (/proc/zoneinfo). The
  kernel counts them in neither MemFree nor MemAvailable, and since Linux 6.7 the
  lists are auto-tuned to hold hundreds of MiB, enough to hide an allocation.
- ``host.available``: ``meminfo.MemAvailable`` plus ``zoneinfo.pcp_free``, the
  available-memory signal corrected for those lists.
- ``cgroup.memory.current``, ``cgroup.gpu_active``, ``cgroup.gpu_reclaim``: the process's
  cgroup v2 (for a process tree: the root process's).
- ``drm.<pdev>.<region>.<key>``: DRM fdinfo summed over this process's (or the
  tree's) clients of one PCI device, each client once; ``key`` is total, shared,
  resident, purgeable or active.
- ``sysman.<index>.used``: device memory in use by Sysman's count (device side).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

Side = Literal["host", "device"]

# Signals where host memory being consumed shows as the value going *down*.
_FALLING = {"meminfo.MemAvailable", "meminfo.MemFree", "zoneinfo.pcp_free", "host.available"}

# DRM memory regions that are backed by host pages (xe: system, gtt; i915: system0...).
HOST_DRM_REGIONS = frozenset({"system", "gtt", "system0", "stolen-system0"})


@dataclasses.dataclass(frozen=True)
class SignalInfo:
    """What one signal measures: the memory side it watches and its sense."""

    name: str
    side: Side
    sense: int  # +1: a rise means more memory used; -1: a fall means more used
    source: str  # proc, tree, meminfo, vmstat, zoneinfo, host, cgroup, drm or sysman


def describe(name: str) -> SignalInfo:
    """Return the :class:`SignalInfo` for a signal name; raise ValueError for unknown names."""
    source, _, rest = name.partition(".")
    if not rest:
        raise ValueError(f"not a signal name: {name!r}")
    if source in ("proc", "tree", "meminfo", "vmstat", "cgroup", "zoneinfo", "host"):
        return SignalInfo(name, "host", -1 if name in _FALLING else 1, source)
    if source == "sysman":
        return SignalInfo(name, "device", 1, source)
    if source == "drm":
        # drm.<pdev>.<region>.<key>; the PCI address itself contains dots.
        head, _, key = name.rpartition(".")
        region = head.rpartition(".")[2]
        if not key or not region:
            raise ValueError(f"not a DRM signal name: {name!r}")
        side: Side = "host" if region in HOST_DRM_REGIONS else "device"
        return SignalInfo(name, side, 1, source)
    raise ValueError(f"unknown signal source in {name!r}")


def host_cost(name: str, before: int, after: int) -> int:
    """Return how many more bytes of memory ``name`` says are used at ``after`` than at ``before``."""
    return describe(name).sense * (after - before)


# The totals of the host's available memory a cost is read from, the best first:
# host.available holds the per-CPU free lists MemAvailable misses.
HOST_SIGNALS = ("host.available", "meminfo.MemAvailable")


def host_value(values: Mapping[str, int]) -> int | None:
    """Return the best of :data:`HOST_SIGNALS` that ``values`` holds, or None."""
    return next((values[n] for n in HOST_SIGNALS if n in values), None)
