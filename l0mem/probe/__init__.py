"""Host and device memory signals, sampled together as one snapshot.

``take_snapshot()`` (or a long-lived :class:`Prober`) reads every memory source
of this process and machine in one cheap pass; signal names and meaning are in
:mod:`l0mem.probe.signals`, sources in :mod:`l0mem.probe.readers`, parsers in
:mod:`l0mem.probe.parse`. :mod:`l0mem.probe.fingerprint` describes the host; :mod:`l0mem.probe.host` is the one
reader of MemAvailable/MemTotal.

What it may import: the leaf modules (``units``, ``files``, ``keepalive``, ``bf16``) and
nothing else of l0mem: the probes run in the audit's child processes and on
machines without any GPU runtime.
"""

from l0mem.probe.host import MeminfoError, mem_available, mem_total, read_meminfo
from l0mem.probe.snapshot import Prober, Snapshot, changes, take_snapshot

__all__ = [
    "MeminfoError",
    "Prober",
    "Snapshot",
    "changes",
    "mem_available",
    "mem_total",
    "read_meminfo",
    "take_snapshot",
]
