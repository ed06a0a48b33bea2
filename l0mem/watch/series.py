"""The time series a watch records, and the quantities read off each of its samples.

A :class:`WatchSample` is one flat mapping of signal names to bytes (the
probe's names: ``host.available``, ``meminfo.*``, ``cgroup.*``, ``tree.*``,
``drm.<pdev>.<region>.<key>``) plus, when the allocation tracer runs,
``trace.<index>.allocated`` and ``trace.<index>.resident_on_peers`` per traced
device, and ``sysman.<index>.used`` where Sysman answers (device-wide: every
process's memory on the device, read by :mod:`l0mem.watch.sysman`). A signal the machine lacks is absent, never 0; :class:`Series` keeps
why (``unavailable``). The functions here read one sample against the
baseline: host cost, device memory per device, Shmem and cgroup growth.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Iterable, Mapping
from typing import Any

from l0mem.probe.signals import HOST_DRM_REGIONS, HOST_SIGNALS

# The host signals the host cost is read from, best first: MemAvailable
# corrected for the per-CPU free lists, else MemAvailable itself.
TRACE_PREFIX = "trace."
SYSMAN_PREFIX = "sysman."
# 1 on a sample whose host reading overlapped a traced call that moves memory.
IN_FLIGHT = "trace.in_flight"
ALLOCATED = "allocated"
RESIDENT = "resident_on_peers"


@dataclasses.dataclass(frozen=True)
class WatchSample:
    """Every signal in bytes at ``t`` seconds after the watch began, over ``pids`` processes."""

    t: float
    values: Mapping[str, int]
    pids: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", types.MappingProxyType(dict(self.values)))

    def to_dict(self) -> dict[str, Any]:
        """Return the sample as plain JSON data."""
        return {"t": self.t, "pids": self.pids, "values": dict(self.values)}


@dataclasses.dataclass(frozen=True)
class Series:
    """A baseline taken before the workload ran (or at attach) and the samples after it."""

    baseline: WatchSample
    samples: tuple[WatchSample, ...]
    unavailable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tracing: bool = False

    @property
    def all(self) -> tuple[WatchSample, ...]:
        """Return the baseline followed by every sample."""
        return (self.baseline, *self.samples)

    @functools.cached_property
    def device_source(self) -> str | None:
        """Return where the workload's device memory is read: "trace", "drm", "sysman" or None.

        Sysman counts every process's memory on the device, so it serves only
        when nothing closer exists, and only as growth from a baseline that has it.
        """
        if self.tracing:
            return "trace"
        if any(device_bytes(s.values, tracing=False) is not None for s in self.all):
            return "drm"
        if sysman_bytes(self.baseline.values) is not None and any(
            sysman_bytes(s.values) is not None for s in self.samples
        ):
            return "sysman"
        return None

    def device_memory(self, values: Mapping[str, int]) -> int | None:
        """Return the device memory ``values`` show by this series' :attr:`device_source`."""
        if self.device_source == "sysman":
            return sysman_bytes(values)
        return device_bytes(values, tracing=self.tracing)

    def device_growth(self, sample: WatchSample) -> int | None:
        """Return the workload's device memory beyond the baseline at ``sample`` (None: unknown)."""
        now = self.device_memory(sample.values)
        if now is None:
            return None
        return max(0, now - (self.device_memory(self.baseline.values) or 0))


def device_label(source: str | None) -> str:
    """Return how the view names device memory read from ``source`` (a Series.device_source)."""
    how = {"trace": "traced", "drm": "DRM VRAM", "sysman": "Sysman, device-wide"}.get(source or "")
    return f"device memory ({how})" if how else "device memory"


def drm_parts(name: str) -> tuple[str, str, str] | None:
    """Return (pdev, region, key) of a ``drm.<pdev>.<region>.<key>`` name, or None."""
    if not name.startswith("drm."):
        return None
    head, _, key = name[4:].rpartition(".")
    pdev, _, region = head.rpartition(".")
    if not (pdev and region and key):
        return None
    return pdev, region, key


def drm_devices(samples: Iterable[WatchSample]) -> list[str]:
    """Return every DRM device (``drm-pdev``) that appears in ``samples``, sorted."""
    found = {p[0] for s in samples for n in s.values if (p := drm_parts(n)) is not None}
    return sorted(found)


def drm_memory(
    values: Mapping[str, int], pdev: str, *, host: bool, key: str = "total"
) -> int | None:
    """Return ``key`` bytes of ``pdev``'s host-backed (GTT, system) or device (VRAM) regions, or None."""
    parts = [
        v
        for n, v in values.items()
        if (p := drm_parts(n)) is not None
        and p[0] == pdev
        and p[2] == key
        and (p[1] in HOST_DRM_REGIONS) == host
    ]
    return sum(parts) if parts else None


