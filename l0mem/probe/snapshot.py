"""One snapshot of every memory signal of this process and machine, taken in one pass.

A :class:`Prober` picks the sources that exist once (see
:mod:`l0mem.probe.readers` for every source and signal) and then reads each
file once per snapshot, with no subprocesses, so it is cheap enough to run
after every audit step. ``sysman.<index>.used`` (device memory in use) is not
read here: the caller, which owns the Level Zero handles, passes it as
``extra``.

``Snapshot.unavailable`` maps a source name (``proc``, ``meminfo``, ``vmstat``,
``zoneinfo``, ``cgroup``, ``drm``, ``tree``, ``sysman``) to why the whole source is
missing, or a signal name to why that one signal is missing from a source
that exists. The audit records it per run (``SetupRun.unavailable``). A
process-tree snapshot (:mod:`l0mem.probe.tree`) adds ``process.<pid>`` keys
for the processes of the tree whose files could not be read.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
import types
from collections.abc import Iterable, Mapping
from typing import Any

from l0mem.probe import readers, signals


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a read-only copy of ``mapping``."""
    return types.MappingProxyType(dict(mapping))


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Signal values in bytes at monotonic time ``t``, and why absent signals are absent."""

    t: float
    values: Mapping[str, int]
    unavailable: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _frozen(self.values))
        object.__setattr__(self, "unavailable", _frozen(self.unavailable))

    def get(self, name: str) -> int | None:
        """Return the value of signal ``name`` in bytes, or None if it is absent."""
        return self.values.get(name)

    def to_dict(self) -> dict[str, Any]:
        """Return the snapshot as plain JSON-serializable data."""
        return {"t": self.t, "values": dict(self.values), "unavailable": dict(self.unavailable)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        """Return the snapshot stored by :meth:`to_dict`; raise ValueError if malformed."""
        try:
            t = float(data["t"])
            values = {str(k): int(v) for k, v in dict(data["values"]).items()}
            unavailable = {str(k): str(v) for k, v in dict(data.get("unavailable", {})).items()}
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a snapshot: {e}") from None
        return cls(t, values, unavailable)


def changes(before: Snapshot, after: Snapshot) -> dict[str, int]:
    """Return ``after - before`` in bytes for every signal present in both snapshots."""
    return {
        name: value - before.values[name]
        for name, value in after.values.items()
        if name in before.values
    }


def check_extra(extra: Mapping[str, int]) -> dict[str, int]:
    """Return ``extra`` as a dict after checking names and values; raise ValueError if bad."""
    out: dict[str, int] = {}
    for name, value in extra.items():
        if signals.describe(name).source != "sysman":
            raise ValueError(f"extra signals must be sysman.<index>.used, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"signal {name!r} needs a byte count >= 0, got {value!r}")
        out[name] = value
    return out


class Prober:
    """Takes snapshots from the memory sources found once, when it is made."""

    def __init__(
        self, *, proc_root: str = "/proc", sys_root: str = "/sys", page_size: int | None = None
    ) -> None:
        self.proc_root = proc_root
        self.sys_root = sys_root
        self.page_size = page_size or os.sysconf("SC_PAGE_SIZE")
        self._readers, self._absent = readers.locate_all(proc_root, sys_root, self.page_size)

    @property
    def sources(self) -> tuple[str, ...]:
        """Return the names of the sources found on this machine."""
        return tuple(r.name for r in self._readers)

    @property
    def absent_sources(self) -> Mapping[str, str]:
        """Return source name -> why it is unavailable, for the sources not found."""
        return _frozen(self._absent)

    def snapshot(self, extra: Mapping[str, int] | None = None) -> Snapshot:
        """Return a :class:`Snapshot` of every source, plus the caller's ``sysman.*`` values."""
        added = check_extra(extra) if extra else {}
        t = time.monotonic()
        values, gaps = read_all(self._readers, self._absent)
        finish(values, gaps, added)
        return Snapshot(t, values, gaps)


def read_all(
    sources: Iterable[readers.Reader], absent: Mapping[str, str]
) -> tuple[dict[str, int], dict[str, str]]:
    """Return the values every source read now, and why each absent signal or source is absent."""
    values: dict[str, int] = {}
    gaps = dict(absent)
    for reader in sources:
        found, missing = reader.read()
        values.update(found)
        gaps.update(missing)
    return values, gaps


def finish(values: dict[str, int], gaps: dict[str, str], added: Mapping[str, int]) -> None:
    """Add the caller's sysman values and ``host.available`` (derived) to one snapshot's data."""
    values.update(added)
    available = values.get("meminfo.MemAvailable")
    pcp = values.get("zoneinfo.pcp_free")
    if available is not None and pcp is not None:
        values["host.available"] = available + pcp
    if not added:
        gaps["sysman"] = "no device memory values were supplied"


@functools.lru_cache(maxsize=8)
def _prober(proc_root: str, sys_root: str) -> Prober:
    """Return the shared :class:`Prober` for a pair of roots (sources picked once)."""
    return Prober(proc_root=proc_root, sys_root=sys_root)


def take_snapshot(
    extra: Mapping[str, int] | None = None, *, proc_root: str = "/proc", sys_root: str = "/sys"
) -> Snapshot:
    """Return a :class:`Snapshot` of this process and machine, adding ``extra`` sysman values."""
    return _prober(proc_root, sys_root).snapshot(extra)
