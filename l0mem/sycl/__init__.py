"""The SYCL runtime as l0mem reaches it: loading dpctl (optional) and naming devices.

What it may import: nothing of l0mem (dpctl, lazily, and the standard
library). The SYCL backend built on it lives in ``backends.sycl``.

Importing this package needs nothing beyond l0mem itself; the first call that
needs the SYCL runtime imports dpctl and raises :class:`SyclUnavailableError`
(with the ``pip install 'l0mem[sycl]'`` hint) when it is missing; a request no
SYCL device can serve raises :class:`SyclNoDeviceError` (a LookupError). When
``OCL_ICD_FILENAMES`` is unset and the environment ships the OpenCL CPU runtime
(``<sys.prefix>/lib/libintelocl.so``), it is pointed there first so that the CPU
device appears when running from a virtual environment.
"""

from l0mem.sycl._runtime import (
    INSTALL_HINT,
    SyclNoDeviceError,
    SyclUnavailableError,
    load_dpctl,
    no_device_found,
)
from l0mem.sycl.devices import (
    DeviceFilter,
    SyclDeviceInfo,
    describe,
    devices,
    find_devices,
    parse_filter,
    resolve_device,
)

__all__ = [
    "INSTALL_HINT",
    "DeviceFilter",
    "SyclDeviceInfo",
    "SyclNoDeviceError",
    "SyclUnavailableError",
    "describe",
    "devices",
    "find_devices",
    "load_dpctl",
    "no_device_found",
    "parse_filter",
    "resolve_device",
]