def traced_devices(samples: Iterable[WatchSample]) -> list[int]:
    """Return the traced device indices that appear in ``samples``, sorted."""
    found: set[int] = set()
    for s in samples:
        for name in s.values:
            if name.startswith(TRACE_PREFIX):
                index = name[len(TRACE_PREFIX) :].partition(".")[0]
                if index.isdigit():
                    found.add(int(index))
    return sorted(found)


def trace_values(totals: Mapping[str, Any]) -> dict[str, int]:
    """Return the ``trace.<index>.*`` signals of one ``TraceTotals.to_dict()``."""
    out: dict[str, int] = {}
    for device in totals.get("devices", ()):
        index = int(device["index"])
        out[f"{TRACE_PREFIX}{index}.{ALLOCATED}"] = int(device.get("allocated", 0))
        resident = device.get("resident_on", {}) or {}
        peers = sum(int(v) for k, v in resident.items() if int(k) != index)
        out[f"{TRACE_PREFIX}{index}.{RESIDENT}"] = peers
    return out


def _trace_sum(values: Mapping[str, int], what: str) -> int | None:
    parts = [v for n, v in values.items() if n.startswith(TRACE_PREFIX) and n.endswith("." + what)]
    return sum(parts) if parts else None


def device_parts(values: Mapping[str, int], source: str | None) -> dict[str, int]:
    """Return the workload's device memory per device as ``source`` (a Series.device_source) reads it.

    Keyed by the device's index (traced, Sysman) or PCI address (DRM VRAM).
    """
    out: dict[str, int] = {}
    for name, v in values.items():
        if source == "trace" and name.startswith(TRACE_PREFIX) and name.endswith("." + ALLOCATED):
            key = name[len(TRACE_PREFIX) : -len(ALLOCATED) - 1]
        elif source == "sysman" and name.startswith(SYSMAN_PREFIX) and name.endswith(".used"):
            key = name[len(SYSMAN_PREFIX) : -len(".used")]
        elif source == "drm" and (p := drm_parts(name)) is not None and p[2] == "total":
            if p[1] in HOST_DRM_REGIONS:
                continue
            key = p[0]
        else:
            continue
        out[key] = out.get(key, 0) + v
    return out


def device_bytes(values: Mapping[str, int], *, tracing: bool) -> int | None:
    """Return the workload's device memory: traced live allocations, else DRM VRAM; None if unknown."""
    parts = device_parts(values, "trace" if tracing else "drm")
    return sum(parts.values()) if parts else None


def sysman_bytes(values: Mapping[str, int]) -> int | None:
    """Return the device memory in use on every device by Sysman's count, or None without it."""
    parts = device_parts(values, "sysman")
    return sum(parts.values()) if parts else None


def resident_bytes(values: Mapping[str, int]) -> int | None:
    """Return the traced bytes made resident on a device other than their owner, or None."""
    return _trace_sum(values, RESIDENT)


def host_signal(series: Series) -> str | None:
    """Return the host signal the host cost is read from: the best one the baseline and samples hold."""
    for name in HOST_SIGNALS:
        if name in series.baseline.values and all(name in s.values for s in series.samples):
            return name
    return None


def growth(series: Series, sample: WatchSample, name: str, *, falling: bool = False) -> int | None:
    """Return how much more memory ``name`` says is used at ``sample`` than at the baseline, or None.

    A signal the baseline lacks counts from 0 when it is a tree or DRM signal
    (the tree did not exist yet before ``run`` started it), else is unknown.
    """
    now = sample.values.get(name)
    if now is None:
        return None
    before = series.baseline.values.get(name)
    if before is None:
        if not name.startswith(("tree.", "drm.", TRACE_PREFIX)):
            return None
        before = 0
    return before - now if falling else now - before


def host_cost(series: Series, sample: WatchSample) -> int | None:
    """Return the host memory the workload costs at ``sample``: the baseline's available minus now."""
    name = host_signal(series)
    return None if name is None else growth(series, sample, name, falling=True)


__all__ = [
    "ALLOCATED",
    "HOST_SIGNALS",
    "RESIDENT",
    "TRACE_PREFIX",
    "Series",
    "WatchSample",
    "device_bytes",
    "device_label",
    "device_parts",
    "drm_devices",
    "drm_memory",
    "drm_parts",
    "growth",
    "host_cost",
    "host_signal",
    "resident_bytes",
    "sysman_bytes",
    "trace_values",
    "traced_devices",
]
