"""Test-only: the simulated mirror's ground truth in an audit child's snapshots, and a quiet host.

``sitecustomize`` (next to this file) calls :func:`install` in every process
started with this directory on ``PYTHONPATH`` and :data:`MODE_VAR` set (see
tests/support/own_memory.py, which sets both). It wraps
``l0mem.probe.snapshot.Prober.snapshot``, through which the audit's child
takes every sample:

- ``truth``: every snapshot gains :data:`TRUTH_KEY`, the bytes of host pages
  the simulated driver's mirrors hold in this process. The kernel counts them:
  the allocated blocks of each distinct memfd named ``zesim-*`` the process
  has open (the simulator's mirrors and its dma-buf exports, never mapped, so
  no other per-process signal sees them; a leaked or still exported mirror
  keeps its fd and is counted).
- ``quiet``: the same, and the system-wide host signals read what they would
  on a machine where only this process moves memory: each keeps its first
  value in the process, moved by this process's own memory, the mirror plus
  ``proc.RssAnon``. ``MemAvailable``, ``MemFree`` and ``host.available`` fall
  by it, ``cgroup.memory.current`` rises by it, ``Shmem`` rises by the mirror
  alone; every other system-wide signal stays at its first value.
  Per-process (``proc.*``), device (``sysman.*``) and DRM signals stay real.
  ``l0mem.probe.mem_available``, what the child's safety guard reads between
  samples, reads the same quiet host, so the guard's decisions too depend on
  the child's own memory alone; every snapshot also gains :data:`LOWEST_KEY`,
  the lowest ``MemAvailable`` the quiet host had at any read so far (samples
  and the guard's own reads: the child reads after every allocation, so this
  sees a step the guard broke off, which has no sample).

- ``watch``: for ``l0mem run`` and ``l0mem watch`` (the process that samples is
  not the one that holds the mirror): the quiet host of the watched tree.
  ``TreeProber.sample`` gains :data:`TRUTH_KEY`, the mirror pages held by every
  process of the tree (each memfd once), and its system-wide signals move by
  the tree's own memory (that mirror plus ``tree.RssAnon``) from the first
  reading in the process, ``run``'s baseline (``Prober.snapshot``, before any
  tree exists) or ``watch``'s first sample.

The analysis ignores :data:`TRUTH_KEY` (no signal has that source). Where a
test's question is the audit's logic (set-ups, analysis, verdicts, reports),
the quiet host means no other process can change the answer; the kernel's part
(a memfd's pages leave MemAvailable and show in Shmem) is tested on the real
signals in tests/test_probe_live.py and in the audit's real-signal test.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

MODE_VAR = "L0MEM_TEST_HOST"
# quiet and watch: the MemAvailable the quiet host starts from (bytes), instead of
# the real one at the process's first snapshot, so that a test can set a floor
# relative to it that no other process can move.
START_VAR = "L0MEM_TEST_HOST_AVAILABLE"
MODES = ("truth", "quiet", "watch")
TRUTH_KEY = "zesim.mirror_bytes"
LOWEST_KEY = "zesim.quiet_lowest_available"
MEMFD_PREFIX = "/memfd:zesim-"

SYSTEM_SOURCES = ("meminfo.", "vmstat.", "zoneinfo.", "host.", "cgroup.")
FALLING = frozenset({"meminfo.MemAvailable", "meminfo.MemFree", "host.available"})
RISING = frozenset({"cgroup.memory.current"})
MIRROR_ONLY = frozenset({"meminfo.Shmem"})


def memfd_bytes(fd_dirs: list[str], prefix: str = MEMFD_PREFIX) -> int:
    """Return the bytes of host pages held by the memfds named ``prefix*`` open in ``fd_dirs``.

    Each file counts once however many fds (of however many processes) name it;
    a directory or fd that went away meanwhile counts nothing.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for fd_dir in fd_dirs:
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # the process ended meanwhile
        for fd in fds:
            path = os.path.join(fd_dir, fd)
            try:
                if not os.readlink(path).startswith(prefix):
                    continue
                st = os.stat(path)
            except OSError:
                continue  # closed meanwhile (the listing's own fd among them)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def mirror_bytes(fd_dir: str = "/proc/self/fd") -> int:
    """Return the bytes of host pages held by the simulator's memfds open in this process."""
    return memfd_bytes([fd_dir])


def child_pids(proc_root: str = "/proc") -> list[int]:
    """Return the pids of this process's children (every thread's children file)."""
    pids: list[int] = []
    task_dir = os.path.join(proc_root, "self", "task")
    for tid in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, tid, "children")) as f:
                pids.extend(int(p) for p in f.read().split())
        except OSError:
            continue  # thread ended meanwhile
    return pids


def process_own(pid: int, proc_root: str = "/proc") -> int:
    """Return the host memory process ``pid`` moves itself: its mirror's pages plus its RssAnon."""
    try:
        mirror = mirror_bytes(os.path.join(proc_root, str(pid), "fd"))
        with open(os.path.join(proc_root, str(pid), "status")) as f:
            status = f.read()
    except OSError:
        return 0  # it ended: what it held is back
    for line in status.splitlines():
        if line.startswith("RssAnon:"):
            return mirror + int(line.split()[1]) * 1024
    return mirror


