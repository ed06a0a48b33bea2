"""The one reader of the host's memory state (``/proc/meminfo``) outside a full snapshot.

The audit's guard, the benchmarks' memory checks and the CLI read
``MemAvailable`` and ``MemTotal`` here; :mod:`l0mem.probe.snapshot` reads the
same file among every other signal.

Not ``psutil.virtual_memory().available``: that is the kernel's MemAvailable
only while it looks sane; psutil puts its own estimate in its place when it
reads 0 and MemFree when it exceeds MemTotal. The guard must stop on the
kernel's figure, the one the snapshot's ``meminfo.MemAvailable`` holds.
"""

from __future__ import annotations

import os

from l0mem.probe.parse import parse_meminfo


class MeminfoError(OSError):
    """/proc/meminfo cannot be read or lacks a field the guard needs."""


def read_meminfo(proc_root: str = "/proc") -> dict[str, int]:
    """Return the ``meminfo.<Key>`` values (bytes) of ``/proc/meminfo``; raise MeminfoError."""
    path = os.path.join(proc_root, "meminfo")
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            values = parse_meminfo(f.read())
    except OSError as exc:
        raise MeminfoError(f"{path}: cannot read ({exc.strerror or exc})") from None
    for key in ("meminfo.MemAvailable", "meminfo.MemTotal"):
        if key not in values:
            raise MeminfoError(f"{path}: no {key.partition('.')[2]} field (kernel too old?)")
    return values


def mem_available(proc_root: str = "/proc") -> int:
    """Return MemAvailable in bytes; raise MeminfoError when it cannot be read."""
    return read_meminfo(proc_root)["meminfo.MemAvailable"]


def mem_total(proc_root: str = "/proc") -> int:
    """Return MemTotal in bytes; raise MeminfoError when it cannot be read."""
    return read_meminfo(proc_root)["meminfo.MemTotal"]


__all__ = ["MeminfoError", "mem_available", "mem_total", "read_meminfo"]
