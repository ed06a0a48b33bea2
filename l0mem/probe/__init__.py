"""Host and device memory signals, sampled together as one snapshot.

:func:`host_cost` measures what a block of one's own code cost the host
(:mod:`l0mem.probe.measure`). ``take_snapshot()`` (or a long-lived
:class:`Prober`) reads every memory source
of this process and machine in one cheap pass; a :class:`TreeProber` does the
same for another process and all its descendants (:mod:`l0mem.probe.tree`,
what ``l0mem run`` and ``l0mem watch`` sample); signal names and meaning are in
:mod:`l0mem.probe.signals`, sources in :mod:`l0mem.probe.readers`, parsers in
:mod:`l0mem.probe.parse`. :mod:`l0mem.probe.fingerprint` describes the host; :mod:`l0mem.probe.host` is the one
reader of MemAvailable/MemTotal.

What it may import: the leaf modules (``units``, ``files``, ``keepalive``, ``bf16``) and
nothing else of l0mem: the probes run in the audit's child processes and on
machines without any GPU runtime.
"""

from l0mem.probe.host import MeminfoError, mem_available, mem_total, read_meminfo
from l0mem.probe.measure import HostCost, host_cost
from l0mem.probe.pids import ProbeAccessError, ProcessGone, process_tree
from l0mem.probe.readers import read_environ
from l0mem.probe.snapshot import Prober, Snapshot, changes, take_snapshot
from l0mem.probe.tree import TreeProber, TreeSample

__all__ = [
    "HostCost",
    "MeminfoError",
    "ProbeAccessError",
    "Prober",
    "ProcessGone",
    "Snapshot",
    "TreeProber",
    "TreeSample",
    "changes",
    "host_cost",
    "mem_available",
    "mem_total",
    "process_tree",
    "read_environ",
    "read_meminfo",
    "take_snapshot",
]
