"""Level Zero drivers: initialization, properties and extensions.

Driver version decoding. ``ze_driver_properties_t.driverVersion`` is an opaque
32-bit number per the specification. Intel's compute-runtime packs it as
``major << 24 | minor << 16 | build & 0xFFFF``
(``DriverHandleImp::getProperties`` in compute-runtime's
``level_zero/core/source/driver/driver_handle_imp.cpp``), where major.minor is
the runtime's Level Zero component version (for example 1.6) and build the
NEO build number (30508 for release 24.31.30508), truncated to 16 bits. The
SYCL runtime's Level Zero adapter decodes it the same way
(``ur_platform_handle_t_::initialize`` in unified-runtime), so the string
matches what ``sycl-ls`` prints. Other vendors' drivers are decoded the same
way for display only; the raw integer is always kept.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from l0mem._ze import api, init
from l0mem._ze.scalars import ze_device_handle_t
from l0mem._ze.structs import ze_driver_extension_properties_t, ze_driver_properties_t
from l0mem.core import _raw

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device


def decode_driver_version(raw: int) -> str:
    """Return ``major.minor.build`` decoded the way Intel's compute-runtime packs it."""
    if not 0 <= raw <= 0xFFFFFFFF:
        raise ValueError(f"driver version {raw} is not a 32-bit unsigned value")
    return f"{(raw >> 24) & 0xFF}.{(raw >> 16) & 0xFF}.{raw & 0xFFFF}"


@dataclass(frozen=True)
class DriverProperties:
    """What a driver reports about itself."""

    driver_version: int
    version: str
    uuid: str
    api_version: tuple[int, int]


class Driver:
    """One Level Zero driver (one per installed runtime, e.g. Intel's GPU runtime)."""

    def __init__(self, handle: int, index: int) -> None:
        """Wrap a driver handle (use drivers())."""
        self._handle = handle
        self.index = index
        self._devices: list[Device] | None = None
        self._lock = threading.Lock()

    @property
    def handle(self) -> int:
        """Return the raw ``ze_driver_handle_t``."""
        return self._handle

    @property
    def properties(self) -> DriverProperties:
        """Return the driver's version, UUID and supported API version."""
        props = ze_driver_properties_t()
        _raw.call(api().zeDriverGetProperties, self._handle, ctypes.byref(props))
        api_version = ctypes.c_uint32(0)
        _raw.call(api().zeDriverGetApiVersion, self._handle, ctypes.byref(api_version))
        # Split as the header's ZE_MAJOR_VERSION / ZE_MINOR_VERSION macros do (no enum for it).
        v = int(api_version.value)
        return DriverProperties(
            driver_version=int(props.driverVersion),
            version=decode_driver_version(int(props.driverVersion)),
            uuid=_raw.uuid_str(props.uuid.id),
            api_version=(v >> 16, v & 0xFFFF),
        )

    def devices(self) -> list[Device]:
        """Return the driver's root devices (the same objects on every call)."""
        from l0mem.core.device import Device

        with self._lock:
            if self._devices is None:
                count = ctypes.c_uint32(0)
                _raw.call(api().zeDeviceGet, self._handle, ctypes.byref(count), None)
                arr = _raw.handles(ze_device_handle_t, count.value)
                _raw.call(api().zeDeviceGet, self._handle, ctypes.byref(count), arr)
                self._devices = [Device(self, _raw.address(arr[i]), i) for i in range(count.value)]
            return list(self._devices)

    def extensions(self) -> dict[str, int]:
        """Return the driver's extensions as name -> version."""
        query = api().zeDriverGetExtensionProperties
        count = ctypes.c_uint32(0)
        _raw.call(query, self._handle, ctypes.byref(count), None)
        arr = _raw.struct_array(ze_driver_extension_properties_t, count.value)
        _raw.call(query, self._handle, ctypes.byref(count), arr)
        return {_raw.cstr(arr[i].name): int(arr[i].version) for i in range(count.value)}

    def create_context(self, devices: Sequence[Device] | None = None) -> Context:
        """Return a new context over ``devices`` (default: all of this driver's devices)."""
        from l0mem.core.context import Context

        return Context(self, list(devices) if devices is not None else self.devices())

    def __repr__(self) -> str:
        """Return a short description for debugging."""
        return f"<Driver {self.index}>"


_lock = threading.Lock()
_drivers: list[Driver] | None = None
_sysman_env: str | None = None


def drivers() -> list[Driver]:
    """Return every Level Zero driver, initializing Level Zero on the first call.

    Before that first initialization, ``ZES_ENABLE_SYSMAN`` is set to 1 unless
    the environment already sets it: Level Zero enables Sysman (device memory
    state, the PCI fallback) only when it is set at ``zeInit``.
    """
    global _drivers, _sysman_env
    with _lock:
        if _drivers is None:
            _sysman_env = os.environ.setdefault("ZES_ENABLE_SYSMAN", "1")
            _drivers = [Driver(_raw.address(h), i) for i, h in enumerate(init())]
        return list(_drivers)


def sysman_env_at_init() -> str | None:
    """Return ZES_ENABLE_SYSMAN as drivers() initialized Level Zero ("" if unset), else None."""
    return _sysman_env
