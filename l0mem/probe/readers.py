"""Readers that turn one memory source of this machine into snapshot signals.

Each reader is picked once, when a :class:`l0mem.probe.snapshot.Prober` is made:
``locate`` either returns a reader bound to the files that exist, or a one-line
reason why the source is unavailable here. ``read`` then costs one file read
per file (no subprocesses) and returns ``(values, unavailable)``: values in
bytes, and a reason for each expected signal the file did not contain.

Sources (all paths are under the configurable ``proc_root`` and ``sys_root``;
``<pid>`` is ``self`` for :class:`~l0mem.probe.snapshot.Prober` and a process
id for :class:`~l0mem.probe.tree.TreeProber`):

- ``proc``: ``<proc_root>/<pid>/status`` -> ``proc.VmRSS|RssAnon|RssFile|RssShmem``.
- ``meminfo``: ``<proc_root>/meminfo`` -> ``meminfo.<Key>``; ``GPUActive`` and
  ``GPUReclaim`` are expected and reported unavailable on kernels without them.
- ``vmstat``: ``<proc_root>/vmstat`` -> ``vmstat.nr_gpu_active|nr_gpu_reclaim``.
- ``zoneinfo``: ``<proc_root>/zoneinfo`` -> ``zoneinfo.pcp_free``.
- ``cgroup``: the cgroup v2 path from ``<proc_root>/<pid>/cgroup``, looked up under
  ``<sys_root>/fs/cgroup`` (or ``.../fs/cgroup/unified`` on hybrid hosts):
  ``memory.current`` -> ``cgroup.memory.current``, ``memory.stat`` ->
  ``cgroup.gpu_active|gpu_reclaim``.
- ``drm``: every fd in ``<proc_root>/<pid>/fd`` whose link points under
  ``/dev/dri/``; its ``<proc_root>/<pid>/fdinfo/<fd>`` is parsed and summed per
  device into ``drm.<pdev>.<region>.<key>``. Re-walked on every read, because
  GPU runtimes open device files after start-up.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping
from typing import Protocol

from l0mem.probe import parse

Reading = tuple[dict[str, int], dict[str, str]]


def read_text(path: str) -> str:
    """Return the text of ``path`` read in one go (proc/sys files are small); raise OSError."""
    # os.read on a bare fd: the cheapest read Python has, and a tree sample does hundreds
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", "replace")


class Reader(Protocol):
    """One memory source: a name and a ``read`` that returns values and gaps."""

    name: str

    def read(self) -> Reading:
        """Return (signal -> bytes, signal or source -> reason it is missing)."""
        ...


def _missing(expected: tuple[str, ...], values: Mapping[str, int], where: str) -> dict[str, str]:
    """Return a reason for each expected signal that ``values`` lacks."""
    return {name: f"not reported in {where}" for name in expected if name not in values}


class FileReader:
    """A source that is one file turned into signals by one parser."""

    def __init__(
        self,
        name: str,
        path: str,
        parser: Callable[[str], dict[str, int]],
        expected: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.path = path
        self._parser = parser
        self._expected = expected

    def read(self) -> Reading:
        """Return the parsed signals of the file and the expected ones it lacks."""
        try:
            values = self._parser(read_text(self.path))
        except OSError as e:
            return {}, {self.name: f"cannot read {self.path}: {e.strerror}"}
        return values, _missing(self._expected, values, self.path)


def locate_status(proc_root: str, pid: str = "self") -> FileReader | str:
    """Return the reader of process ``pid``'s status file, or why it is unavailable."""
    path = os.path.join(proc_root, pid, "status")
    if not os.path.isfile(path):
        return f"{path} does not exist"
    return FileReader(
        "proc", path, parse.parse_status, tuple(f"proc.{k}" for k in parse.STATUS_KEYS)
    )