def tree_mirror_bytes(pids: tuple[int, ...], proc_root: str = "/proc") -> int:
    """Return the bytes of host pages the simulator's memfds hold in the processes ``pids``, each memfd once."""
    return memfd_bytes([os.path.join(proc_root, str(pid), "fd") for pid in pids])


def _first(first: dict[str, int], values: Mapping[str, int], own: int, mirror: int, start: int | None) -> None:
    """Fill ``first`` on the first call: the values, own memory and mirror, and the pinned start."""
    if first:
        return
    first.update(values)
    first["own"], first["mirror"] = own, mirror
    if start is not None and "meminfo.MemAvailable" in first:
        # Both available signals shift; their difference (the per-CPU lists) stays.
        shift = start - first["meminfo.MemAvailable"]
        for name in ("meminfo.MemAvailable", "host.available"):
            if name in first:
                first[name] += shift


def _moved_host(values: Mapping[str, int], first: Mapping[str, int], own: int, mirror: int) -> dict[str, int]:
    """Return ``values`` with each system-wide signal moved from its first value by own memory alone."""
    moved, grown = own - first["own"], mirror - first["mirror"]
    out = dict(values)
    for name in values:
        if not name.startswith(SYSTEM_SOURCES) or name not in first:
            continue
        base = first[name]
        if name in FALLING:
            out[name] = max(base - moved, 0)
        elif name in RISING:
            out[name] = base + moved
        elif name in MIRROR_ONLY:
            out[name] = base + grown
        else:
            out[name] = base
    return out


def quiet_values(
    values: Mapping[str, int], first: dict[str, int], start: int | None = None
) -> dict[str, int]:
    """Return ``values`` with the system-wide signals as a host moved by this process alone.

    ``first`` holds the process's first snapshot (filled on the first call);
    ``start``, if given, is the MemAvailable the quiet host starts from.
    """
    own = values[TRUTH_KEY] + values.get("proc.RssAnon", 0)
    _first(first, values, own, values[TRUTH_KEY], start)
    return _moved_host(values, first, own, values[TRUTH_KEY])


def quiet_tree_values(
    values: Mapping[str, int], own: int, mirror: int, first: dict[str, int]
) -> dict[str, int]:
    """Return ``values`` with the system-wide signals moved by the watched tree's ``own`` memory alone."""
    start = os.environ.get(START_VAR)
    _first(first, values, own, mirror, int(start) if start else None)
    return _moved_host(values, first, own, mirror)


def install_watch() -> None:
    """Model a quiet host around the tree an ``l0mem run``/``watch`` process samples."""
    import dataclasses

    from l0mem.probe import snapshot as module
    from l0mem.probe import tree

    first: dict[str, int] = {}
    snapshot_of, sample_of = module.Prober.snapshot, tree.TreeProber.sample

    def snapshot(self: Any, extra: Mapping[str, int] | None = None) -> Any:
        snap = snapshot_of(self, extra)
        values = quiet_tree_values(snap.values, 0, 0, first)
        return module.Snapshot(snap.t, {**values, TRUTH_KEY: 0}, snap.unavailable)

    def sample(self: Any, extra: Mapping[str, int] | None = None) -> Any:
        got = sample_of(self, extra)
        mirror = tree_mirror_bytes(tuple(got.pids), self.proc_root)
        own = mirror + got.snapshot.values.get("tree.RssAnon", 0)
        values = quiet_tree_values(got.snapshot.values, own, mirror, first)
        snap = module.Snapshot(got.snapshot.t, {**values, TRUTH_KEY: mirror}, got.snapshot.unavailable)
        return dataclasses.replace(got, snapshot=snap)

    module.Prober.snapshot = snapshot  # type: ignore[method-assign]
    tree.TreeProber.sample = sample  # type: ignore[method-assign]


def install(mode: str) -> None:
    """Add the mirror's truth to every snapshot of this process (``quiet``: model the host too)."""
    if mode not in MODES:
        raise ValueError(f"{MODE_VAR}={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "watch":
        install_watch()
        return
    from l0mem.probe import snapshot as module

    original = module.Prober.snapshot
    first: dict[str, int] = {}
    start = int(os.environ[START_VAR]) if os.environ.get(START_VAR) else None
    lowest: list[int] = []  # the quiet host's lowest MemAvailable so far

    def snapshot(self: Any, extra: Mapping[str, int] | None = None) -> Any:
        snap = original(self, extra)
        values = {**snap.values, TRUTH_KEY: mirror_bytes()}
        if mode == "quiet":
            values = quiet_values(values, first, start)
            now = values["meminfo.MemAvailable"]
            lowest[:] = [min([now, *lowest])]
            values[LOWEST_KEY] = lowest[0]
        return module.Snapshot(snap.t, values, snap.unavailable)

    module.Prober.snapshot = snapshot  # type: ignore[method-assign]
    if mode == "quiet":
        import l0mem.probe as probe

        def mem_available(proc_root: str = "/proc") -> int:
            return int(probe.take_snapshot(proc_root=proc_root).values["meminfo.MemAvailable"])

        # Before the audit's child imports it by name.
        probe.mem_available = mem_available
