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

psutil, and what stays read by hand (figures from a machine of 3,272 processes,
the walks from ``python -m benchmarks.bench_sampling --crowd 3000``):

- the process tree: by hand (:mod:`l0mem.probe.pids`), from each process's
  ``task/<tid>/children``: 2.9 ms a walk of 200 processes, where psutil's
  ``Process.children(recursive=True)`` scans every process's parent pid (68 ms,
  more than the 10 ms between samples of ``run``). Without those files, the
  hand scan of parent pids is 3-5x cheaper than ``psutil.process_iter`` (1.8 ms
  against 8.4 ms on a machine of 275 processes; the benchmark prints both).
- per-process memory: ``/proc/<pid>/status``, one read that gives the
  ``RssAnon``, ``RssFile``, ``RssShmem``, ``VmPin`` and ``VmLck`` psutil lacks along
  with ``VmRSS`` (psutil's ``rss``, from a second file) and ``VmSwap`` (psutil's
  ``swap``, which ``memory_full_info`` finds by walking every mapping). USS and
  PSS are not read: they cost 14 ms per 200 processes, seven whole samples (9.4
  ms against 2.3 ms for the status files, as the benchmark measures both), and
  ``run``'s tree has ended by the time of its summary.
- system memory: ``/proc/meminfo`` parsed once for every signal;
  ``psutil.virtual_memory`` lacks ``GPUActive``, ``Committed_AS`` and the rest,
  and its ``available`` is not always the kernel's MemAvailable
  (:mod:`l0mem.probe.host`). ``vmstat``, ``zoneinfo``, cgroup and DRM fdinfo:
  psutil has none of them.
- psutil where it does the job: a process's environment
  (:func:`read_environ`), and, in :mod:`l0mem.watch`, a process's state and
  whether a pid still exists.

What it may import: psutil, the leaf modules (``units``, ``files``, ``keepalive``,
``bf16``) and nothing else of l0mem: the probes run in the audit's child processes and on
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
