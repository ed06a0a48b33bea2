"""The host-memory safety guard: an audit must never OOM the machine it audits.

Before every allocation step the guard assumes the worst, that the step will
be mirrored into host memory in full (``worst_ratio`` host bytes per device
byte, 1:1 by default), and refuses the step if ``MemAvailable`` would then
fall below the floor. The child process checks this itself before each step;
the parent also watches ``MemAvailable`` while a child runs and stops the
child if the floor is crossed anyway (a driver that mirrors more than 1:1, or
another process taking memory).
"""

from __future__ import annotations

import dataclasses
import os

from l0mem.probe.parse import parse_meminfo

GIB = 1 << 30
MIB = 1 << 20

DEFAULT_FLOOR_MIN = 2 * GIB
DEFAULT_FLOOR_FRACTION = 0.10


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


def default_floor(mem_total: int) -> int:
    """Return the default floor: the larger of 2 GiB and 10% of MemTotal."""
    return max(DEFAULT_FLOOR_MIN, int(mem_total * DEFAULT_FLOOR_FRACTION))


def format_bytes(n: float) -> str:
    """Return ``n`` bytes as a short human-readable string in MiB or GiB."""
    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    return f"{n / MIB:.0f} MiB"


@dataclasses.dataclass(frozen=True)
class Guard:
    """The floor MemAvailable must stay above, and how the worst case is assumed."""

    floor_bytes: int
    worst_ratio: float = 1.0  # host bytes a device byte may cost in the worst case
    grace_s: float = 10.0  # how long a stopped child may take to free before SIGKILL
    poll_s: float = 0.1  # how often the parent reads MemAvailable while a child runs

    def __post_init__(self) -> None:
        """Reject settings that would disable or break the guard by accident."""
        if isinstance(self.floor_bytes, bool) or not isinstance(self.floor_bytes, int):
            raise TypeError(f"guard floor must be an int of bytes, got {self.floor_bytes!r}")
        if self.floor_bytes < 0:
            raise ValueError(f"guard floor must be >= 0 bytes, got {self.floor_bytes}")
        if not self.worst_ratio >= 0:
            raise ValueError(f"guard worst_ratio must be >= 0, got {self.worst_ratio}")
        if not self.grace_s > 0 or not self.poll_s > 0:
            raise ValueError("guard grace_s and poll_s must be > 0")

    @classmethod
    def for_host(cls, floor_bytes: int | None = None, proc_root: str = "/proc") -> Guard:
        """Return a guard with ``floor_bytes``, or the default floor for this host's MemTotal."""
        if floor_bytes is None:
            floor_bytes = default_floor(read_meminfo(proc_root)["meminfo.MemTotal"])
        return cls(floor_bytes=floor_bytes)

    def refuse_step(self, available: int, step_bytes: int) -> str | None:
        """Return why a step of ``step_bytes`` must not be taken with ``available`` bytes, or None."""
        worst = int(step_bytes * self.worst_ratio)
        if available - worst >= self.floor_bytes:
            return None
        return (
            f"safety guard: MemAvailable {format_bytes(available)} minus the next step "
            f"{format_bytes(worst)} (assumed mirrored {self.worst_ratio:g}:1) would fall below "
            f"the floor {format_bytes(self.floor_bytes)}"
        )

    def breached(self, available: int) -> str | None:
        """Return why ``available`` bytes is below the floor, or None when it is not."""
        if available >= self.floor_bytes:
            return None
        return (
            f"safety guard: MemAvailable fell to {format_bytes(available)}, below the floor "
            f"{format_bytes(self.floor_bytes)}; the experiment was stopped"
        )
