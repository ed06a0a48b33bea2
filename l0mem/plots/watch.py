"""The plot of a run or watch: memory over time, and host cost against device memory with the fit.

The left panel shows the host cost, the device memory and each DRM device's
VRAM and GTT over time; the right one the deciding signal's cost against
device memory beyond the baseline, with the fitted line and the 1:1 and 0
references drawn over the points. Legends sit below the panels.
"""

from __future__ import annotations

from typing import Any

from l0mem.estimate import cost_series
from l0mem.files import PathLike
from l0mem.plots.figure import draw_references, new_figure, save_figure
from l0mem.watch.estimation import as_setup_run, device_series
from l0mem.watch.series import Series, drm_devices, drm_memory, host_cost
from l0mem.watch.summary import WatchSummary

GIB = 1 << 30
MIB = 1 << 20
WIDTH_IN = 12.0
HEIGHT_IN = 6.0
LEGEND_BELOW: dict[str, Any] = {
    "fontsize": "small",
    "loc": "upper center",
    "bbox_to_anchor": (0.5, -0.14),
    "ncols": 2,
    "frameon": False,
}


def write_watch_plot(series: Series, summary: WatchSummary, path: PathLike, *, title: str) -> None:
    """Plot host and device memory over time, and host against device with the fit (PNG or SVG)."""
    fig, fmt = new_figure(path, WIDTH_IN, HEIGHT_IN)
    over_time, against = fig.subplots(1, 2)
    fig.suptitle(f"{title}: {summary.verdict}")
    ts = [s.t for s in series.samples]

    def gib(v: int | None) -> float:
        return float("nan") if v is None else v / GIB

    over_time.plot(ts, [gib(host_cost(series, s)) for s in series.samples], label="host cost")
    over_time.plot(
        ts,
        [gib(series.device_memory(s.values)) for s in series.samples],
        label="device memory"
        + {"trace": " (traced)", "sysman": " (Sysman, device-wide)"}.get(
            series.device_source or "", ""
        ),
    )
    for pdev in drm_devices(series.all):
        for host, what in ((False, "VRAM"), (True, "GTT")):
            values = [drm_memory(s.values, pdev, host=host) for s in series.samples]
            if any(v is not None for v in values):
                over_time.plot(ts, [gib(v) for v in values], "--", label=f"{pdev} {what}")
    over_time.set_xlabel("time (s)")
    over_time.set_ylabel("GiB")
    over_time.grid(True, alpha=0.3)
    over_time.legend(**LEGEND_BELOW)

    fit = summary.analysis.fit(summary.analysis.deciding_signal or "")
    xs = device_series(series)
    if fit is not None:
        # The fit's own points: its signal's cost from the sample before device memory grew.
        pts = [(x, y) for _, x, y in cost_series(as_setup_run(series, xs).samples, fit.signal)]
        what = f"{fit.signal} (from the last sample before device memory grew)"
    else:
        costs = [host_cost(series, s) for s in series.samples]
        pts = [
            (x / GIB, c / MIB)
            for x, c in zip(xs, costs, strict=True)
            if x is not None and c is not None
        ]
        what = "host cost (from the baseline)"
    against.plot([p[0] for p in pts], [p[1] for p in pts], "o", ms=3, label=what)
    top = max((p[0] for p in pts), default=0.0)
    if fit is not None and fit.slope is not None and fit.intercept_mib is not None and top > 0:
        draw_references(against, top)
    against.set_xlabel("device memory beyond the baseline (GiB)")
    against.set_ylabel("host memory cost (MiB)")
    against.grid(True, alpha=0.3)
    against.legend(**LEGEND_BELOW)
    save_figure(fig, fmt, path)


__all__ = ["write_watch_plot"]
