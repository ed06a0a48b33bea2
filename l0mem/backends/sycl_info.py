"""What the SYCL backend knows about dpctl devices: the default choice, names, memory, peers, contexts, queues.

:func:`default_devices` is the one default choice of SYCL devices:
``SyclBackend()`` without devices and :func:`l0mem.backends.select_devices`
with none named both use it. :func:`direct_copy_hazard` names the direct
copies known to hang.

What it may import: dpctl through :mod:`l0mem.sycl`; :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from l0mem.backends.base import DeviceMemory, PeerAccess, is_simulator_name
from l0mem.sycl import load_dpctl


def default_devices() -> list[Any]:
    """Return the SYCL devices used when none is named: every Level Zero GPU, else dpctl's default.

    dpctl raises its ``SyclDeviceCreationError`` when there is no device at all.
    """
    dpctl = load_dpctl()
    gpus = [d for d in dpctl.get_devices() if d.backend.name == "level_zero" and d.is_gpu]
    return gpus or [dpctl.select_default_device()]


def device_name(device: Any) -> str:
    """Return the device's name with its filter string (or its parent's, for a sub-device)."""
    try:
        where = str(device.filter_string)
    except ValueError:
        where = f"sub-device of {device.parent_device.filter_string}"
    return f"{str(device.name).strip()} [{where}]"


def device_memory(device: Any) -> DeviceMemory:
    """Return the device's global memory and largest allocation (SYCL cannot tell free bytes)."""
    return DeviceMemory(
        total=int(device.global_mem_size) or None,
        max_alloc=int(device.max_mem_alloc_size) or None,
        free=None,
        host_backed=bool(device.is_cpu) or is_simulator_name(str(device.name)),
    )


def peer_access(src: int, dst: int, a: Any, b: Any) -> PeerAccess:
    """Return what ``ext_oneapi_can_access_peer`` reports for devices ``a`` (index ``src``) and ``b``."""
    if src == dst or a == b:
        return PeerAccess(src, dst, True, True)
    try:
        return PeerAccess(
            src,
            dst,
            bool(a.can_access_peer(b, value="access_supported")),
            bool(a.can_access_peer(b, value="atomics_supported")),
        )
    except Exception:
        # A runtime without the extension cannot say.
        return PeerAccess(src, dst, None, None)


def default_context(device: Any) -> Any:
    """Return the context a plain ``sycl::queue(device)`` would use."""
    platform_ctx = device.sycl_platform.default_context
    if any(d == device for d in platform_ctx.get_devices()):
        return platform_ctx
    # Sub-devices are not in the platform's default context.
    return load_dpctl().SyclQueue(device).sycl_context


def open_queues(
    devices: Sequence[Any], context: Literal["default", "single"], profiling: bool
) -> tuple[list[Any], list[Any]]:
    """Return (context, in-order queue) per device: ``default`` contexts, or one new one each."""
    dpctl = load_dpctl()
    props = ["in_order", "enable_profiling"] if profiling else ["in_order"]
    contexts, queues = [], []
    for dev in devices:
        # A list argument makes dpctl build a new context instead of
        # returning its cached per-device (platform default) one.
        ctx = default_context(dev) if context == "default" else dpctl.SyclContext([dev])
        contexts.append(ctx)
        queues.append(dpctl.SyclQueue(ctx, dev, property=props))
    return contexts, queues


def direct_copy_hazard(src: Any, dst: Any) -> bool:
    """Return True when a direct copy between these dpctl devices is known to hang (CPU sub-devices).

    One context over two CPU sub-devices of the pinned 2025.3 OpenCL CPU
    runtime: a device-to-device ``memcpy`` of device USM hangs in most runs;
    tests/test_p2p_sycl_shared.py records whether it still does.
    """
    if src == dst:
        return False
    try:
        cpu = bool(src.is_cpu) and bool(dst.is_cpu)
        sub = src.parent_device is not None or dst.parent_device is not None
    except Exception:
        return False
    return cpu and sub
