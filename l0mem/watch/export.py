"""A finished watch on disk: JSON (time series and summary; docs/watch-schema.md), CSV, a plot.

Every file goes through :mod:`l0mem.files` (atomic, never replacing a special
file, ``-`` is standard output).
"""

from __future__ import annotations

import csv
import io
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from l0mem import __version__
from l0mem.audit.model import utc_now
from l0mem.audit.report import new_figure, save_figure
from l0mem.backends.base import is_simulator_name
from l0mem.driverenv import recorded_environment
from l0mem.estimate import cost_series
from l0mem.estimate.model import AnalysisConfig
from l0mem.files import PathLike, json_bytes, write_bytes
from l0mem.probe.fingerprint import host_fingerprint
from l0mem.text import printable
from l0mem.watch.engine import WatchResult
from l0mem.watch.estimation import as_setup_run, device_series, watch_config
from l0mem.watch.series import (
    Series,
    drm_devices,
    drm_memory,
    host_cost,
)
from l0mem.watch.summary import WatchSummary

SCHEMA_NAME = "l0mem.watch"
SCHEMA_MAJOR = 1
# 1.2: samples are the reads that tell (see docs/watch-schema.md); options.look.
SCHEMA_MINOR = 2
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
GIB = 1 << 30
MIB = 1 << 20


def _signal_name(signum: int | None) -> str | None:
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def ending(result: WatchResult) -> dict[str, Any]:
    """Return how the workload ended: its exit code, or the signal that killed it."""
    code = result.returncode
    out: dict[str, Any] = {
        "returncode": code if code is None or code >= 0 else None,
        "killed_by": _signal_name(-code) if code is not None and code < 0 else None,
    }
    if result.outlived is not None:
        out["outlived"] = result.outlived.to_dict()
    return out


def simulated(trace: Mapping[str, Any] | None) -> bool:
    """Return True when the tracer saw a device of l0mem's simulated driver."""
    devices = [] if trace is None else trace.get("devices", [])
    return any(is_simulator_name(str(d.get("name", ""))) for d in devices)


def document(
    result: WatchResult,
    summary: WatchSummary,
    *,
    mode: str,
    command: Sequence[str] | None,
    pid: int | None,
    options: Mapping[str, Any],
    config: AnalysisConfig,
    environment: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return the JSON document of one watch (schema :data:`SCHEMA`)."""
    series = result.series
    return {
        "schema": SCHEMA,
        "l0mem_version": __version__,
        "created": utc_now(),
        "mode": mode,
        "command": None if command is None else list(command),
        "pid": pid,
        "options": dict(options),
        "exit": ending(result),
        "stop_signal": _signal_name(result.stop_signal),
        "floor_stop": None if result.floor_stop is None else result.floor_stop.to_dict(),
        "environment": None if environment is None else recorded_environment(environment),
        "fingerprint": host_fingerprint(),
        "simulated": simulated(result.trace),
        "tracing": series.tracing,
        "trace": result.trace,
        "unavailable": dict(series.unavailable),
        "baseline": series.baseline.to_dict(),
        "samples": [s.to_dict() for s in series.samples],
        "summary": summary.to_dict(),
        "analysis": watch_config(config).to_dict(),
    }


def write_json(data: Mapping[str, Any], path: PathLike) -> None:
    """Write the watch's JSON document to ``path``; raise ReportWriteError."""
    write_bytes(path, json_bytes(dict(data)))


def csv_text(series: Series) -> str:
    """Return the time series as CSV: one row per sample (the baseline first), one column per signal.

    A signal a sample lacks is an empty cell, never 0.
    """
    names = sorted({n for s in series.all for n in s.values})
    devices = drm_devices(series.all)
    xs = [0, *device_series(series)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    derived = ["host_cost", "device_memory"]
    for pdev in devices:
        derived += [f"vram.{pdev}", f"gtt.{pdev}"]
    # Signal and device names come from drivers' files: shown, never obeyed.
    writer.writerow([printable(n) for n in ["t", "pids", *derived, *names]])
    for s, x in zip(series.all, xs, strict=True):
        cost = host_cost(series, s)
        row: list[Any] = [s.t, s.pids, "" if cost is None else cost, "" if x is None else x]
        for pdev in devices:
            for host in (False, True):
                v = drm_memory(s.values, pdev, host=host)
                row.append("" if v is None else v)
        row += [s.values.get(n, "") for n in names]
        writer.writerow(row)
    return out.getvalue()


def write_csv(series: Series, path: PathLike) -> None:
    """Write the time series as CSV to ``path``; raise ReportWriteError."""
    write_bytes(path, csv_text(series).encode())


def write_plot(series: Series, summary: WatchSummary, path: PathLike, *, title: str) -> None:
    """Plot host and device memory over time, and host against device with the fit (PNG or SVG)."""
    fig, fmt = new_figure(path, 12, 4.8)
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
    over_time.legend(fontsize="small")

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
        against.plot(
            [0, top],
            [fit.intercept_mib, fit.intercept_mib + fit.slope * top],
            "-",
            label=f"fit: {fit.slope:.0f} +/- {fit.uncertainty or 0:.0f} MiB per GiB",
        )
    if top > 0:
        against.plot([0, top], [0, 1024 * top], ":", color="grey", label="1:1 mirror")
    against.set_xlabel("device memory beyond the baseline (GiB)")
    against.set_ylabel("host memory cost (MiB)")
    against.grid(True, alpha=0.3)
    against.legend(fontsize="small")
    save_figure(fig, fmt, path)


__all__ = [
    "SCHEMA",
    "SCHEMA_MAJOR",
    "SCHEMA_NAME",
    "csv_text",
    "document",
    "ending",
    "write_csv",
    "write_json",
    "write_plot",
]
