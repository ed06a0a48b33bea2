"""Audit set-ups, audit options, the devices found, and the plan of one set-up's run.

Set-ups (one allocation path each):

- ``l0``: ``zeMemAllocDevice`` in a context of the one device.
- ``l0-multi``: a context over all selected devices, no peer residency.
- ``l0-peer-resident``: the same, plus ``zeContextMakeMemoryResident`` of each
  allocation on every peer that can access it (what the SYCL runtime does).
- ``l0-dmabuf``: single-device context, allocation chained with the dma-buf
  export descriptor, and its dma-buf file descriptor requested (as an
  importer would), so a driver's export path runs; the descriptor is closed
  when the allocation is freed.
- ``sycl``: ``malloc_device`` in the platform default context.
- ``sycl-single``: ``malloc_device`` in a context of the one device.

:func:`.planning.plan_audit` turns :class:`AuditOptions` and an
:class:`Inventory` of the devices found into :class:`SetupPlan` objects; a
plan that cannot run says why in ``skip_reason``. Plans are plain data:
:meth:`SetupPlan.to_spec` is the JSON the child process
(:mod:`l0mem.audit.child`) runs.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any, Literal

from l0mem.audit.remedies import ALL_SETUPS, Remedy
from l0mem.backends import NoDeviceError as BackendNoDeviceError
from l0mem.backends.base import is_simulator_name

GIB = 1 << 30
MIB = 1 << 20

DEFAULT_MAX_BYTES = 4 * GIB  # the default size is the smaller of this and a share of free memory
DEFAULT_FREE_FRACTION = 0.5
DEFAULT_STEPS = 8
STEP_ALIGN = 2 * MIB  # steps stay page- and pattern-aligned on every driver

# Device memory is filled with zeros: real hardware commits zero-filled pages
# like any others, and the simulator keeps zero pages free, so its numbers are
# the mirror alone. The SYCL CPU device may leave zero-filled pages
# uncommitted, so SYCL set-ups on a CPU fill with a non-zero pattern.
L0_FILL = b"\x00\x00\x00\x00"
SYCL_FILL = b"\xa5\x5a\xa5\x5a"

MULTI_DEVICE_SETUPS = ("l0-multi", "l0-peer-resident")

ALT_DRIVERS_VAR = "ZE_ENABLE_ALT_DRIVERS"


class NoDeviceError(BackendNoDeviceError, RuntimeError):
    """Neither a Level Zero device nor a SYCL device is available for the request.

    A :class:`l0mem.backends.NoDeviceError` like every "no such device" of
    l0mem (the CLI's exit 3); still a RuntimeError, as it was first.
    """


@dataclasses.dataclass(frozen=True)
class AuditOptions:
    """What to audit and how; every field has a safe default."""

    setups: tuple[str, ...] = ALL_SETUPS
    devices: tuple[int, ...] = ()  # Level Zero device indices (all drivers, in order); () = all
    sycl_device: str | None = None  # SYCL filter string; None: Level Zero GPUs, else the default
    size_bytes: int | None = None  # None: min(4 GiB, half the free memory of the device)
    steps: int = DEFAULT_STEPS
    floor_bytes: int | None = None  # None: max(2 GiB, 10% of MemTotal)
    remedies: bool = False  # rerun mirrored set-ups under the known remedies
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)  # a custom remedy
    settle_s: float = 0.1  # wait after each step before sampling
    idle_samples: int = 5
    freed_samples: int = 2
    # Seconds a set-up may spend on extra allocate/free cycles while its slope's
    # interval still spans two verdicts (a busy machine); 0: none.
    budget_s: float = 30.0
    child_timeout_s: float = 300.0  # a child silent this long is stopped
    python: str = sys.executable  # interpreter the children run on

    def __post_init__(self) -> None:
        """Reject options that cannot describe an audit, with a one-line message."""
        unknown = [s for s in self.setups if s not in ALL_SETUPS]
        if unknown:
            raise ValueError(
                f"unknown set-up(s) {', '.join(unknown)}; known: {', '.join(ALL_SETUPS)}"
            )
        if not self.setups:
            raise ValueError("no set-up selected")
        if len(set(self.setups)) != len(self.setups):
            raise ValueError("a set-up is selected twice")
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in self.devices):
            raise ValueError(f"device indices must be integers >= 0, got {list(self.devices)}")
        if len(set(self.devices)) != len(self.devices):
            raise ValueError("a device index is given twice")
        if self.size_bytes is not None and self.size_bytes < STEP_ALIGN:
            raise ValueError(f"size must be at least {STEP_ALIGN // MIB} MiB")
        if not 1 <= self.steps <= 1000:
            raise ValueError(f"steps must be between 1 and 1000, got {self.steps}")
        if self.floor_bytes is not None and self.floor_bytes < 0:
            raise ValueError("the floor must be >= 0 bytes")
        if not 0 <= self.settle_s <= 60:
            raise ValueError(f"settle time must be between 0 and 60 s, got {self.settle_s}")
        if not 2 <= self.idle_samples <= 100 or not 1 <= self.freed_samples <= 100:
            raise ValueError("need 2..100 idle samples and 1..100 freed samples")
        if not 0 <= self.budget_s <= 3600:
            raise ValueError(f"budget must be between 0 and 3600 s, got {self.budget_s}")
        if not self.child_timeout_s > 0:
            raise ValueError("child timeout must be > 0 s")
        object.__setattr__(self, "env", dict(self.env))

    def to_dict(self) -> dict[str, Any]:
        """Return the options as plain JSON data (for the report)."""
        d = dataclasses.asdict(self)
        d["setups"] = list(self.setups)
        d["devices"] = list(self.devices)
        d["env"] = dict(self.env)
        del d["python"]
        return d


@dataclasses.dataclass(frozen=True)
class Inventory:
    """The devices and runtimes found, as reported by the discovery children."""

    l0_devices: list[dict[str, Any]]  # see l0mem.audit.discovery.discover_l0
    l0_error: str | None  # why there are no Level Zero devices (None when there are)
    l0_info: dict[str, Any]  # loader, drivers, alt drivers
    sycl_devices: list[dict[str, Any]]  # see l0mem.audit.discovery.discover_sycl
    sycl_error: str | None
    sycl_info: dict[str, Any]  # dpctl and runtime versions

    @property
    def simulated(self) -> bool:
        """Return True when a device found (Level Zero or SYCL) is the simulated driver's."""
        # Decided by the devices found, not by ZE_ENABLE_ALT_DRIVERS: a path that
        # loads no driver (or a real one) must not turn hardware results into "simulated".
        return any(is_simulated_device(d) for d in [*self.l0_devices, *self.sycl_devices])

    @property
    def real_gpu(self) -> bool:
        """Return True when a GPU found (Level Zero or SYCL) is not the simulated driver's."""
        l0 = [d for d in self.l0_devices if d.get("type") == "GPU"]
        sycl = [d for d in self.sycl_devices if d.get("device_type") == "gpu"]
        return any(not is_simulated_device(d) for d in [*l0, *sycl])

    @property
    def simulator_only(self) -> bool:
        """Return True when every Level Zero device found is a simulated one."""
        return bool(self.l0_devices) and all(is_simulated_device(d) for d in self.l0_devices)

    @property
    def sycl_env_unset(self) -> tuple[str, ...]:
        """Return the variables SYCL children must not inherit (the simulator's driver list).

        With the simulated driver in its list, Debian's loader 1.8 under the SYCL
        runtime lists no device or crashes unless test-side workarounds are in
        place (tests/simdriver/README.md); the SYCL set-ups use the real devices.
        """
        return (ALT_DRIVERS_VAR,) if self.simulator_only else ()


def is_simulated_device(device: Mapping[str, Any]) -> bool:
    """Return True when a discovered Level Zero device is the simulated driver's (by its name)."""
    return is_simulator_name(str(device.get("name", "")))


@dataclasses.dataclass(frozen=True)
class SetupPlan:
    """One set-up to run (or skip) in a child process, with everything the child needs."""

    setup: str
    backend: Literal["l0", "sycl"]
    skip_reason: str | None = None
    remedy: Remedy | None = None
    devices: tuple[dict[str, Any], ...] = ()  # descriptions of the devices used
    l0_devices: tuple[int, ...] = ()  # first is the owner of every allocation
    context: Literal["single", "multi", "default"] = "single"
    peer_resident: bool = False
    dmabuf: bool = False
    sycl_filter: str | None = None
    target_bytes: int = 0
    step_bytes: int = 0
    fill_pattern: bytes = L0_FILL
    floor_bytes: int = 0
    settle_s: float = 0.1
    idle_samples: int = 5
    freed_samples: int = 2
    budget_s: float = 30.0
    stacks: tuple[str, ...] = ()  # the machine's GPU drivers, for the child's analysis
    allow_fewer_devices: bool = False  # a remedy may hide devices (ZE_AFFINITY_MASK)
    host_memory_device: bool = False  # its memory is host memory (host_backed; not the simulator)
    simulated: bool = False  # runs on the simulated Level Zero driver
    env_unset: tuple[str, ...] = ()  # variables the child must not inherit

    @property
    def env(self) -> dict[str, str]:
        """Return the extra environment of this run (the remedy's), or {}."""
        return {} if self.remedy is None else dict(self.remedy.env)

    @property
    def label(self) -> str:
        """Return the set-up name with the remedy in brackets when there is one."""
        return self.setup if self.remedy is None else f"{self.setup} [{self.remedy.name}]"

    @property
    def steps(self) -> int:
        """Return the number of allocation steps planned."""
        return 0 if self.step_bytes == 0 else -(-self.target_bytes // self.step_bytes)

    def to_spec(self) -> dict[str, Any]:
        """Return the JSON spec the child runs (see :mod:`l0mem.audit.child`)."""
        return {
            "setup": self.setup,
            "backend": self.backend,
            "l0_devices": list(self.l0_devices),
            "context": self.context,
            "peer_resident": self.peer_resident,
            "dmabuf": self.dmabuf,
            "sycl_filter": self.sycl_filter,
            "target_bytes": self.target_bytes,
            "step_bytes": self.step_bytes,
            "fill_pattern": self.fill_pattern.hex(),
            "floor_bytes": self.floor_bytes,
            "settle_s": self.settle_s,
            "idle_samples": self.idle_samples,
            "freed_samples": self.freed_samples,
            "budget_s": self.budget_s,
            "stacks": list(self.stacks),
            "allow_fewer_devices": self.allow_fewer_devices,
        }

    def with_remedy(self, remedy: Remedy) -> SetupPlan:
        """Return this plan rerun under ``remedy`` (devices it hides are tolerated)."""
        return dataclasses.replace(self, remedy=remedy, allow_fewer_devices=True)
