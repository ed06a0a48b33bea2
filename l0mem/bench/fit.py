"""Checks that a benchmark's buffers fit the devices and the host before anything is made."""

from __future__ import annotations

from collections.abc import Sequence

from l0mem.backends import Backend, NoDeviceError
from l0mem.probe import mem_available
from l0mem.units import format_bytes


class HostTooSmall(Exception):
    """The request needs more host memory than is available (as a device too small, not a usage error)."""


def check_fits(
    backend: Backend,
    devices: Sequence[int],
    *,
    per_device: int,
    largest: int,
    host: int,
    what: str,
) -> None:
    """Raise NoDeviceError when a device cannot hold ``per_device`` bytes (or one ``largest``
    allocation), HostTooSmall when the host lacks ``host`` bytes plus host-backed device memory."""
    host_need = host
    for d in devices:
        mem = backend.memory(d)
        name = backend.device_name(d)
        if mem.total is not None and per_device > mem.total:
            raise NoDeviceError(
                f"{what} need {format_bytes(per_device, 1)} on device {d} ({name}), "
                f"which has {format_bytes(mem.total, 1)} of memory"
            )
        if mem.max_alloc is not None and largest > mem.max_alloc:
            raise NoDeviceError(
                f"{what} need one allocation of {format_bytes(largest, 1)} on device {d} ({name}), "
                f"larger than its limit of {format_bytes(mem.max_alloc, 1)}"
            )
        if mem.host_backed:
            host_need += per_device
    available = mem_available()
    if host_need > available:
        raise HostTooSmall(
            f"{what} need about {format_bytes(host_need, 1)} of host memory, "
            f"{format_bytes(available, 1)} available"
        )


__all__ = ["HostTooSmall", "check_fits"]