def locate_meminfo(proc_root: str) -> FileReader | str:
    """Return the reader of the system meminfo file, or why it is unavailable."""
    path = os.path.join(proc_root, "meminfo")
    if not os.path.isfile(path):
        return f"{path} does not exist"
    expected = ("meminfo.MemAvailable", "meminfo.GPUActive", "meminfo.GPUReclaim")
    return FileReader("meminfo", path, parse.parse_meminfo, expected)


def locate_vmstat(proc_root: str, page_size: int) -> FileReader | str:
    """Return the reader of the nr_gpu_* counters in vmstat, or why it is unavailable."""
    path = os.path.join(proc_root, "vmstat")
    if not os.path.isfile(path):
        return f"{path} does not exist"

    def parser(text: str) -> dict[str, int]:
        return parse.parse_vmstat(text, page_size)

    return FileReader("vmstat", path, parser, tuple(f"vmstat.{k}" for k in parse.VMSTAT_KEYS))


class CgroupReader:
    """The memory.current and memory.stat files of one process's cgroup v2."""

    name = "cgroup"

    def __init__(self, current: str | None, stat: str | None) -> None:
        self.current = current
        self.stat = stat

    def read(self) -> Reading:
        """Return the cgroup signals and a reason for each expected one that is missing."""
        values: dict[str, int] = {}
        gaps: dict[str, str] = {}
        for path, parser, expected in (
            (self.current, parse.parse_memory_current, ("cgroup.memory.current",)),
            (self.stat, parse.parse_memory_stat, ("cgroup.gpu_active", "cgroup.gpu_reclaim")),
        ):
            if path is None:
                gaps.update({name: "not offered by the process's cgroup" for name in expected})
                continue
            try:
                found = parser(read_text(path))
            except OSError as e:
                gaps.update({name: f"cannot read {path}: {e.strerror}" for name in expected})
                continue
            values.update(found)
            gaps.update(_missing(expected, found, path))
        return values, gaps


def locate_zoneinfo(proc_root: str, page_size: int) -> FileReader | str:
    """Return the reader of the per-CPU free page lists in zoneinfo, or why it is unavailable."""
    path = os.path.join(proc_root, "zoneinfo")
    if not os.path.isfile(path):
        return f"{path} does not exist"

    def parser(text: str) -> dict[str, int]:
        pages = parse.parse_zoneinfo_pcp(text)
        return {} if pages is None else {"zoneinfo.pcp_free": pages * page_size}

    return FileReader("zoneinfo", path, parser, ("zoneinfo.pcp_free",))


def locate_cgroup(proc_root: str, sys_root: str, pid: str = "self") -> CgroupReader | str:
    """Return the reader of process ``pid``'s cgroup v2 memory files, or why it is unavailable."""
    cgroup_file = os.path.join(proc_root, pid, "cgroup")
    try:
        rel = parse.parse_cgroup_path(read_text(cgroup_file))
    except OSError as e:
        return f"cannot read {cgroup_file}: {e.strerror}"
    if rel is None:
        return f"no cgroup v2 entry in {cgroup_file}"
    base = os.path.join(sys_root, "fs", "cgroup")
    for mount in (base, os.path.join(base, "unified")):
        directory = os.path.join(mount, rel.lstrip("/"))
        current = os.path.join(directory, "memory.current")
        stat = os.path.join(directory, "memory.stat")
        has_current, has_stat = os.path.isfile(current), os.path.isfile(stat)
        if has_current or has_stat:
            return CgroupReader(current if has_current else None, stat if has_stat else None)
    return f"no cgroup v2 memory controller for {rel} under {base}"


# errno values that mean the process or the fd went away between two reads.
GONE_ERRNOS = frozenset({errno.ENOENT, errno.ESRCH})


def drm_fds(fd_dir: str) -> list[str]:
    """Return the fd numbers (as text) in ``fd_dir`` whose link points under /dev/dri/."""
    out = []
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # closed between listing and readlink
        if target.startswith("/dev/dri/"):
            out.append(name)
    return out


