"""A watched series for view tests: five reads, 1 GiB of DRM device memory and 1 GiB of host each."""

from __future__ import annotations

from l0mem.watch.series import Series, WatchSample

GIB = 1 << 30
PDEV = "0000:10:00.0"


def climbing_series() -> Series:
    """Return a series whose host gives 1 GiB for every GiB of VRAM (and half as much GTT) a read."""
    base = WatchSample(0.0, {"host.available": 32 * GIB})
    samples = tuple(
        WatchSample(
            0.5 * i,
            {
                "host.available": 32 * GIB - i * GIB,
                f"drm.{PDEV}.vram0.total": i * GIB,
                f"drm.{PDEV}.gtt.total": i * GIB // 2,
                "tree.VmRSS": 100 << 20,
            },
            2,
        )
        for i in range(1, 6)
    )
    return Series(base, samples, {"cgroup": "no cgroup v2 here"})
