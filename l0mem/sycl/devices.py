"""SYCL device listing and filter strings (``level_zero:gpu``, ``opencl:cpu:0``, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from l0mem.sycl._runtime import SyclNoDeviceError, load_dpctl

BACKENDS = ("level_zero", "opencl", "cuda", "hip")
DEVICE_TYPES = ("gpu", "cpu", "accelerator")
_ANY = ("*", "all", "")


@dataclass(frozen=True)
class DeviceFilter:
    """A parsed filter string: None in a field matches anything."""

    backend: str | None
    device_type: str | None
    index: int | None


@dataclass(frozen=True)
class SyclDeviceInfo:
    """What l0mem reports about one SYCL root device."""

    filter_string: str
    backend: str
    device_type: str
    name: str
    vendor: str
    driver_version: str
    platform: str
    global_mem_size: int
    max_work_group_size: int
    max_compute_units: int


def _start(text: str, limit: int = 24) -> str:
    # l0mem.text.excerpt's rule; this layer imports nothing of l0mem.
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_filter(text: str) -> DeviceFilter:
    """Return the parsed form of ``backend[:type[:index]]`` or ``type``; '*' matches anything."""
    if not text.strip():  # "" would match every device: given, it names none
        raise ValueError(
            f"empty SYCL device filter {text!r}: expected backend[:type[:index]], such as "
            "level_zero:gpu:0 or opencl:cpu"
        )
    parts = [p.strip().lower() for p in text.split(":")]
    shown = _start(text, 40)
    if len(parts) > 3:
        raise ValueError(f"bad SYCL device filter {shown!r}: expected backend[:type[:index]]")
    if len(parts) == 1 and parts[0] in DEVICE_TYPES:
        parts = ["*", parts[0]]
    backend = None if parts[0] in _ANY else parts[0]
    if backend is not None and backend not in BACKENDS:
        raise ValueError(
            f"bad SYCL device filter {shown!r}: unknown backend {_start(parts[0])!r} "
            f"(expected one of {', '.join(BACKENDS)} or *)"
        )
    device_type = None
    if len(parts) > 1 and parts[1] not in _ANY:
        if parts[1] not in DEVICE_TYPES:
            raise ValueError(
                f"bad SYCL device filter {shown!r}: unknown device type {_start(parts[1])!r} "
                f"(expected one of {', '.join(DEVICE_TYPES)} or *)"
            )
        device_type = parts[1]
    index = None
    if len(parts) == 3:
        if not parts[2].isdigit():
            raise ValueError(
                f"bad SYCL device filter {shown!r}: index {_start(parts[2])!r} is not a number"
            )
        index = int(parts[2])
    return DeviceFilter(backend, device_type, index)


def _backend_of(device: Any) -> str:
    return str(device.backend.name)


def _type_of(device: Any) -> str:
    return str(device.device_type.name)


def find_devices(filter_text: str | None = None) -> list[Any]:
    """Return the dpctl root devices matching ``filter_text`` (all when None)."""
    dpctl = load_dpctl()
    flt = parse_filter(filter_text) if filter_text is not None else DeviceFilter(None, None, None)
    matching = [
        d
        for d in dpctl.get_devices()
        if (flt.backend is None or _backend_of(d) == flt.backend)
        and (flt.device_type is None or _type_of(d) == flt.device_type)
    ]
    if flt.index is not None:
        return matching[flt.index : flt.index + 1]
    return matching


def resolve_device(spec: Any) -> Any:
    """Return the one dpctl device named by a filter string, or ``spec`` itself if it is a device.

    Raises SyclNoDeviceError when no device matches.
    """
    dpctl = load_dpctl()
    if isinstance(spec, dpctl.SyclDevice):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"expected a filter string or dpctl.SyclDevice, got {type(spec).__name__}")
    found = find_devices(spec)
    if not found:
        raise SyclNoDeviceError(f"no SYCL device matches {spec!r}")
    return found[0]


def describe(device: Any) -> SyclDeviceInfo:
    """Return the :class:`SyclDeviceInfo` of a dpctl root device."""
    return SyclDeviceInfo(
        filter_string=str(device.filter_string),
        backend=_backend_of(device),
        device_type=_type_of(device),
        name=str(device.name).strip(),
        vendor=str(device.vendor),
        driver_version=str(device.driver_version),
        platform=str(device.sycl_platform.name),
        global_mem_size=int(device.global_mem_size),
        max_work_group_size=int(device.max_work_group_size),
        max_compute_units=int(device.max_compute_units),
    )


def devices(filter_text: str | None = None) -> list[SyclDeviceInfo]:
    """Return every SYCL root device matching ``filter_text`` (all when None)."""
    return [describe(d) for d in find_devices(filter_text)]
