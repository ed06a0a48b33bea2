"""What the Level Zero backend knows about core devices: memory, peers, Sysman use, contexts.

What it may import: :mod:`l0mem.core`, :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from l0mem.backends.base import DeviceMemory, PeerAccess, is_simulator_name
from l0mem.core import Context, Device

# Intel's PCI vendor id: only Intel's driver reads NEO's debug keys.
INTEL_VENDOR_ID = 0x8086


def device_memory(dev: Device) -> DeviceMemory:
    """Return what Level Zero and Sysman report about ``dev``'s memory.

    Memory is host memory on an integrated GPU, a CPU device and l0mem's
    simulator: allocating it costs host RAM whatever the driver mirrors.
    """
    states = dev.sysman_memory()
    free = sum(s.free for s in states if s.location == "device") if states else None
    return DeviceMemory(
        total=int(dev.total_memory) or None,
        max_alloc=int(dev.properties.max_mem_alloc_size) or None,
        free=free,
        host_backed=bool(dev.properties.integrated)
        or dev.type == "CPU"
        or is_simulator_name(dev.name),
    )


def sysman_used(dev: Device) -> int | None:
    """Return the device memory in use by Sysman's count, None without Sysman."""
    states = dev.sysman_memory()
    if not states:
        return None
    return sum(s.used for s in states if s.location == "device")


def peer_access(src: int, dst: int, a: Device, b: Device) -> PeerAccess:
    """Return ``zeDeviceCanAccessPeer`` and the P2P properties of devices ``a`` (``src``) and ``b``."""
    if a is b:
        return PeerAccess(src, dst, True, True)
    p = a.p2p_properties(b)
    return PeerAccess(
        src,
        dst,
        bool(a.can_access_peer(b)),
        bool(p.atomics),
        p.logical_bandwidth,
        p.bandwidth_unit,
        p.logical_latency,
        p.latency_unit,
    )


def open_contexts(
    devices: Sequence[Device],
    mode: Literal["single", "multi"],
    contexts: list[Context],
    ctx_of: list[Context],
) -> None:
    """Create the contexts of ``mode`` into ``contexts`` (each once) and ``ctx_of`` (per device).

    The lists are filled as contexts are made, so a failure part way leaves
    the caller holding every context made so far, to release.
    """
    if mode == "single":
        for d in devices:
            contexts.append(d.driver.create_context([d]))
            ctx_of.append(contexts[-1])
        return
    # A context holds devices of one driver: one context per driver.
    by_driver: dict[int, Context] = {}
    for d in devices:
        ctx = by_driver.get(d.driver.index)
        if ctx is None:
            members = [m for m in devices if m.driver.index == d.driver.index]
            ctx = d.driver.create_context(members)
            by_driver[d.driver.index] = ctx
            contexts.append(ctx)
        ctx_of.append(ctx)
