"""The host-memory safety guard: an audit must never OOM the machine it audits.

Before every allocation step the guard predicts the step's host cost and
refuses the step if ``MemAvailable`` would then fall below the floor. The
prediction is the step times the larger of ``worst_ratio`` (1:1 by default:
a full mirror) and the slope the run has measured so far (host bytes lost
per device byte since its idle samples), so a driver that mirrors 3.5:1
(one mirror per peer device) is refused a step once its first step shows it.
Until a slope is measured, no single driver allocation may take more than
the room above the floor over :data:`MAX_RATIO` (:meth:`Guard.unmeasured_limit`):
the first allocation cannot cross the floor whatever the mirror's ratio, and
it measures the slope the rest is predicted from.
The child process checks this itself before each step and checks
``MemAvailable`` against the floor again after every driver call that may
take host memory; the parent also watches ``MemAvailable`` while a child runs
and stops the child if the floor is crossed anyway (another process taking
memory, a driver call that mirrors more than any step before it).
"""

from __future__ import annotations

import dataclasses

from l0mem.audit.runs import REASON_GUARD
from l0mem.probe import read_meminfo
from l0mem.units import GIB, format_bytes

DEFAULT_FLOOR_MIN = 2 * GIB
DEFAULT_FLOOR_FRACTION = 0.10
# The most host bytes l0mem assumes one device byte can ever cost. It equals the
# largest mirror_ratio the simulated driver accepts (tests/simdriver/config.c):
# a mirror per peer device on the largest multi-device nodes stays far below it.
# Before a run has measured its slope, every allocation is sized for this ratio.
MAX_RATIO = 64.0


def default_floor(mem_total: int) -> int:
    """Return the default floor: the larger of 2 GiB and 10% of MemTotal."""
    return max(DEFAULT_FLOOR_MIN, int(mem_total * DEFAULT_FLOOR_FRACTION))


@dataclasses.dataclass(frozen=True)
class Guard:
    """The floor MemAvailable must stay above, and how the worst case is assumed."""

    floor_bytes: int
    worst_ratio: float = 1.0  # host bytes a device byte may cost in the worst case
    grace_s: float = 10.0  # how long a stopped child may take to free before SIGKILL
    # How often the parent reads MemAvailable while a child runs: the child also
    # checks after each driver call, so this only has to catch what the child cannot.
    poll_s: float = 0.05

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

    def step_ratio(self, slope: float | None = None) -> float:
        """Return the host bytes per device byte a step is assumed to cost, given ``slope``."""
        return max(self.worst_ratio, slope or 0.0)

    def refuse_step(
        self, available: int, step_bytes: int, slope: float | None = None
    ) -> str | None:
        """Return why a step of ``step_bytes`` must not be taken with ``available`` bytes, or None.

        ``slope`` is the host bytes per device byte measured so far in the run
        (:func:`measured_slope`); the step is assumed to cost at least that.
        """
        ratio = self.step_ratio(slope)
        worst = int(step_bytes * ratio)
        if available - worst >= self.floor_bytes:
            return None
        how = (
            f"predicted {ratio:.2f}:1 from the slope measured so far"
            if ratio > self.worst_ratio
            else f"assumed mirrored {ratio:g}:1"
        )
        return (
            f"{REASON_GUARD} MemAvailable {format_bytes(available)} minus the next step "
            f"{format_bytes(worst)} ({how}) would fall below "
            f"the floor {format_bytes(self.floor_bytes)}"
        )

    def unmeasured_limit(self, available: int, unit: int) -> int:
        """Return the most device bytes (a multiple of ``unit``) one allocation may take before a slope is measured."""
        room = max(0, available - self.floor_bytes)
        return int(room / MAX_RATIO) // unit * unit

    def refuse_unmeasured(self, available: int, unit: int) -> str | None:
        """Return why not even ``unit`` bytes may be allocated before a slope is measured, or None."""
        if self.unmeasured_limit(available, unit) >= unit:
            return None
        return (
            f"{REASON_GUARD} MemAvailable {format_bytes(available)} minus "
            f"{format_bytes(int(unit * MAX_RATIO))} (the smallest allocation, "
            f"{format_bytes(unit)}, assumed mirrored {MAX_RATIO:g}:1 as no slope is measured "
            f"yet) would fall below the floor {format_bytes(self.floor_bytes)}"
        )

    def breached(self, available: int) -> str | None:
        """Return why ``available`` bytes is below the floor, or None when it is not."""
        if available >= self.floor_bytes:
            return None
        return (
            f"{REASON_GUARD} MemAvailable fell to {format_bytes(available)}, below the floor "
            f"{format_bytes(self.floor_bytes)}; the experiment was stopped"
        )


def measured_slope(idle_available: int, available: int, device_bytes: int) -> float | None:
    """Return the host bytes lost per device byte allocated, or None before any allocation.

    ``idle_available`` is the host's available memory before the first step,
    ``available`` the same measure with ``device_bytes`` allocated. Memory
    that came back (a negative drop) is a slope of 0, never a credit.
    """
    if device_bytes <= 0:
        return None
    return max(0.0, (idle_available - available) / device_bytes)
