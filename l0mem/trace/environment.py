"""The environment that puts l0mem's tracer between the Level Zero loader and a driver, and takes it out.

The tracer is loaded as the driver (first in ``ZE_ENABLE_ALT_DRIVERS``) and
forwards to the one it traces (``L0MEM_TRACE_DRIVERS``), writing records
into ``L0MEM_TRACE_DIR``. A process of l0mem's own started from a traced
environment (the Sysman reader of a ``run --trace`` inside a ``run
--trace``) must reach the driver without a tracer in front: the tracer,
stripped of its variables, would find no driver to forward to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from l0mem.trace.build import LIBRARY_NAME

DEFAULT_DRIVERS = "libze_intel_gpu.so.1"
NO_PEER_VAR = "L0MEM_TRACE_NO_PEER_RESIDENCY"
TRACE_VARS = ("L0MEM_TRACE_DRIVERS", "L0MEM_TRACE_DIR", NO_PEER_VAR)


def split_drivers(listed: str, tracer: str) -> tuple[str, list[str]]:
    """Return the driver to trace from a ZE_ENABLE_ALT_DRIVERS-style list, and the others.

    The first entry that may load (a bare library name, or a path to a file) is
    traced; the others stay in the loader's list as they were (a path that does
    not exist keeps padding the list, as some set-ups need).
    """
    entries = [e.strip() for e in listed.split(",") if e.strip() and e.strip() != tracer]
    for i, entry in enumerate(entries):
        if "/" not in entry or Path(entry).is_file():
            return entry, entries[:i] + entries[i + 1 :]
    return DEFAULT_DRIVERS, entries


def outer_trace(base: Mapping[str, str], tracer: str) -> list[str] | None:
    """Return the trace directories of a tracer already set up in ``base``, or None."""
    listed = [e.strip() for e in base.get("ZE_ENABLE_ALT_DRIVERS", "").split(",")]
    dirs = [d for d in base.get("L0MEM_TRACE_DIR", "").split(":") if d]
    if tracer not in listed or not base.get("L0MEM_TRACE_DRIVERS") or not dirs:
        return None
    return dirs


def untraced(env: Mapping[str, str]) -> dict[str, str]:
    """Return ``env`` with l0mem's tracer taken out: the driver it traced back in its place."""
    out = {k: v for k, v in env.items() if k not in TRACE_VARS}
    traced = env.get("L0MEM_TRACE_DRIVERS", "")
    listed = [e.strip() for e in env.get("ZE_ENABLE_ALT_DRIVERS", "").split(",") if e.strip()]
    if not any(Path(e).name == LIBRARY_NAME for e in listed):
        return out
    drivers = [traced if Path(e).name == LIBRARY_NAME else e for e in listed]
    drivers = [e for e in drivers if e]
    if drivers:
        out["ZE_ENABLE_ALT_DRIVERS"] = ",".join(dict.fromkeys(drivers))
    else:
        out.pop("ZE_ENABLE_ALT_DRIVERS", None)
    return out


__all__ = [
    "DEFAULT_DRIVERS",
    "NO_PEER_VAR",
    "TRACE_VARS",
    "outer_trace",
    "split_drivers",
    "untraced",
]
