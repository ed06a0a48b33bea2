"""Memory of a whole process tree, sampled in one pass (``l0mem run`` and ``l0mem watch``).

The tree is a process and its descendants (:mod:`l0mem.probe.pids`), walked
again at every sample, so children started later are found at the next one.

A :class:`TreeProber` samples, besides the machine-wide signals of a
:class:`~l0mem.probe.snapshot.Prober` (``meminfo.*``, ``vmstat.nr_gpu_*``,
``zoneinfo.pcp_free``, ``host.available``):

- ``cgroup.memory.current``, ``cgroup.gpu_active``, ``cgroup.gpu_reclaim`` of the
  root process's cgroup v2 (located once, when the prober is made);
- ``tree.VmRSS|RssAnon|RssFile|RssShmem|VmPin|VmLck``: the sum over the tree of
  each process's ``status`` (``VmPin``: pages pinned for devices, ``VmLck``: mlocked);
- ``drm.<pdev>.<region>.<key>``: the fdinfo of every fd under ``/dev/dri/`` of
  every process of the tree, each (device, drm-client-id) counted once across
  the tree (a child that inherited the fd and a dup'd fd are the same client)
  and attributed in :attr:`TreeSample.by_process` to the first process, in
  tree order, that holds it.

Cost: a process is read afresh (status, children, fd table, fdinfo) when it
has run since its last read, which its leader's ``/proc/<pid>/schedstat`` line
tells (it changes whenever the task is scheduled). A single-threaded process
that has not run cannot have touched its memory, forked or opened a file, so
its last values stand and only the fdinfo of its DRM files is read again (the
driver may move a client's buffers by itself). Multi-threaded processes, and
kernels without schedstat (or with it off: ``0 0 0``), are read afresh every
time. A tree of sleeping helpers then costs one small read per process.

A process that ends between the walk and its read is skipped quietly. One
whose files cannot be read for permission gets a ``process.<pid>`` entry in
``snapshot.unavailable``; for the root that is a :class:`ProbeAccessError`
when the prober is made. A descendant orphaned by its parent's exit stays in
the tree (told apart from a later process with the same pid by its start
time) until it ends; :meth:`TreeProber.sample` raises :class:`ProcessGone`
once nothing of the tree is left running.
"""

from __future__ import annotations

import dataclasses
import os
import time
import types
from collections.abc import Iterable, Mapping

from l0mem.probe import parse, readers
from l0mem.probe.pids import (
    DENIED,
    ProbeAccessError,
    ProcessGone,
    access_message,
    children_of,
    has_children_files,
    parent_map,
    walk,
)
from l0mem.probe.readers import GONE_ERRNOS, read_text
from l0mem.probe.snapshot import Snapshot, check_extra, finish, read_all

_ENDED_STATES = frozenset({"Z", "X"})  # zombie or dead: nothing left to measure


@dataclasses.dataclass
class _Seen:
    """What the last full read of one process found, and its schedstat line at that time."""

    ran: str | None
    status: dict[str, int]
    threads: int | None
    children: list[int]
    drm_fds: list[str]


@dataclasses.dataclass(frozen=True)
class TreeSample:
    """One sample of a process tree: the snapshot, the live pids, and what each pid holds."""

    snapshot: Snapshot
    pids: tuple[int, ...]
    by_process: Mapping[int, Mapping[str, int]]

    def __post_init__(self) -> None:
        frozen = {pid: types.MappingProxyType(dict(v)) for pid, v in self.by_process.items()}
        object.__setattr__(self, "by_process", types.MappingProxyType(frozen))


# PF_KTHREAD in the flags of /proc/<pid>/stat: a kernel thread, which has no memory of its own.
_PF_KTHREAD = 0x00200000


def _check_root(root: int, proc_root: str) -> None:
    """Raise ProcessGone or ProbeAccessError unless the root's status, fd and fdinfo are readable.

    A kernel thread is refused too: it has no user memory, so a watch of it
    would measure nothing and say so only in a list of gaps.
    """
    base = os.path.join(proc_root, str(root))
    status = ""
    for leaf in ("status", "kthread", "fd", "fdinfo"):
        if leaf == "kthread":
            # status and stat are world-readable: a kernel thread is named before its fds
            # (which only root may list) are tried.
            _refuse_kernel_thread(root, base, status)
            continue
        path = os.path.join(base, leaf)
        try:
            if leaf == "status":
                status = read_text(path)
            else:
                os.listdir(path)
        except OSError as e:
            if e.errno in DENIED:
                raise ProbeAccessError(access_message(path, root, proc_root)) from None
            if e.errno in GONE_ERRNOS:
                raise ProcessGone(f"process {root} does not exist") from None
            raise ProbeAccessError(f"cannot read {path}: {e.strerror}") from None


def _refuse_kernel_thread(root: int, base: str, status: str) -> None:
    """Raise ProbeAccessError naming ``root`` when it is a kernel thread (no memory of its own)."""
    if "VmSize:" in status or not _kernel_thread(base):
        return
    name = next(
        (ln.split(":", 1)[1].strip() for ln in status.splitlines() if ln.startswith("Name:")),
        "?",
    )
    raise ProbeAccessError(
        f"process {root} ({name}) is a kernel thread: it has no memory of its own to watch; "
        "give the pid of a user process"
    )


