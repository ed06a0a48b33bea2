"""``--prometheus PATH``: the node-exporter textfile format, for monitoring.

node-exporter's textfile collector reads every ``*.prom`` file of a directory
at each scrape, so a file must never be seen half written: it is written
atomically (:func:`l0mem.files.write_bytes`: a temporary file, then a rename).
Names follow Prometheus' conventions: an ``l0mem_`` prefix, base units
(bytes, seconds, and a plain ratio for host bytes per device byte), the unit
as the suffix, HELP and TYPE lines; a verdict is a labelled gauge that is 1
(``..._info``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from l0mem.files import write_bytes
from l0mem.text import os_text, printable

Labels = Mapping[str, str]


class Metrics:
    """Gauges with their labelled samples, in a registry of the Prometheus client that renders them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._gauges: dict[str, Gauge] = {}

    def add(self, name: str, help_text: str, value: float | None, **labels: str) -> None:
        """Add one sample of gauge ``name``; a value that is None or not finite is left out.

        Every sample of one gauge carries the same label names (the client's rule).
        A label value (a command's name, a set-up's) is written as text that
        encodes (:func:`~l0mem.text.os_text`), its control characters shown as
        the terminal shows them (:func:`~l0mem.text.printable`), never raw.
        """
        if value is None or not math.isfinite(value):
            return  # made at its first value: a gauge without labels would read 0 otherwise
        gauge = self._gauges.get(name)
        if gauge is None:
            gauge = Gauge(name, help_text, sorted(labels), registry=self.registry)
            self._gauges[name] = gauge
        shown = {k: printable(os_text(v)) for k, v in labels.items()}
        (gauge.labels(**shown) if shown else gauge).set(float(value))

    def text(self) -> str:
        """Return the metrics in Prometheus' text exposition format."""
        return generate_latest(self.registry).decode()


def audit_metrics(report: Any, extra: Labels | None = None) -> Metrics:
    """Return the metrics of an audit report: per set-up host bytes per device byte and verdict.

    ``extra`` are the user's labels (``--label``), on every metric.
    """
    m = Metrics()
    platform = report.platform
    user = dict(extra or {})
    for run in report.runs:
        labels = {
            "setup": run.setup,
            "remedy": run.remedy or "",
            "backend": run.backend,
            "platform": report.run_platform(run),
            "device": _device(run.devices),
            **user,
        }
        res = run.result
        m.add(
            "l0mem_audit_host_per_device_ratio",
            "Host memory bytes taken per byte of device memory allocated (1 is a full mirror).",
            None if res is None else res.ratio,
            **labels,
        )
        m.add(
            "l0mem_audit_verdict_info",
            "The audit's verdict for a set-up (mirror, partial, clean, inconclusive), as a label.",
            1 if res is not None else None,
            **labels,
            verdict="" if res is None else res.verdict,
        )
    m.add(
        "l0mem_audit_complete",
        "1 when the audit ran to its end, 0 for a partial report.",
        1 if report.complete else 0,
        platform=platform,
        **user,
    )
    m.add(
        "l0mem_audit_timestamp_seconds",
        "When the audit report was made (Unix time).",
        _unix(report.created),
        platform=platform,
        **user,
    )
    return m


def _device(devices: Iterable[Mapping[str, Any]]) -> str:
    """Return the index of the device a set-up allocated on (its owner), or "" without one."""
    listed = list(devices)
    owner = next((d for d in listed if d.get("role") == "owner"), listed[0] if listed else None)
    return "" if owner is None or owner.get("index") is None else str(owner["index"])


def _unix(created: str) -> float | None:
    try:
        return time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    except ValueError:
        return None


def watch_metrics(
    series: Any, summary: Any, labels: Labels, now: float | None = None, *, running: bool = True
) -> Metrics:
    """Return the metrics of a watched workload: host cost, device memory per DRM device, verdict.

    ``running`` is False for the file written when the run or watch ended: the
    collector keeps reading it, and ``l0mem_watch_running`` 0 says it is final.
    """
    from l0mem.watch.series import device_parts, drm_memory, host_cost

    m = Metrics()
    last = series.samples[-1] if series.samples else None
    m.add(
        "l0mem_watch_host_cost_bytes",
        "Host memory the workload costs now, beyond the baseline taken before it started.",
        None if last is None else host_cost(series, last),
        **labels,
    )
    m.add(
        "l0mem_watch_host_cost_peak_bytes",
        "The largest host memory cost of the workload so far.",
        summary.host_cost.bytes,
        **labels,
    )
    parts = {} if last is None else device_parts(last.values, series.device_source)
    for device, held in sorted(parts.items()):
        m.add(
            "l0mem_watch_device_memory_bytes",
            "The workload's device memory now on one device (traced allocations, DRM VRAM or "
            "Sysman): device is its index, or its PCI address for DRM.",
            held,
            **labels,
            device=device,
        )
    for pdev, region, host in _drm(summary):
        values = {} if last is None else last.values
        m.add(
            f"l0mem_watch_drm_{region}_bytes",
            f"{region.upper()} bytes of the workload's DRM clients on one device (fdinfo).",
            drm_memory(values, pdev, host=host) if values else None,
            **labels,
            pdev=pdev,
        )
    m.add(
        "l0mem_watch_host_per_device_ratio",
        "Host bytes per device byte, fitted over the series (1 is a full mirror).",
        summary.analysis.ratio,
        **labels,
    )
    m.add(
        "l0mem_watch_verdict_info",
        "The verdict over the series so far (mirror, partial, clean, inconclusive), as a label.",
        1,
        **labels,
        verdict=summary.verdict,
    )
    m.add("l0mem_watch_samples", "Samples taken so far.", len(series.samples), **labels)
    m.add(
        "l0mem_watch_running",
        "1 while the run or watch goes on, 0 in the file written when it ended.",
        1 if running else 0,
        **labels,
    )
    m.add(
        "l0mem_watch_timestamp_seconds",
        "When this file was written (Unix time).",
        time.time() if now is None else now,
        **labels,
    )
    return m


def _drm(summary: Any) -> Iterable[tuple[str, str, bool]]:
    for d in summary.devices:
        yield d.pdev, "vram", False
        yield d.pdev, "gtt", True


def write(path: Path, metrics: Metrics) -> None:
    """Write ``metrics`` to ``path`` atomically (never a half-written file for the collector)."""
    write_bytes(path, generate_latest(metrics.registry))


__all__ = ["Metrics", "audit_metrics", "watch_metrics", "write"]
