"""Which signals a run recorded, what each measures, and each one's cost series.

A cost is MiB of memory used relative to the run's reference (the idle mean),
with the signal's sense applied, so a positive number always means more
memory used. ``drm.all.host.<key>`` sums every DRM client's host-backed
regions: the mirror is charged to the *peer* device's file, so no single
``drm.<pdev>.<region>.<key>`` signal shows all of it.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence

from l0mem.estimate.model import Sample
from l0mem.probe.signals import SignalInfo, describe

MIB = 1 << 20
GIB = 1 << 30

DRM_HOST_AGGREGATE = "drm.all.host."


@functools.lru_cache(maxsize=4096)
def signal_info(name: str) -> SignalInfo | None:
    """Return what ``name`` measures (aggregates included), or None for unknown names."""
    if name.startswith(DRM_HOST_AGGREGATE):
        return SignalInfo(name, "host", 1, "drm")
    try:
        return describe(name)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def drm_host_key(name: str) -> str | None:
    """Return the fdinfo key of a host-region DRM signal, or None for any other signal."""
    if not name.startswith("drm.") or name.startswith(DRM_HOST_AGGREGATE):
        return None
    info = signal_info(name)
    if info is None or info.side != "host":
        return None
    return name.rpartition(".")[2]


# Where each GPU kernel driver puts a mirror's host pages (docs/report-schema.md):
# i915 backs system-memory objects with shmem; xe takes TTM pool pages, which
# show in GPUActive / nr_gpu_active / the cgroup's gpu_active from kernel 7.1.
# Both charge them to the peer's DRM file and (i915; xe from 7.1) the cgroup.
_DRM_HOST = frozenset({DRM_HOST_AGGREGATE + "resident", DRM_HOST_AGGREGATE + "total"})
STACK_COMPONENTS: dict[str, frozenset[str]] = {
    "i915": frozenset({"meminfo.Shmem", "cgroup.memory.current"}) | _DRM_HOST,
    "xe": frozenset(
        {"meminfo.GPUActive", "vmstat.nr_gpu_active", "cgroup.gpu_active", "cgroup.memory.current"}
    )
    | _DRM_HOST,
}
_PLACED = frozenset().union(*STACK_COMPONENTS.values())


def carries(signal: str, stacks: Sequence[str]) -> bool:
    """Return whether ``signal`` can hold a mirror's pages on these GPU drivers (none known: any)."""
    known = [s for s in stacks if s in STACK_COMPONENTS]
    if not known or signal not in _PLACED:
        return True
    return any(signal in STACK_COMPONENTS[s] for s in known)


def value(values: Mapping[str, int], signal: str) -> float | None:
    """Return the signal's value in one snapshot, or None when absent or not finite."""
    if signal.startswith(DRM_HOST_AGGREGATE):
        key = signal[len(DRM_HOST_AGGREGATE) :]
        parts = [v for k, v in values.items() if drm_host_key(k) == key]
        return float(sum(parts)) if parts and all(math.isfinite(p) for p in parts) else None
    v = values.get(signal)
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def recorded_signals(samples: Sequence[Sample]) -> list[str]:
    """Return the known signals (DRM host aggregates included) present in every alloc sample."""
    alloc = [s.values for s in samples if s.phase == "alloc"]
    if not alloc:
        return []
    names = {n for n in alloc[0] if signal_info(n) is not None}
    names |= {DRM_HOST_AGGREGATE + k for n in alloc[0] if (k := drm_host_key(n))}
    return sorted(n for n in names if all(value(v, n) is not None for v in alloc))


def reference(samples: Sequence[Sample], signal: str) -> float | None:
    """Return the idle mean of ``signal``, else its first alloc value (slopes do not need it)."""
    idle = [v for s in samples if s.phase == "idle" and (v := value(s.values, signal)) is not None]
    if idle:
        return statistics.fmean(idle)
    first = [
        v for s in samples if s.phase == "alloc" and (v := value(s.values, signal)) is not None
    ]
    return first[0] if first else None


def cost_series(
    samples: Sequence[Sample], signal: str, drift: float = 0.0
) -> list[tuple[str, float, float]]:
    """Return (phase, device GiB, memory cost MiB) for every sample holding ``signal``.

    ``drift`` (MiB of cost per second) is taken out, from the first sample's time.
    """
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    ref = reference(samples, signal)
    t0 = samples[0].t if samples else 0.0
    out: list[tuple[str, float, float]] = []
    for s in samples:
        v = value(s.values, signal)
        if v is not None and ref is not None:
            cost = info.sense * (v - ref) / MIB - drift * (s.t - t0)
            out.append((s.phase, s.device_bytes / GIB, cost))
    return out


__all__ = [
    "DRM_HOST_AGGREGATE",
    "GIB",
    "MIB",
    "STACK_COMPONENTS",
    "carries",
    "cost_series",
    "drm_host_key",
    "recorded_signals",
    "reference",
    "signal_info",
    "value",
]