def read_drm_clients(fd_dir: str, fdinfo_dir: str) -> tuple[list[str], list[parse.DrmClient]]:
    """Return the DRM fds in ``fd_dir`` and the clients their fdinfo reports; raise OSError.

    An fd closed between the walk and the read is skipped; any other error
    (listing the directory, or a permission error on one fdinfo) is raised.
    """
    fds = drm_fds(fd_dir)
    return fds, read_fdinfo_clients(fdinfo_dir, fds)


def read_fdinfo_clients(fdinfo_dir: str, fds: list[str]) -> list[parse.DrmClient]:
    """Return the DRM clients in the fdinfo of ``fds``; skip closed fds, raise other OSErrors."""
    clients = []
    for fd in fds:
        try:
            client = parse.parse_drm_fdinfo(read_text(f"{fdinfo_dir}/{fd}"))
        except OSError as e:
            if e.errno in GONE_ERRNOS:
                continue
            raise
        if client is not None:
            clients.append(client)
    return clients


class DrmReader:
    """The fdinfo of every DRM device file one process holds open."""

    name = "drm"

    def __init__(self, fd_dir: str, fdinfo_dir: str) -> None:
        self.fd_dir = fd_dir
        self.fdinfo_dir = fdinfo_dir

    def drm_fds(self) -> list[str]:
        """Return the fd numbers (as text) whose link points under /dev/dri/."""
        return drm_fds(self.fd_dir)

    def read(self) -> Reading:
        """Return the DRM memory signals summed per device, or why there are none."""
        try:
            fds, clients = read_drm_clients(self.fd_dir, self.fdinfo_dir)
        except OSError as e:
            return {}, {self.name: f"cannot list {e.filename or self.fd_dir}: {e.strerror}"}
        values = parse.sum_drm_clients(clients)
        if values:
            return values, {}
        if not fds:
            return {}, {self.name: "this process has no DRM device file open"}
        return {}, {self.name: "the open DRM device files report no memory in fdinfo"}


def locate_drm(proc_root: str, pid: str = "self") -> DrmReader | str:
    """Return the reader of process ``pid``'s DRM fdinfo, or why it is unavailable."""
    fd_dir = os.path.join(proc_root, pid, "fd")
    fdinfo_dir = os.path.join(proc_root, pid, "fdinfo")
    if not (os.path.isdir(fd_dir) and os.path.isdir(fdinfo_dir)):
        return f"{fd_dir} or {fdinfo_dir} does not exist"
    return DrmReader(fd_dir, fdinfo_dir)


def locate_system(proc_root: str, page_size: int) -> list[tuple[str, Reader | str]]:
    """Return (source, reader or why it is unavailable) for the machine-wide sources."""
    return [
        ("meminfo", locate_meminfo(proc_root)),
        ("vmstat", locate_vmstat(proc_root, page_size)),
        ("zoneinfo", locate_zoneinfo(proc_root, page_size)),
    ]


def split_located(
    candidates: list[tuple[str, Reader | str]],
) -> tuple[list[Reader], dict[str, str]]:
    """Return the readers among ``candidates`` and a reason for each source that is a string."""
    found: list[Reader] = []
    gaps: dict[str, str] = {}
    for name, result in candidates:
        if isinstance(result, str):
            gaps[name] = result
        else:
            found.append(result)
    return found, gaps


def locate_all(
    proc_root: str, sys_root: str, page_size: int
) -> tuple[list[Reader], dict[str, str]]:
    """Return the readers available under the roots and a reason for each unavailable source."""
    return split_located(
        [
            ("proc", locate_status(proc_root)),
            *locate_system(proc_root, page_size),
            ("cgroup", locate_cgroup(proc_root, sys_root)),
            ("drm", locate_drm(proc_root)),
        ]
    )


def read_environ(pid: int) -> dict[str, str] | None:
    """Return the environment process ``pid`` started with, or None where it cannot be read."""
    import psutil  # here: the audit's child processes load the probe, not this (18 ms)

    try:
        return psutil.Process(pid).environ()
    except psutil.Error:  # ended, a zombie, or not this user's to read
        return None
