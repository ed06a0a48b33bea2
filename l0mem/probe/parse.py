"""Pure parsers from the text of kernel memory files to snapshot signals (bytes).

Each parser takes the text of one file and returns a mapping from signal name
(see :mod:`l0mem.probe.signals`) to bytes. A key the text lacks is left out,
never reported as 0. Lines that do not parse are skipped: these files gain new
fields between kernel versions and an unknown line must not cost the others.

- ``/proc/<pid>/status``: ``VmRSS``, ``RssAnon``, ``RssFile``, ``RssShmem`` in kB
  become ``proc.<Key>``; for a process tree (:mod:`l0mem.probe.tree`) the keys
  are :data:`TREE_STATUS_KEYS` (those plus ``VmPin``, pages pinned by
  ``pin_user_pages`` such as RDMA and userptr, ``VmLck``, mlocked, and
  ``VmSwap``, swapped out: a tree the host pushes to swap looks smaller in
  its RSS, not cheaper) under the prefix ``tree``.
- ``/proc/<pid>/stat``: :func:`parse_stat` gives the state, parent pid and start
  time (what a process tree is walked and told apart by; not a signal).
- ``/proc/meminfo``: every key with a ``kB`` unit becomes ``meminfo.<Key>``
  (``MemAvailable``, ``MemFree``, ``MemTotal``, ``Committed_AS``, ``Shmem`` and,
  from the kernels that have them, ``GPUActive`` and ``GPUReclaim``). Unitless
  counts such as ``HugePages_Total`` are not bytes and are left out.
- ``/proc/vmstat``: ``nr_gpu_active`` and ``nr_gpu_reclaim`` are page counts,
  multiplied by the page size into ``vmstat.<key>``.
- cgroup v2 ``memory.current`` becomes ``cgroup.memory.current``; the
  ``gpu_active`` and ``gpu_reclaim`` keys of ``memory.stat`` (already bytes)
  become ``cgroup.gpu_active`` and ``cgroup.gpu_reclaim``.
- DRM fdinfo (kernel doc gpu/drm-usage-stats): :func:`parse_drm_fdinfo` reads one
  file into a :class:`DrmClient`; :func:`sum_drm_clients` counts every client
  once and sums per device into ``drm.<pdev>.<region>.<key>``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

STATUS_KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")
TREE_STATUS_KEYS = (*STATUS_KEYS, "VmPin", "VmLck", "VmSwap")
VMSTAT_KEYS = ("nr_gpu_active", "nr_gpu_reclaim")
MEMORY_STAT_KEYS = ("gpu_active", "gpu_reclaim")
DRM_KEYS = ("total", "shared", "resident", "purgeable", "active")

# Units the DRM usage-stats spec allows (KiB, MiB) plus the kB that /proc uses.
_UNITS = {"": 1, "B": 1, "kB": 1024, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}

_DRM_MEMORY = re.compile(
    r"drm-(total|shared|resident|purgeable|active|memory)-(\S+?):\s*(\d+)\s*([A-Za-z]*)\s*$"
)


def _kb_lines(text: str, keys: Iterable[str] | None) -> dict[str, int]:
    """Return ``{key: bytes}`` for ``Key: <n> kB`` lines, limited to ``keys`` if given."""
    wanted = None if keys is None else set(keys)
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep or (wanted is not None and key not in wanted):
            continue
        fields = rest.split()
        if len(fields) != 2 or fields[1] != "kB" or not fields[0].isdigit():
            continue
        out[key] = int(fields[0]) * 1024
    return out


def _status_field(text: str, key: str) -> str | None:
    """Return the text after ``Key:`` on its line of a status text, or None if there is none."""
    # str.find, not a line split or a regex: a process tree reads hundreds of these per sample
    at = text.find(f"\n{key}:")
    if at < 0:
        if not text.startswith(f"{key}:"):
            return None
        at = -1
    start = at + len(key) + 2
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]


def parse_status(
    text: str, keys: Iterable[str] = STATUS_KEYS, prefix: str = "proc"
) -> dict[str, int]:
    """Return the ``<prefix>.<Key>`` signals (bytes) of ``keys`` in the text of /proc/<pid>/status."""
    out: dict[str, int] = {}
    for key in keys:
        value = _status_field(text, key)
        if value is None:
            continue
        fields = value.split()
        if len(fields) == 2 and fields[1] == "kB" and fields[0].isdigit():
            out[f"{prefix}.{key}"] = int(fields[0]) * 1024
    return out


def parse_status_state(text: str) -> str | None:
    """Return the one-letter ``State`` of a /proc/<pid>/status text (``Z``: zombie), or None."""
    value = _status_field(text, "State")
    fields = value.split() if value else []
    return fields[0] if fields else None


def parse_status_threads(text: str) -> int | None:
    """Return the ``Threads`` count of a /proc/<pid>/status text, or None if it has none."""
    value = _status_field(text, "Threads")
    return int(value) if value and value.strip().isdigit() else None


def stat_fields(text: str) -> list[str] | None:
    """Return the fields of a /proc/<pid>/stat text after the command name (state first), or None."""
    # the command name (field 2) is in parentheses and may itself hold spaces and ")"
    _, sep, rest = text.rpartition(")")
    return rest.split() if sep else None


def parse_stat(text: str) -> tuple[str, int, int] | None:
    """Return (state, ppid, start time in clock ticks) from a /proc/<pid>/stat text, or None."""
    fields = stat_fields(text)
    if fields is None or len(fields) < 20 or not (fields[1].isdigit() and fields[19].isdigit()):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def parse_meminfo(text: str) -> dict[str, int]:
    """Return ``meminfo.<Key>`` (bytes) for every kB-valued key in the text of /proc/meminfo."""
    return {f"meminfo.{k}": v for k, v in _kb_lines(text, None).items()}


def parse_vmstat(text: str, page_size: int) -> dict[str, int]:
    """Return the ``vmstat.nr_gpu_*`` signals (page counts times ``page_size``) in /proc/vmstat."""
    if page_size <= 0:
        raise ValueError(f"page size must be positive, got {page_size}")
    out: dict[str, int] = {}
    # vmstat has ~200 lines and we want two: search instead of splitting everything.
    for key in VMSTAT_KEYS:
        m = re.search(rf"^{key} (\d+)$", text, re.MULTILINE)
        if m:
            out[f"vmstat.{key}"] = int(m.group(1)) * page_size
    return out


def parse_cgroup_path(text: str) -> str | None:
    """Return the cgroup v2 path from the text of /proc/<pid>/cgroup, or None if there is none."""
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if hierarchy == "0" and sep and controllers == "" and path.startswith("/"):
            return path
    return None


def parse_memory_current(text: str) -> dict[str, int]:
    """Return ``cgroup.memory.current`` from the text of a cgroup v2 memory.current file."""
    value = text.strip()
    return {"cgroup.memory.current": int(value)} if value.isdigit() else {}


def parse_memory_stat(text: str) -> dict[str, int]:
    """Return ``cgroup.gpu_active`` / ``cgroup.gpu_reclaim`` (bytes) from a memory.stat text."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in MEMORY_STAT_KEYS and fields[1].isdigit():
            out[f"cgroup.{fields[0]}"] = int(fields[1])
    return out


