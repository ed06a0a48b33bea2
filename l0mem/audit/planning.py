"""The audit's plan: which set-ups run on which devices, at what size, or why they are skipped.

:func:`plan_audit` turns :class:`.setups.AuditOptions` and an
:class:`.setups.Inventory` of the devices found into :class:`.setups.SetupPlan`
objects; a plan that cannot run says why in ``skip_reason``. Level Zero
set-ups use the selected devices of one driver (the first owns every
allocation), SYCL set-ups the one SYCL device selected, and :func:`size_plan`
sizes each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from l0mem.audit.remedies import L0_SETUPS, SYCL_SETUPS
from l0mem.audit.setups import (
    DEFAULT_FREE_FRACTION,
    DEFAULT_MAX_BYTES,
    L0_FILL,
    MIB,
    MULTI_DEVICE_SETUPS,
    STEP_ALIGN,
    SYCL_FILL,
    AuditOptions,
    Inventory,
    NoDeviceError,
    SetupPlan,
    is_simulated_device,
)
from l0mem.units import format_size


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


__all__ = ["check_devices", "plan_audit", "size_plan"]
