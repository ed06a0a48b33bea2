"""The device inventory and backend selection: one meaning of a device index everywhere.

A device index is the position of a device in :func:`level_zero_devices`
(every device of every Level Zero driver, drivers in loader order) or in
:func:`sycl_devices` (dpctl's root devices). ``l0mem info`` lists the Level
Zero indices; ``p2p``, ``allreduce`` and ``bench`` select through
:func:`select_devices`, and :func:`open_backend` is what the CLI and library
users call alike.

Errors are library errors: :class:`DeviceSelectionError` (a ValueError) for a
device spec that cannot name a device, :class:`NoDeviceError` (a LookupError)
for a backend or device this machine does not have. Only the CLI maps them to
exit codes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from l0mem.backends.base import Backend

Kind: TypeAlias = Literal["l0", "sycl"]
KINDS = ("auto", "l0", "sycl")
ContextMode: TypeAlias = Literal["default", "single"]

# The calls that initialize Level Zero (l0mem._ze.init): their failure means no usable driver.
_INIT_CALLS = frozenset({"zeInit", "zeInitDrivers"})


class NoDeviceError(LookupError):
    """The backend, or a device asked for, is not available on this machine."""


# What a user without a Level Zero driver can do (Intel's packages; l0mem's simulator).
INSTALL_HINT = (
    "for an Intel GPU install its Level Zero driver (Debian and Ubuntu: libze-intel-gpu1; "
    "elsewhere Intel's compute-runtime release); without one, l0mem demo shows l0mem on its "
    "simulated driver"
)


class DeviceSelectionError(ValueError):
    """A device spec that cannot name a device (malformed, repeated, or for the wrong backend)."""


def _alt_drivers_problem() -> str | None:
    """Return what is wrong with $ZE_ENABLE_ALT_DRIVERS where it names no file, else None."""
    value = os.environ.get("ZE_ENABLE_ALT_DRIVERS")
    if value is None:
        return None
    listed = [p.strip() for p in value.split(",") if p.strip()]
    missing = [p for p in listed if not os.path.isfile(p)]
    if listed and not missing:
        return None
    named = ", ".join(missing) if missing else "no library"
    return (
        f"ZE_ENABLE_ALT_DRIVERS names {named}, and the loader loads only the drivers "
        "listed there: fix or unset it"
    )


def level_zero_devices() -> list[Any]:
    """Return every Level Zero device of every driver, in l0mem's index order; NoDeviceError if none."""
    # core.drivers() asks for Sysman before zeInit, for device-side memory values.
    from l0mem._ze.errors import DeviceLostError, LoaderError, UninitializedError, ZeError
    from l0mem.core import drivers

    try:
        found = drivers()
    except LoaderError as err:
        # The loader's error says what to do about it; a driver comes after.
        raise NoDeviceError(f"no usable Level Zero loader: {err}") from None
    except UninitializedError as err:
        # The routine and the result name are the evidence; the result's explanation
        # only repeats "no driver was found".
        said = f"{err.routine}: {err.name}" if err.routine and err.name else str(err)
        raise NoDeviceError(
            f"no Level Zero driver found ({said}): {_alt_drivers_problem() or INSTALL_HINT}"
        ) from None
    except ZeError as err:
        # A driver that cannot initialize leaves no usable driver; a driver
        # that fails after it did (a lost device listing drivers) is a driver
        # failure, as it is everywhere else, not a missing device.
        if isinstance(err, DeviceLostError) or err.routine not in _INIT_CALLS:
            raise
        raise NoDeviceError(f"Level Zero initialization failed: {err}") from None
    devices = [dev for drv in found for dev in drv.devices()]
    if not devices:
        raise NoDeviceError("no Level Zero device found")
    return devices


def sycl_devices() -> list[Any]:
    """Return dpctl's SYCL root devices in l0mem's index order; NoDeviceError without dpctl or devices."""
    from l0mem.sycl import SyclUnavailableError, load_dpctl, no_device_found

    try:
        dpctl = load_dpctl()
    except SyclUnavailableError as err:
        raise NoDeviceError(str(err)) from None
    devices = list(dpctl.get_devices())
    if not devices:
        raise NoDeviceError(no_device_found())
    return devices


