"""Watching a real workload: ``l0mem run`` and ``l0mem watch``.

Samples host memory, the workload's process tree and its DRM clients over
time (:mod:`.engine`, :mod:`.loop`), optionally with the allocation tracer's
records, and judges the host cost per device GiB in the audit's terms
(:mod:`.summary`); :mod:`.series` reads the samples and :mod:`.export` writes
JSON, CSV and a plot.

What it may import: :mod:`l0mem.probe`, :mod:`l0mem.trace`, :mod:`l0mem.estimate`,
the packages below them (:mod:`l0mem.bench`, :mod:`l0mem.allreduce`,
:mod:`l0mem.backends`, :mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`)
and the leaves.
"""

from l0mem.watch.engine import (
    BASELINE_WAIT,
    DEFAULT_GRACE,
    DEFAULT_INTERVAL,
    LOOK,
    FloorStop,
    Watch,
    WatchResult,
)
from l0mem.watch.loop import FloorError, run_workload, watch_pid
from l0mem.watch.series import (
    Series,
    WatchSample,
    device_bytes,
    device_label,
    drm_devices,
    drm_memory,
    host_cost,
)
from l0mem.watch.sources import (
    CommandError,
    DeviceMemoryReader,
    NoSuchProcess,
    NotPermitted,
    TreeReading,
    TreeSource,
    WatchError,
)
from l0mem.watch.summary import WatchSummary, live_ratio, summarize

__all__ = [
    "BASELINE_WAIT",
    "DEFAULT_GRACE",
    "DEFAULT_INTERVAL",
    "LOOK",
    "CommandError",
    "DeviceMemoryReader",
    "FloorError",
    "FloorStop",
    "NoSuchProcess",
    "NotPermitted",
    "Series",
    "TreeReading",
    "TreeSource",
    "Watch",
    "WatchError",
    "WatchResult",
    "WatchSample",
    "WatchSummary",
    "device_bytes",
    "device_label",
    "drm_devices",
    "drm_memory",
    "host_cost",
    "live_ratio",
    "run_workload",
    "summarize",
    "watch_pid",
]
