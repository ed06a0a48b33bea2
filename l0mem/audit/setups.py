"""Audit set-ups, audit options, and the plan: which set-ups run on which devices.

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

:func:`plan_audit` turns :class:`AuditOptions` and an :class:`Inventory` of
the devices found into :class:`SetupPlan` objects; a plan that cannot run says
why in ``skip_reason``. Plans are plain data: :meth:`SetupPlan.to_spec` is the
JSON the child process (:mod:`l0mem.audit.child`) runs.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from l0mem.audit.remedies import ALL_SETUPS, L0_SETUPS, SYCL_SETUPS, Remedy
from l0mem.backends import NoDeviceError as BackendNoDeviceError
from l0mem.backends.base import is_simulator_name
from l0mem.units import format_size

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


def size_plan(
    size_bytes: int | None, steps: int, free_bytes: int | None
) -> tuple[int, int, str | None]:
    """Return (target bytes, step bytes, why not) for a requested size and device free memory."""
    if size_bytes is None:
        if free_bytes is None:
            size_bytes = DEFAULT_MAX_BYTES
        else:
            size_bytes = min(DEFAULT_MAX_BYTES, int(free_bytes * DEFAULT_FREE_FRACTION))
    elif free_bytes is not None and size_bytes > free_bytes:
        # The device's limit, named as such: the host's floor would refuse the first step too.
        return (
            0,
            0,
            f"--size {format_size(size_bytes)} is more than the device's free memory "
            f"({format_size(free_bytes)}); lower --size",
        )
    step = size_bytes // steps // STEP_ALIGN * STEP_ALIGN
    if step == 0:
        return (
            0,
            0,
            (
                f"{size_bytes // MIB} MiB in {steps} steps gives steps under "
                f"{STEP_ALIGN // MIB} MiB; raise --size or lower --steps"
            ),
        )
    return step * steps, step, None


def _l0_description(dev: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("index", "name", "pci_id", "pci_address", "memory_bytes", "kernel_driver")
    return {"backend": "l0", **{k: dev.get(k) for k in keys}}


def _sycl_description(dev: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("filter_string", "name", "device_type", "driver_version", "global_mem_size")
    return {"backend": "sycl", **{k: dev.get(k) for k in keys}}


def check_devices(options: AuditOptions, inv: Inventory) -> None:
    """Raise NoDeviceError when ``options.devices`` names an index no Level Zero device has."""
    known = {d.get("index") for d in inv.l0_devices}
    count = len(inv.l0_devices)
    for index in options.devices:
        if index not in known:
            # As select_devices says it for every other command.
            have = f"this machine has {count} (0..{count - 1})" if count else inv.l0_error
            raise NoDeviceError(f"no Level Zero device {index}: {have or 'none found'}")


def _select_l0(options: AuditOptions, inv: Inventory) -> tuple[list[dict[str, Any]], str | None]:
    """Return the selected Level Zero devices (of the owner's driver) or why there are none."""
    if inv.l0_error is not None:
        return [], inv.l0_error
    by_index = {d["index"]: d for d in inv.l0_devices}
    if options.devices:
        chosen = [by_index[i] for i in options.devices]
    else:
        gpus = [d for d in inv.l0_devices if d.get("type") == "GPU"]
        chosen = gpus or list(inv.l0_devices)
    if not chosen:
        return [], "the Level Zero drivers report no device"
    driver = chosen[0]["driver"]
    return [d for d in chosen if d["driver"] == driver], None


def _select_sycl(options: AuditOptions, inv: Inventory) -> tuple[dict[str, Any] | None, str | None]:
    """Return the SYCL device the sycl set-ups use, or why there is none."""
    if inv.sycl_error is not None:
        return None, inv.sycl_error
    if not inv.sycl_devices:
        return None, "no SYCL device found"
    if options.sycl_device is not None:
        # The discovery child applied the filter: what is left matches it.
        return inv.sycl_devices[0], None
    # Discovery marked the backends' one default choice (l0mem.backends.sycl_info).
    defaults = [d for d in inv.sycl_devices if d.get("default")]
    return (defaults or inv.sycl_devices)[0], None


def plan_audit(
    options: AuditOptions,
    inventory: Inventory,
    floor_bytes: int = 0,
    stacks: tuple[str, ...] = (),
) -> list[SetupPlan]:
    """Return one plan per selected set-up: what it runs on, or why it is skipped.

    Raises NoDeviceError when ``options.devices`` names an index that no Level
    Zero device has: asked for by index, a device must not be skipped quietly.
    """
    check_devices(options, inventory)
    common: dict[str, Any] = {
        "floor_bytes": floor_bytes,
        "settle_s": options.settle_s,
        "idle_samples": options.idle_samples,
        "freed_samples": options.freed_samples,
        "budget_s": options.budget_s,
        "stacks": stacks,
    }
    plans: list[SetupPlan] = []
    l0_devs, l0_why = _select_l0(options, inventory)
    sycl_dev, sycl_why = _select_sycl(options, inventory)
    for setup in options.setups:
        if setup in L0_SETUPS:
            plans.append(_plan_l0(setup, options, l0_devs, l0_why, common))
        elif setup in SYCL_SETUPS:
            plans.append(
                _plan_sycl(setup, options, sycl_dev, sycl_why, inventory.sycl_env_unset, common)
            )
    return plans


def _host_memory(dev: Mapping[str, Any]) -> bool:
    """Return True when a discovered device's memory is host memory: about 1:1 is expected."""
    # host_backed is l0mem.backends.device_memory's one rule (integrated, CPU, simulator).
    # The simulator stands for a discrete GPU here: the audit fills with zeros, which
    # it keeps uncommitted, so what it shows is the mirror it simulates.
    return bool(dev.get("host_backed")) and not is_simulated_device(dev)


def _plan_l0(
    setup: str,
    options: AuditOptions,
    devs: Sequence[dict[str, Any]],
    why: str | None,
    common: dict[str, Any],
) -> SetupPlan:
    if why is not None:
        return SetupPlan(setup, "l0", skip_reason=why)
    owner = devs[0]
    multi = setup in MULTI_DEVICE_SETUPS
    used = list(devs) if multi else [owner]
    simulated = any(is_simulated_device(d) for d in used)
    if multi and len(used) < 2:
        return SetupPlan(
            setup,
            "l0",
            skip_reason=f"needs at least 2 Level Zero devices of one driver, found {len(used)}",
            devices=tuple(_l0_description(d) for d in used),
            simulated=simulated,
        )
    if setup == "l0-peer-resident":
        peers = [d for d in used[1:] if owner["index"] in d.get("peer_access", [])]
        if not peers:
            return SetupPlan(
                setup,
                "l0",
                skip_reason=(
                    f"no other device can access device {owner['index']}'s memory "
                    "(zeDeviceCanAccessPeer), so nothing would be made resident on a peer"
                ),
                devices=tuple(_l0_description(d) for d in used),
                simulated=simulated,
            )
    if setup == "l0-dmabuf" and not owner.get("dmabuf_export"):
        return SetupPlan(
            setup,
            "l0",
            skip_reason=f"device {owner['index']} cannot export allocations as dma-buf",
            devices=(_l0_description(owner),),
            simulated=simulated,
        )
    free = owner.get("free_bytes")
    if free is None:
        free = owner.get("memory_bytes")
    target, step, size_why = size_plan(options.size_bytes, options.steps, free)
    return SetupPlan(
        setup,
        "l0",
        skip_reason=size_why,
        devices=tuple(_l0_description(d) for d in used),
        l0_devices=tuple(int(d["index"]) for d in used),
        context="multi" if multi else "single",
        peer_resident=setup == "l0-peer-resident",
        dmabuf=setup == "l0-dmabuf",
        host_memory_device=_host_memory(owner),
        simulated=simulated,
        target_bytes=target,
        step_bytes=step,
        fill_pattern=L0_FILL,
        **common,
    )


def _plan_sycl(
    setup: str,
    options: AuditOptions,
    dev: dict[str, Any] | None,
    why: str | None,
    unset: tuple[str, ...],
    common: dict[str, Any],
) -> SetupPlan:
    if dev is None:
        return SetupPlan(setup, "sycl", skip_reason=why or "no SYCL device found")
    target, step, size_why = size_plan(
        options.size_bytes, options.steps, dev.get("global_mem_size")
    )
    return SetupPlan(
        setup,
        "sycl",
        skip_reason=size_why,
        devices=(_sycl_description(dev),),
        context="default" if setup == "sycl" else "single",
        sycl_filter=str(dev["filter_string"]),
        host_memory_device=_host_memory(dev),
        # The SYCL runtime's Level Zero adapter can drive the simulator too.
        simulated=is_simulated_device(dev),
        target_bytes=target,
        step_bytes=step,
        fill_pattern=SYCL_FILL if dev.get("device_type") == "cpu" else L0_FILL,
        env_unset=unset,
        **common,
    )