def resolve_kind(kind: str) -> Kind:
    """Return "l0" or "sycl" for ``kind``; "auto" picks Level Zero when a driver has a device."""
    return _resolve(kind)[0]


def _resolve(kind: str) -> tuple[Kind, NoDeviceError | None]:
    """Return the kind for ``kind`` and, where "auto" fell back to SYCL, why Level Zero could not serve."""
    if kind == "l0":
        return "l0", None
    if kind == "sycl":
        return "sycl", None
    if kind != "auto":
        raise DeviceSelectionError(f"unknown backend {kind!r}; known: {', '.join(KINDS)}")
    try:
        level_zero_devices()
    except NoDeviceError as err:
        return "sycl", err
    return "l0", None


def _split(specs: Sequence[int | str | Any]) -> list[int | str | Any]:
    out: list[int | str | Any] = []
    for spec in specs:
        if isinstance(spec, str):
            out.extend(p.strip() for p in spec.split(",") if p.strip())
            if not spec.replace(",", "").strip():  # "", ",", blanks: naming no device
                raise DeviceSelectionError(f"empty device spec {spec!r}: it names no device")
        else:
            out.append(spec)
    return out


def _is_sycl_spec(spec: object) -> bool:
    """Return True for a SYCL filter string or a dpctl device (never a Level Zero spec)."""
    if isinstance(spec, str):
        return not spec.isdigit()
    return type(spec).__module__.startswith("dpctl")


def _index(spec: int | str, count: int, what: str) -> int:
    value = int(spec)
    if isinstance(spec, bool) or value < 0:
        raise DeviceSelectionError(f"bad device index {spec!r}")
    if value >= count:
        raise NoDeviceError(f"no {what} device {value}: this machine has {count} (0..{count - 1})")
    return value


def _select_l0(specs: list[int | str | Any]) -> list[Any]:
    from l0mem.core import Device

    found = level_zero_devices()
    if not specs:
        return found
    chosen: list[Any] = []
    for spec in specs:
        if isinstance(spec, Device):
            dev = spec
        elif isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
            dev = found[_index(spec, len(found), "Level Zero")]
        else:
            raise DeviceSelectionError(
                f"expected a Level Zero device index 0..{len(found) - 1}, got {spec!r}"
            )
        if dev in chosen:
            raise DeviceSelectionError(f"device {spec} given twice")
        chosen.append(dev)
    return chosen


def _select_sycl(specs: list[int | str | Any]) -> list[Any]:
    from l0mem.sycl import find_devices, load_dpctl, parse_filter

    # A malformed filter is the command line's error (a typo), found before any device is.
    for spec in specs:
        if isinstance(spec, str) and not spec.isdigit():
            try:
                parse_filter(spec)
            except ValueError as err:
                raise DeviceSelectionError(str(err)) from None
    found = sycl_devices()
    dpctl = load_dpctl()
    chosen: list[Any] = []
    for spec in specs:
        if isinstance(spec, dpctl.SyclDevice):
            dev = spec
        elif isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
            dev = found[_index(spec, len(found), "SYCL")]
        elif isinstance(spec, str):
            matching = find_devices(spec)
            if not matching:
                raise NoDeviceError(f"no SYCL device matches {spec!r}")
            dev = matching[0]
        else:
            raise DeviceSelectionError(f"not a SYCL device spec: {spec!r}")
        if any(dev == c for c in chosen):
            raise DeviceSelectionError(f"device {spec} given twice")
        chosen.append(dev)
    if chosen:
        return chosen
    # The one default choice, which SyclBackend() without devices makes too.
    from l0mem.backends.sycl_info import default_devices

    try:
        return default_devices()
    except Exception as err:
        raise NoDeviceError(f"no SYCL device found: {err}") from None