@dataclasses.dataclass(frozen=True)
class DrmClient:
    """The memory one DRM client (an open ``struct drm_file``) reports in its fdinfo."""

    driver: str
    pdev: str | None
    client_id: int | None
    # (region, key) -> bytes, key one of DRM_KEYS
    memory: Mapping[tuple[str, str], int]

    @property
    def device(self) -> str:
        """Return the name the client's signals are keyed by: drm-pdev, else the driver name."""
        return self.pdev or self.driver

    @property
    def ident(self) -> tuple[str, int] | None:
        """Return (device, drm-client-id), the same for every fd of one client; None without an id."""
        return None if self.client_id is None else (self.device, self.client_id)


def parse_drm_fdinfo(text: str) -> DrmClient | None:
    """Return the :class:`DrmClient` in one fdinfo text, or None if it is not a DRM file."""
    driver: str | None = None
    pdev: str | None = None
    client_id: int | None = None
    memory: dict[tuple[str, str], int] = {}
    legacy: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("drm-"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "drm-driver":
            driver = value
        elif key == "drm-pdev":
            pdev = value.lower()
        elif key == "drm-client-id":
            client_id = int(value) if value.isdigit() else None
        else:
            m = _DRM_MEMORY.match(line)
            if m is None:
                continue  # engine time, cycles, capacity, maxfreq, client name
            kind, region, number, unit = m.groups()
            if kind == "total" and region.startswith("cycles-"):
                continue  # drm-total-cycles-<engine> is a GPU timestamp, not memory
            scale = _UNITS.get(unit)
            if scale is None:
                continue
            if kind == "memory":
                legacy[region] = int(number) * scale
            else:
                memory[(region, kind)] = int(number) * scale
    if driver is None:
        return None
    # drm-memory-<region> is the older alias of drm-resident-<region>; the new key wins.
    for region, nbytes in legacy.items():
        memory.setdefault((region, "resident"), nbytes)
    return DrmClient(driver, pdev, client_id, memory)


def sum_drm_clients(clients: Iterable[DrmClient]) -> dict[str, int]:
    """Return ``drm.<device>.<region>.<key>`` bytes summed over distinct clients of each device.

    Two fds with the same drm-client-id on one device are one client (a dup or a
    shared open file) and count once. A client without a client id cannot be
    matched to another, so each one counts.
    """
    seen: set[tuple[str, int]] = set()
    out: dict[str, int] = {}
    for client in clients:
        ident = client.ident
        if ident is not None:
            if ident in seen:
                continue
            seen.add(ident)
        add_drm_client(out, client)
    return out


def add_drm_client(values: dict[str, int], client: DrmClient) -> None:
    """Add the memory of ``client`` to the ``drm.<device>.<region>.<key>`` sums in ``values``."""
    for (region, key), nbytes in client.memory.items():
        name = f"drm.{client.device}.{region}.{key}"
        values[name] = values.get(name, 0) + nbytes


def parse_zoneinfo_pcp(text: str) -> int | None:
    """Return the free pages held on per-CPU lists in a /proc/zoneinfo text, or None if unlisted.

    The kernel does not count these pages in MemFree or MemAvailable; since the
    per-CPU list sizes are auto-tuned (Linux 6.7+) they can hold hundreds of MiB,
    which hides an allocation of that size from MemAvailable.
    """
    total = 0
    found = False
    in_pagesets = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "pagesets":
            in_pagesets = True
        elif line.startswith("Node "):
            in_pagesets = False
        elif in_pagesets and stripped.startswith("count:"):
            value = stripped[len("count:") :].strip()
            if value.isdigit():
                total += int(value)
                found = True
    return total if found else None
