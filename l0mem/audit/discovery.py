"""Device discovery in the audit's child process: the Level Zero and SYCL inventories as JSON data.

:func:`discover_l0` lists the devices of :func:`l0mem.backends.level_zero_devices`
in its order, so a device's ``index`` is the one ``l0mem info`` shows and
every command's ``--device`` takes, and describes each device's memory with
:func:`l0mem.backends.device_memory` (``host_backed`` included): the audit has
no inventory or memory rule of its own. :func:`discover_sycl` lists dpctl's
root devices matching a filter string. Both report a failure in ``error``
instead of raising: the parent plans around a missing runtime.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

SYCL_PACKAGES = ("dpctl", "intel-sycl-rt", "intel-cmplr-lib-ur", "intel-opencl-rt")


def one_line(exc: BaseException) -> str:
    """Return ``exc`` as one line for the protocol and the report: l0mem's errors by their words, others ``TypeName: message``."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    # l0mem's own errors name what failed (a driver's: the call, the result, what it
    # means); their class adds nothing a user can act on. Another library's may.
    if type(exc).__module__.startswith("l0mem."):
        return text
    return f"{type(exc).__name__}: {text}"


def discover_l0() -> dict[str, Any]:
    """Return the Level Zero loader, drivers and devices as JSON data (``error`` set on failure)."""
    from l0mem._ze import init_path, loader_path, loader_versions
    from l0mem._ze.errors import LoaderError, ZeError
    from l0mem.backends import NoDeviceError, device_memory, level_zero_devices
    from l0mem.core import drivers
    from l0mem.probe.fingerprint import kernel_module_version

    alt = [p for p in os.environ.get("ZE_ENABLE_ALT_DRIVERS", "").split(",") if p.strip()]
    out: dict[str, Any] = {"error": None, "devices": [], "drivers": [], "alt_drivers": alt}
    try:
        flat = level_zero_devices()
    except NoDeviceError as exc:
        out["error"] = str(exc)
        flat = []
    try:
        # Initialized already, unless the loader or zeInit failed (then "error" says
        # why); drivers that list no device are still worth recording.
        found = drivers()
    except (LoaderError, ZeError):
        return out
    out["loader"] = {
        "path": loader_path(),
        "components": [{"name": n, "version": ".".join(map(str, v))} for n, v in loader_versions()],
        "init_path": init_path(),
    }
    for drv in found:
        props = drv.properties
        out["drivers"].append(
            {
                "index": drv.index,
                "version": props.version,
                "driver_version": props.driver_version,
                "api_version": f"{props.api_version[0]}.{props.api_version[1]}",
                "uuid": props.uuid,
            }
        )
    for i, dev in enumerate(flat):
        kd = dev.kernel_driver
        mem = device_memory(dev)
        try:
            dmabuf = dev.supports_dmabuf_export
        except ZeError:
            dmabuf = False
        out["devices"].append(
            {
                "index": i,
                "driver": dev.driver.index,
                "driver_version": dev.driver.properties.version,
                "name": dev.name,
                "type": dev.type,
                "pci_id": f"{dev.vendor_id:04x}:{dev.device_id:04x}",
                "pci_address": dev.pci_address,
                "uuid": dev.uuid,
                "memory_bytes": mem.total,
                "max_alloc_bytes": mem.max_alloc,
                "free_bytes": mem.free,
                "host_backed": mem.host_backed,
                "integrated": dev.properties.integrated,
                "kernel_driver": kd,
                "kernel_driver_version": kernel_module_version(kd) if kd else None,
                "dmabuf_export": dmabuf,
                # Peer access exists within a driver only: a context holds one driver's devices.
                "peer_access": [
                    j
                    for j, other in enumerate(flat)
                    if other is not dev
                    and other.driver is dev.driver
                    and dev.can_access_peer(other)
                ],
            }
        )
    return out


def discover_sycl(filter_text: str | None) -> dict[str, Any]:
    """Return the SYCL runtime versions and devices (matching ``filter_text``) as JSON data."""
    out: dict[str, Any] = {"error": None, "devices": [], "runtime": {}}
    for pkg in SYCL_PACKAGES:
        try:
            out["runtime"][pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            continue
    from l0mem.sycl import SyclUnavailableError

    try:
        from l0mem.backends.sycl_info import default_devices, device_memory
        from l0mem.sycl import describe, find_devices, no_device_found

        found = find_devices(filter_text)
        if not found and not find_devices():
            # dpctl lists nothing at all (its default device would fail to be made): say why.
            out["error"] = no_device_found()
            return out
        defaults = [] if filter_text else default_devices()
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    except SyclUnavailableError as exc:  # l0mem's own: its words say what to do
        out["error"] = " ".join(str(exc).split())
        return out
    except Exception as exc:
        out["error"] = f"SYCL unavailable: {one_line(exc)}"
        return out
    for dev in found:
        info = describe(dev)
        out["devices"].append(
            {
                "filter_string": info.filter_string,
                "name": info.name,
                "backend": info.backend,
                "device_type": info.device_type,
                "vendor": info.vendor,
                "driver_version": info.driver_version,
                "platform": info.platform,
                "platform_version": str(dev.sycl_platform.version),
                "global_mem_size": info.global_mem_size,
                "max_mem_alloc_size": int(dev.max_mem_alloc_size),
                "host_backed": device_memory(dev).host_backed,
                # The device SyclBackend() and select_devices() take when none is named.
                "default": any(dev == d for d in defaults),
            }
        )
    if not out["devices"]:
        out["error"] = (
            f"no SYCL device matches {filter_text!r}" if filter_text else "no SYCL device found"
        )
    return out


__all__ = ["SYCL_PACKAGES", "discover_l0", "discover_sycl", "one_line"]
