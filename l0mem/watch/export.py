"""A finished watch on disk: JSON (time series and summary; docs/watch-schema.md) and CSV.

Its plot is :func:`l0mem.plots.write_watch_plot`. Every file goes through
:mod:`l0mem.files` (atomic, never replacing a special file, ``-`` is standard
output).
"""

from __future__ import annotations

import csv
import io
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from l0mem import __version__
from l0mem.backends.base import is_simulator_name
from l0mem.driverenv import recorded_environment
from l0mem.estimate.model import AnalysisConfig
from l0mem.files import PathLike, json_bytes, write_bytes
from l0mem.jsonfields import utc_now
from l0mem.probe.fingerprint import host_fingerprint
from l0mem.text import os_text, printable
from l0mem.watch.engine import WatchResult
from l0mem.watch.estimation import device_series, watch_config
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
# 1.3: options.repeat and exit.runs (run --repeat).
SCHEMA_MINOR = 3
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
    if result.runs is not None:
        out["runs"] = result.runs
    return out


def simulated(result: WatchResult) -> bool:
    """Return True when the tracer or Sysman saw a device of l0mem's simulated driver."""
    traced = [] if result.trace is None else result.trace.get("devices", [])
    names = [str(d.get("name", "")) for d in traced] + list(result.devices)
    return any(is_simulator_name(n) for n in names)


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
    # Names from the command line and the environment: a byte that is not UTF-8 as \xNN.
    env = None if environment is None else recorded_environment(environment)
    return {
        "schema": SCHEMA,
        "l0mem_version": __version__,
        "created": utc_now(),
        "mode": mode,
        "command": None if command is None else [os_text(a) for a in command],
        "pid": pid,
        "options": dict(options),
        "exit": ending(result),
        "stop_signal": _signal_name(result.stop_signal),
        "floor_stop": None if result.floor_stop is None else result.floor_stop.to_dict(),
        "environment": None if env is None else {os_text(k): os_text(v) for k, v in env.items()},
        "fingerprint": host_fingerprint(),
        "simulated": simulated(result),
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


__all__ = [
    "SCHEMA",
    "SCHEMA_MAJOR",
    "SCHEMA_NAME",
    "csv_text",
    "document",
    "ending",
    "write_csv",
    "write_json",
]