def partition(device: Any, parts: int) -> list[Any]:
    """Return ``parts`` equal sub-devices of a SYCL ``device``; NoDeviceError if it cannot be split."""
    if parts < 2:
        raise DeviceSelectionError(f"sub-devices: need at least 2 parts, got {parts}")
    units = int(device.max_compute_units)
    per = units // parts
    name = str(device.name).strip()
    if per < 1:
        raise NoDeviceError(f"{name} has {units} compute units, too few for {parts} sub-devices")
    try:
        return list(device.create_sub_devices(partition=[per] * parts))
    except Exception as err:
        raise NoDeviceError(f"cannot partition {name}: {err}") from None


def _sycl_after_level_zero(specs: list[int | str | Any], l0: NoDeviceError) -> list[Any]:
    """Return the SYCL devices ``specs`` name where "auto" found no Level Zero device (``l0``: why).

    Where SYCL has none either, the one line says both: a user without a driver
    and without dpctl was told only to install dpctl.
    """
    from l0mem.sycl import SyclUnavailableError

    try:
        return _select_sycl(specs)
    except (SyclUnavailableError, NoDeviceError) as err:
        raise NoDeviceError(f"{l0}; SYCL: {err}") from None


def select_devices(
    kind: str, devices: Sequence[int | str | Any] = (), *, sub_devices: int | None = None
) -> tuple[Kind, list[Any]]:
    """Return the backend kind and the devices (core or dpctl objects) that ``devices`` names.

    ``devices`` holds indices (ints or digit strings, comma lists allowed),
    device objects, or for SYCL filter strings (``opencl:cpu``); empty means
    every Level Zero device, or for SYCL
    :func:`l0mem.backends.sycl_info.default_devices` (the Level Zero GPUs,
    else the default SYCL device). ``sub_devices`` (SYCL) splits the one
    selected device.
    """
    specs = _split(devices)
    if kind == "auto" and any(_is_sycl_spec(s) for s in specs):
        kind = "sycl"
    chosen_kind, l0_missing = _resolve(kind)
    if chosen_kind == "l0":
        if sub_devices is not None:
            raise DeviceSelectionError("sub-devices apply to the SYCL backend only")
        return chosen_kind, _select_l0(specs)
    chosen = (
        _select_sycl(specs) if l0_missing is None else _sycl_after_level_zero(specs, l0_missing)
    )
    if sub_devices is None:
        return chosen_kind, chosen
    if len(chosen) != 1:
        raise DeviceSelectionError("sub-devices partition one device: select exactly one")
    return chosen_kind, partition(chosen[0], sub_devices)


def open_backend(
    kind: str = "auto",
    devices: Sequence[int | str | Any] = (),
    *,
    context: ContextMode = "default",
    sub_devices: int | None = None,
    profiling: bool = True,
) -> Backend:
    """Return an open backend over the devices named (see :func:`select_devices`).

    ``context="default"`` is the layout the runtimes use by default (Level
    Zero: one context per driver over the selected devices; SYCL: the context
    a plain ``sycl::queue(device)`` gets); ``"single"`` gives every device a
    context of its own. ``profiling`` (SYCL) records device timestamps.
    """
    if context not in ("default", "single"):
        raise DeviceSelectionError(f"context must be 'default' or 'single', got {context!r}")
    chosen_kind, chosen = select_devices(kind, devices, sub_devices=sub_devices)
    if chosen_kind == "l0":
        from l0mem.backends.levelzero import LevelZeroBackend

        return LevelZeroBackend(chosen, context="multi" if context == "default" else "single")
    from l0mem.backends.sycl import SyclBackend
    from l0mem.sycl import SyclNoDeviceError

    try:
        return SyclBackend(chosen, context=context, profiling=profiling)
    except SyclNoDeviceError as err:
        raise NoDeviceError(str(err)) from None


__all__ = [
    "KINDS",
    "ContextMode",
    "DeviceSelectionError",
    "Kind",
    "NoDeviceError",
    "level_zero_devices",
    "open_backend",
    "partition",
    "resolve_kind",
    "select_devices",
    "sycl_devices",
]
