"""A tracing session: the workload's environment and the running totals of its records."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from l0mem.trace.build import library
from l0mem.trace.environment import DEFAULT_DRIVERS, NO_PEER_VAR, outer_trace, split_drivers
from l0mem.trace.records import ENTRY_POINTS, FORMAT, Kind, Record, decode, past_unwritten

SUFFIX = ".l0trace"
_ALLOCS = {Kind.ALLOC_DEVICE, Kind.ALLOC_HOST, Kind.ALLOC_SHARED}
_FREES = {Kind.FREE, Kind.FREE_EXT}
# Calls announced by a BEGIN record: in flight until their own record comes.
_ANNOUNCED = _ALLOCS | _FREES | {Kind.RESIDENT, Kind.EVICT}


@dataclass(frozen=True)
class TracedDevice:
    """What the traced processes did on one device (bytes; live counts and their peaks).

    ``host_allocated`` stays 0: ``zeMemAllocHost`` names no device, its bytes are
    in :attr:`TraceTotals.host_allocated`. ``resident_on`` counts residency on
    *other* devices (the peer residency that can mirror), by their index.
    """

    index: int
    uuid: str
    name: str
    pci: str | None
    allocated: int
    allocated_peak: int
    host_allocated: int
    shared_allocated: int
    resident_on: Mapping[int, int]
    resident_on_peak: Mapping[int, int]

    def to_dict(self) -> dict[str, Any]:
        """Return the device as JSON-able data."""
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "pci": self.pci,
            "allocated": self.allocated,
            "allocated_peak": self.allocated_peak,
            "host_allocated": self.host_allocated,
            "shared_allocated": self.shared_allocated,
            "resident_on": {str(k): v for k, v in sorted(self.resident_on.items())},
            "resident_on_peak": {str(k): v for k, v in sorted(self.resident_on_peak.items())},
        }


@dataclass(frozen=True)
class TraceTotals:
    """Everything the tracer recorded so far, summed over the traced processes."""

    devices: tuple[TracedDevice, ...]
    failed_calls: Mapping[str, int]
    skipped_calls: int
    skipped_bytes: int
    processes: int
    lost_records: int
    host_allocated: int = 0
    host_allocated_peak: int = 0
    calls: Mapping[str, int] = field(default_factory=dict)
    in_flight: int = 0  # calls that move memory, begun and not yet returned

    def to_dict(self) -> dict[str, Any]:
        """Return the totals as JSON-able data."""
        return {
            "devices": [d.to_dict() for d in self.devices],
            "failed_calls": dict(sorted(self.failed_calls.items())),
            "skipped_calls": self.skipped_calls,
            "skipped_bytes": self.skipped_bytes,
            "processes": self.processes,
            "lost_records": self.lost_records,
            "host_allocated": self.host_allocated,
            "host_allocated_peak": self.host_allocated_peak,
            "calls": dict(sorted(self.calls.items())),
            "in_flight": self.in_flight,
        }


@dataclass
class _Device:
    index: int
    uuid: str = ""
    name: str = ""
    pci: str | None = None
    allocated: int = 0
    allocated_peak: int = 0
    shared: int = 0
    resident: Counter[int] = field(default_factory=Counter)
    resident_peak: Counter[int] = field(default_factory=Counter)


@dataclass
class _File:
    fd: int
    offset: int = 0
    pid: int = -1


@dataclass
class _Alloc:
    kind: int
    device: str | None
    size: int
    context: int
    # (ptr, target device key) -> bytes made resident there
    resident: dict[tuple[int, str], int] = field(default_factory=dict)


class TraceSession:
    """Trace files of one workload in `workdir`/trace: the environment to start it in, and totals."""

    def __init__(
        self, workdir: Path, *, no_peer_residency: bool = False, drivers: str | None = None
    ) -> None:
        """Build the tracer if needed (TraceBuildError) and prepare `workdir`/trace for its files."""
        if ":" in str(workdir):
            # The tracer reads its directories as a ':'-separated list (a traced run inside one).
            raise ValueError(f"a trace directory cannot contain ':': {workdir}")
        self.library = library()
        self.directory = Path(workdir) / "trace"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.no_peer_residency = no_peer_residency
        self._drivers = drivers
        self._files: dict[str, _File] = {}
        self._devices: dict[str, _Device] = {}
        self._index: dict[tuple[int, int], str] = {}  # (pid, process's index) -> device key
        self._allocs: dict[tuple[int, int], _Alloc] = {}  # (pid, ptr)
        self._failed: Counter[str] = Counter()
        self._calls: Counter[str] = Counter()
        self._skipped_calls = 0
        self._skipped_bytes = 0
        self._host = 0
        self._host_peak = 0
        self._pids: set[int] = set()
        self._lost: dict[int, int] = {}
        self._in_flight: dict[int, int] = {}
        self._bad = 0

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """Return `base` with the variables that put the tracer between the loader and the driver."""
        env = dict(base)
        listed = self._drivers or base.get("ZE_ENABLE_ALT_DRIVERS") or DEFAULT_DRIVERS
        tracer = str(self.library)
        outer = outer_trace(base, tracer)
        if outer is not None and self._drivers is None:
            # A traced run inside a traced run (l0mem run --trace under l0mem run --trace):
            # the outer tracer is already between the loader and the driver it traces.
            # Trace that driver, keep every other entry of the loader's list, and write
            # every record to both runs' directories, so that neither run's result changes.
            traced = base["L0MEM_TRACE_DRIVERS"]
            others = [e for e in (e.strip() for e in listed.split(",")) if e and e != tracer]
        else:
            traced, others = split_drivers(listed, tracer)
        env["ZE_ENABLE_ALT_DRIVERS"] = ",".join([str(self.library), *others])
        env["L0MEM_TRACE_DRIVERS"] = traced
        env["L0MEM_TRACE_DIR"] = ":".join([str(self.directory), *(outer or [])])
        # An outer run that keeps its tree's memory off peers keeps this one's off too.
        if self.no_peer_residency or (outer is not None and base.get(NO_PEER_VAR) == "1"):
            env[NO_PEER_VAR] = "1"
        else:
            env.pop(NO_PEER_VAR, None)
        return env

    def poll(self) -> TraceTotals:
        """Read the records written since the last poll (a partial record waits) and return totals."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(SUFFIX))
        except FileNotFoundError:
            names = []
        for name in names:
            state = self._files.get(name)
            if state is None:
                try:
                    fd = os.open(self.directory / name, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                state = self._files[name] = _File(fd)
            self._read(state)
        self._drop_exited()
        return self.totals()

    def close(self) -> None:
        """Close the trace files; a record left incomplete counts as lost."""
        for state in self._files.values():
            self._read(state, final=True)
            os.close(state.fd)
        self._files.clear()

    def _read(self, state: _File, final: bool = False) -> None:
        """Apply the records written since the last read; one not complete yet waits.

        ``final``: a record never completed (its process ended inside the
        write) counts as lost, and the records after it are read.
        """
        size = os.fstat(state.fd).st_size
        # A file grows ahead of its records: where nothing new is written, read 2 bytes, not the rest.
        if size <= state.offset or (not final and os.pread(state.fd, 2, state.offset) == b"\0\0"):
            return
        data = os.pread(state.fd, size - state.offset, state.offset)
        start = 0
        while True:
            records, used = decode(memoryview(data)[start:])
            for rec in records:
                self._apply(state, rec)
            start += used
            rest = data[start:]
            if not final or not rest.strip(b"\0"):
                break
            self._bad += 1
            start = past_unwritten(data, start)
        state.offset += start

    def _apply(self, state: _File, rec: Record) -> None:
        if rec.kind == Kind.PROCESS:
            state.pid = rec.aux
            self._pids.add(rec.aux)
            self._bad += rec.size != FORMAT
            return
        pid = state.pid
        self._lost[pid] = max(self._lost.get(pid, 0), rec.lost)
        if rec.kind == Kind.DEVICE:
            self._describe(pid, rec)
            return
        if rec.kind == Kind.BEGIN:
            self._in_flight[pid] = self._in_flight.get(pid, 0) + 1
            return
        if rec.kind in _ANNOUNCED and self._in_flight.get(pid, 0) > 0:
            self._in_flight[pid] -= 1
        entry = ENTRY_POINTS.get(Kind(rec.kind)) if rec.kind in Kind._value2member_map_ else None
        if entry is None:
            self._bad += 1
            return
        self._calls[entry] += 1
        if rec.skipped:
            self._skipped_calls += 1
            self._skipped_bytes += rec.size
            return
        if rec.result != 0:
            self._failed[entry] += 1
            return
        if rec.kind in _ALLOCS:
            self._allocate(pid, rec)
        elif rec.kind in _FREES:
            alloc = self._allocs.pop((pid, rec.ptr), None)
            if alloc is not None:
                self._release(alloc)
        elif rec.kind == Kind.RESIDENT:
            self._resident(pid, rec)
        elif rec.kind == Kind.EVICT:
            self._evict(pid, rec)
        elif rec.kind == Kind.CONTEXT_DESTROY:
            for key in [
                k for k, a in self._allocs.items() if k[0] == pid and a.context == rec.context
            ]:
                self._release(self._allocs.pop(key))

    def _describe(self, pid: int, rec: Record) -> None:
        if rec.owner_sub >= 0:
            return  # a sub-device: its records count for its root device
        key = rec.uuid if rec.uuid.strip("0-") else f"#{rec.owner}"
        self._index[(pid, rec.owner)] = key
        dev = self._devices.get(key)
        if dev is None:
            self._devices[key] = _Device(rec.owner, rec.uuid, rec.name, rec.pci)

    def _device(self, pid: int, index: int) -> _Device | None:
        if index < 0:
            return None
        key = self._index.get((pid, index))
        if key is None:  # never described (the tracer could not place it): by index alone
            key = self._index[(pid, index)] = f"#{index}"
        dev = self._devices.get(key)
        if dev is None:
            dev = self._devices[key] = _Device(index)
        return dev

    def _key(self, pid: int, index: int) -> str | None:
        dev = self._device(pid, index)
        return None if dev is None else self._index[(pid, index)]

    def _allocate(self, pid: int, rec: Record) -> None:
        key = self._key(pid, rec.owner)
        old = self._allocs.pop((pid, rec.ptr), None)
        if old is not None:  # a free the trace missed
            self._release(old)
        self._allocs[(pid, rec.ptr)] = _Alloc(rec.kind, key, rec.size, rec.context)
        if rec.kind == Kind.ALLOC_HOST:
            self._host += rec.size
            self._host_peak = max(self._host_peak, self._host)
            return
        if key is None:
            return
        dev = self._devices[key]
        if rec.kind == Kind.ALLOC_DEVICE:
            dev.allocated += rec.size
            dev.allocated_peak = max(dev.allocated_peak, dev.allocated)
        else:
            dev.shared += rec.size

    def _release(self, alloc: _Alloc) -> None:
        if alloc.kind == Kind.ALLOC_HOST:
            self._host -= alloc.size
        elif alloc.device is not None:
            dev = self._devices[alloc.device]
            if alloc.kind == Kind.ALLOC_DEVICE:
                dev.allocated -= alloc.size
            else:
                dev.shared -= alloc.size
            for (_ptr, target), size in alloc.resident.items():
                dev.resident[self._devices[target].index] -= size
        alloc.resident.clear()

    def _holder(self, pid: int, ptr: int) -> _Alloc | None:
        alloc = self._allocs.get((pid, ptr))
        if alloc is not None:
            return alloc
        for (p, base), a in self._allocs.items():  # a range inside an allocation: rare
            if p == pid and base <= ptr < base + a.size:
                return a
        return None

    def _resident(self, pid: int, rec: Record) -> None:
        target = self._key(pid, rec.target)
        alloc = self._holder(pid, rec.ptr)
        if alloc is None or alloc.device is None or target is None or alloc.device == target:
            return
        owner = alloc.device
        if (rec.ptr, target) in alloc.resident:
            return  # already resident there: residency does not stack
        alloc.resident[(rec.ptr, target)] = rec.size
        dev, peer = self._devices[owner], self._devices[target].index
        dev.resident[peer] += rec.size
        dev.resident_peak[peer] = max(dev.resident_peak[peer], dev.resident[peer])

    def _evict(self, pid: int, rec: Record) -> None:
        target = self._key(pid, rec.target)
        alloc = self._holder(pid, rec.ptr)
        if target is None or alloc is None or (rec.ptr, target) not in alloc.resident:
            return
        size = alloc.resident.pop((rec.ptr, target))
        if alloc.device is not None:
            self._devices[alloc.device].resident[self._devices[target].index] -= size

    def _drop_exited(self) -> None:
        """A process that ended released its memory (and ended its calls): drop what it held."""
        live = {pid for pid, _ in self._allocs} | {p for p, n in self._in_flight.items() if n}
        for pid in live:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                for key in [k for k in self._allocs if k[0] == pid]:
                    self._release(self._allocs.pop(key))
                self._in_flight.pop(pid, None)
            except PermissionError:
                pass

    def totals(self) -> TraceTotals:
        """Return the totals of every record read so far (without reading new ones)."""
        devices = tuple(
            TracedDevice(
                index=d.index,
                uuid=d.uuid,
                name=d.name,
                pci=d.pci,
                allocated=d.allocated,
                allocated_peak=d.allocated_peak,
                host_allocated=0,
                shared_allocated=d.shared,
                resident_on={k: v for k, v in d.resident.items() if v or d.resident_peak[k]},
                resident_on_peak={k: v for k, v in d.resident_peak.items() if v},
            )
            for d in sorted(self._devices.values(), key=lambda d: (d.index, d.uuid))
        )
        return TraceTotals(
            devices=devices,
            failed_calls=dict(self._failed),
            skipped_calls=self._skipped_calls,
            skipped_bytes=self._skipped_bytes,
            processes=len(self._pids),
            lost_records=sum(self._lost.values()) + self._bad,
            host_allocated=self._host,
            host_allocated_peak=self._host_peak,
            calls=dict(self._calls),
            in_flight=sum(self._in_flight.values()),
        )

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