def _kernel_thread(base: str) -> bool:
    """Return whether the process at ``base`` (/proc/<pid>) is a kernel thread."""
    try:
        fields = parse.stat_fields(read_text(os.path.join(base, "stat")))
    except OSError:
        return False
    if fields is None or len(fields) < 7 or not fields[6].isdigit():
        return False
    return bool(int(fields[6]) & _PF_KTHREAD)


class TreeProber:
    """Samples the memory of process ``root``, its descendants and the machine."""

    def __init__(
        self,
        root: int,
        *,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
        page_size: int | None = None,
    ) -> None:
        if isinstance(root, bool) or not isinstance(root, int) or root <= 0:
            raise ValueError(f"a process id must be a positive integer, got {root!r}")
        self.root = root
        self.proc_root = proc_root
        self.sys_root = sys_root
        self.page_size = page_size or os.sysconf("SC_PAGE_SIZE")
        _check_root(root, proc_root)
        self._children_files = has_children_files(root, proc_root)
        self._readers, self._absent = readers.split_located(
            [
                *readers.locate_system(proc_root, self.page_size),
                ("cgroup", readers.locate_cgroup(proc_root, sys_root, str(root))),
            ]
        )
        # pid -> start time, to follow orphans and not mistake a reused pid for one
        self._starts: dict[int, int | None] = {root: self._start_time(root)}
        self._schedstat = os.path.isfile(f"{proc_root}/{root}/schedstat")
        self._seen: dict[int, _Seen] = {}

    def _start_time(self, pid: int) -> int | None:
        """Return the start time of ``pid`` in clock ticks, or None if it cannot be read."""
        # psutil.Process's identity check reads the same stat field, but only under the
        # process-wide psutil.PROCFS_PATH: this prober reads every file under its own proc_root
        try:
            stat = parse.parse_stat(read_text(os.path.join(self.proc_root, str(pid), "stat")))
        except OSError:
            return None
        return None if stat is None else stat[2]

    def _same(self, pid: int) -> bool:
        """Return whether ``pid`` still names the process first seen under that pid."""
        known = self._starts.get(pid)
        return known is None or self._start_time(pid) == known

    def _children(
        self, pid: int, threads: int | None, scan: dict[int, list[int]] | None
    ) -> list[int]:
        """Return the children of ``pid``: from the ppid scan, else its children files."""
        if scan is not None:
            return scan.get(pid, [])
        if threads == 1:  # one thread, the leader: one file to read, no task listing
            try:
                text = read_text(f"{self.proc_root}/{pid}/task/{pid}/children")
            except OSError:
                return []
            return [int(word) for word in text.split()]
        try:
            return children_of(pid, self.proc_root)
        except OSError:
            return []  # ended during the walk: its children are reparented, not ours

    def adopt(self, pids: Iterable[int]) -> None:
        """Follow ``pids`` and their descendants too, as orphans of the tree are followed.

        For processes of the tree that were reparented before a sample saw them:
        the caller knows them as its own adopted children (a child subreaper's).
        """
        for pid in pids:
            if pid not in self._starts:
                start = self._start_time(pid)
                if start is not None:  # else ended already
                    self._starts[pid] = start

    def sample(self, extra: Mapping[str, int] | None = None) -> TreeSample:
        """Return a :class:`TreeSample` of the tree now; raise ProcessGone when it has ended."""
        added = check_extra(extra) if extra else {}
        t = time.monotonic()
        values, gaps = read_all(self._readers, self._absent)
        scan = None if self._children_files else parent_map(self.proc_root)
        walked: list[int] = []
        live: list[int] = []
        by_process: dict[int, dict[str, int]] = {}
        seen: set[int] = set()
        clients_seen: set[tuple[str, int]] = set()
        drm_fds = 0

        def visit(pid: int) -> list[int] | None:
            nonlocal drm_fds
            got = self._read_process(pid, clients_seen, gaps, scan)
            if got is None:
                return None  # ended after it was listed: skipped quietly
            own, nfds, children, alive = got
            walked.append(pid)
            if alive:
                live.append(pid)
                by_process[pid] = own
                drm_fds += nfds
                for name, nbytes in own.items():
                    values[name] = values.get(name, 0) + nbytes
            return children

        # the root first, then (in tree order) every process seen before: orphans stay
        for start in list(self._starts):
            if start in seen or not (start == self.root or self._starts[start] is not None):
                continue
            if self._same(start):  # else ended, and perhaps its pid reused
                walk(start, visit, seen)
        self._seen = {pid: self._seen[pid] for pid in walked if pid in self._seen}
        starts = {pid: self._starts.get(pid) for pid in walked}
        for pid in walked:
            if pid not in self._starts:
                starts[pid] = self._start_time(pid)
        self._starts = starts or {self.root: self._starts.get(self.root)}
        if not live:
            raise ProcessGone(f"process {self.root} and its descendants have ended")
        self._note_gaps(values, gaps, drm_fds)
        finish(values, gaps, added)
        return TreeSample(Snapshot(t, values, gaps), tuple(live), by_process)

    def _ran(self, pid: int) -> str | None:
        """Return the schedstat line of ``pid``'s leader thread, None if unusable; raise OSError."""
        if not self._schedstat:
            return None
        text = read_text(f"{self.proc_root}/{pid}/schedstat")
        return None if text.split() == ["0", "0", "0"] else text  # sched_info off: no clue

    def _read_process(
        self,
        pid: int,
        clients_seen: set[tuple[str, int]],
        gaps: dict[str, str],
        scan: dict[int, list[int]] | None,
    ) -> tuple[dict[str, int], int, list[int], bool] | None:
        """Return (tree.* and first-seen drm.* of ``pid``, DRM fds, children, alive); None if gone."""
        base = f"{self.proc_root}/{pid}"
        try:
            ran = self._ran(pid)
        except OSError as e:
            if e.errno in GONE_ERRNOS:
                return None
            ran = None
        prev = self._seen.get(pid)
        if prev is not None and ran is not None and ran == prev.ran and prev.threads == 1:
            # A single-threaded process not scheduled since its last read cannot have
            # touched its memory, forked or opened a file: only its DRM fdinfo is
            # read again (the driver may move a client's buffers without it).
            own = dict(prev.status)
            fds = prev.drm_fds
            children = scan.get(pid, []) if scan is not None else prev.children
            try:
                clients = readers.read_fdinfo_clients(f"{base}/fdinfo", fds)
            except OSError as e:
                return self._unreadable(pid, e, own, children, gaps)
        else:
            got = self._read_afresh(pid, ran, gaps, scan)
            if got is None:
                return None
            own, fds, children, clients, alive = got
            if not alive:
                return own, 0, children, False
        for client in clients:
            ident = client.ident
            if ident is not None:
                if ident in clients_seen:
                    continue  # inherited, dup'd or shared: counted at its first holder
                clients_seen.add(ident)
            parse.add_drm_client(own, client)
        return own, len(fds), children, True

    def _read_afresh(
        self, pid: int, ran: str | None, gaps: dict[str, str], scan: dict[int, list[int]] | None
    ) -> tuple[dict[str, int], list[str], list[int], list[parse.DrmClient], bool] | None:
        """Return (tree.*, DRM fds, children, DRM clients, alive) read from every file of ``pid``."""
        base = f"{self.proc_root}/{pid}"
        own: dict[str, int] = {}
        threads = None
        try:
            # status, not psutil's memory_info(): it has RssAnon/RssFile/RssShmem/VmPin/VmLck,
            # which statm lacks, and VmRSS with them; statm too would add 2.3 ms per 200 processes
            status = read_text(f"{base}/status")
        except OSError as e:
            if e.errno in GONE_ERRNOS:
                return None
            gaps[f"process.{pid}"] = f"cannot read {e.filename}: {e.strerror}"
        else:
            own = parse.parse_status(status, parse.TREE_STATUS_KEYS, "tree")
            # a zombie has no memory left (no Vm lines); a process whose leader
            # thread exited while others run shows Z too, but still has its memory
            if parse.parse_status_state(status) in _ENDED_STATES and "tree.VmRSS" not in own:
                return own, [], self._children(pid, None, scan), [], False
            threads = parse.parse_status_threads(status)
        children = self._children(pid, threads, scan)
        try:
            fds, clients = readers.read_drm_clients(f"{base}/fd", f"{base}/fdinfo")
        except OSError as e:
            got = self._unreadable(pid, e, own, children, gaps)
            return None if got is None else (own, [], children, [], True)
        self._seen[pid] = _Seen(ran, dict(own), threads, children, fds)
        return own, fds, children, clients, True

    def _unreadable(
        self, pid: int, e: OSError, own: dict[str, int], children: list[int], gaps: dict[str, str]
    ) -> tuple[dict[str, int], int, list[int], bool] | None:
        """Note why the DRM files of ``pid`` cannot be read; None if it has ended."""
        if e.errno in GONE_ERRNOS:
            return None
        self._seen.pop(pid, None)
        path = e.filename or f"{self.proc_root}/{pid}/fd"
        reason = (
            access_message(path, pid, self.proc_root)
            if e.errno in DENIED
            else f"cannot read {path}: {e.strerror}"
        )
        gaps[f"process.{pid}"] = f"{reason}; its DRM files are not counted"
        return own, 0, children, True

    def _note_gaps(self, values: Mapping[str, int], gaps: dict[str, str], drm_fds: int) -> None:
        """Record why the tree and DRM signals that are absent are absent."""
        if not any(name.startswith("tree.") for name in values):
            gaps["tree"] = "no process of the tree reported memory in its status file"
        else:
            for key in parse.TREE_STATUS_KEYS:
                if f"tree.{key}" not in values:
                    gaps[f"tree.{key}"] = f"not reported in {self.proc_root}/<pid>/status"
        if not any(name.startswith("drm.") for name in values):
            gaps["drm"] = (
                "no process of the tree has a DRM device file open"
                if drm_fds == 0
                else "the open DRM device files of the tree report no memory in fdinfo"
            )
