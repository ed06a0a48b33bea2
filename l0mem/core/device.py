"""Level Zero devices: properties, peer access, PCI location and Sysman memory."""

from __future__ import annotations

import ctypes
import os
import threading
from typing import TYPE_CHECKING

from l0mem._ze import api
from l0mem._ze.enums import (
    ze_command_queue_group_property_flag_t,
    ze_external_memory_type_flag_t,
)
from l0mem._ze.errors import (
    DependencyUnavailableError,
    MissingFunctionError,
    NotAvailableError,
    UninitializedError,
    UnsupportedFeatureError,
)
from l0mem._ze.scalars import ze_bool_t, ze_device_handle_t, zes_mem_handle_t
from l0mem._ze.structs import (
    ze_command_queue_group_properties_t,
    ze_device_compute_properties_t,
    ze_device_external_memory_properties_t,
    ze_device_memory_properties_t,
    ze_device_p2p_bandwidth_exp_properties_t,
    ze_device_p2p_properties_t,
    ze_device_properties_t,
    ze_pci_ext_properties_t,
    zes_mem_properties_t,
    zes_mem_state_t,
    zes_pci_properties_t,
)
from l0mem.core import _raw
from l0mem.core.device_props import (
    ComputeProperties,
    DeviceProperties,
    MemoryProperties,
    MemoryState,
    P2PProperties,
)

if TYPE_CHECKING:
    from l0mem.core.driver import Driver

_GROUP_FLAG = ze_command_queue_group_property_flag_t
_QUEUE_GROUP_COMPUTE = _GROUP_FLAG.ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE
_QUEUE_GROUP_COPY = _GROUP_FLAG.ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY

SYSFS_PCI = "/sys/bus/pci/devices"

# What a driver says when an optional query (PCI extension, Sysman) is not offered;
# anything else, such as a lost device, is a real failure and propagates.
_UNAVAILABLE = (
    MissingFunctionError,
    UninitializedError,
    UnsupportedFeatureError,
    NotAvailableError,
    DependencyUnavailableError,
)


class Device:
    """A root device or sub-device of a driver."""

    def __init__(
        self, driver: Driver, handle: int, index: int, parent: Device | None = None
    ) -> None:
        """Wrap a device handle (use Driver.devices or Device.sub_devices)."""
        self._driver = driver
        self._handle = handle
        self.index = index
        self.parent = parent
        self._props: DeviceProperties | None = None
        self._subs: list[Device] | None = None
        self._lock = threading.Lock()
        self._ordinals: tuple[int, int] | None = None
        # Why the last sysman_memory() returned None (None when it did not).
        self.sysman_unavailable: str | None = None

    @property
    def handle(self) -> int:
        """Return the raw ``ze_device_handle_t``."""
        return self._handle

    @property
    def driver(self) -> Driver:
        """Return the driver this device belongs to."""
        return self._driver

    @property
    def properties(self) -> DeviceProperties:
        """Return the device's core properties (queried once)."""
        if self._props is None:
            p = ze_device_properties_t()
            _raw.call(api().zeDeviceGetProperties, self._handle, ctypes.byref(p))
            self._props = DeviceProperties.from_c(p)
        return self._props

    @property
    def name(self) -> str:
        """Return the device name."""
        return self.properties.name

    @property
    def type(self) -> str:
        """Return the device type ("GPU", "CPU", ...)."""
        return self.properties.type

    @property
    def vendor_id(self) -> int:
        """Return the PCI vendor id."""
        return self.properties.vendor_id

    @property
    def device_id(self) -> int:
        """Return the PCI device id."""
        return self.properties.device_id

    @property
    def uuid(self) -> str:
        """Return the device UUID as a string."""
        return self.properties.uuid

    def memory_properties(self) -> list[MemoryProperties]:
        """Return each memory the device reports."""
        query = api().zeDeviceGetMemoryProperties
        count = ctypes.c_uint32(0)
        _raw.call(query, self._handle, ctypes.byref(count), None)
        arr = _raw.struct_array(ze_device_memory_properties_t, count.value)
        _raw.call(query, self._handle, ctypes.byref(count), arr)
        return [MemoryProperties.from_c(m) for m in arr[: count.value]]

    @property
    def total_memory(self) -> int:
        """Return the device memory in bytes (sum over its memories)."""
        return sum(m.total_size for m in self.memory_properties())

    @property
    def compute_properties(self) -> ComputeProperties:
        """Return the device's work-group limits."""
        p = ze_device_compute_properties_t()
        _raw.call(api().zeDeviceGetComputeProperties, self._handle, ctypes.byref(p))
        return ComputeProperties.from_c(p)

    @property
    def pci_address(self) -> str | None:
        """Return the PCI address "DDDD:BB:DD.F", or None when the driver cannot tell.

        Asks the PCI properties extension (``zeDevicePciGetPropertiesExt``)
        and, where the loader or driver lacks it, Sysman's
        ``zesDevicePciGetProperties`` (which needs ZES_ENABLE_SYSMAN=1 at init).
        """
        ext = ze_pci_ext_properties_t()
        try:
            _raw.call(api().zeDevicePciGetPropertiesExt, self._handle, ctypes.byref(ext))
            a = ext.address
        except _UNAVAILABLE:
            zes = zes_pci_properties_t()
            try:
                _raw.call(api().zesDevicePciGetProperties, self._handle, ctypes.byref(zes))
            except _UNAVAILABLE:
                return None
            a = zes.address
        return f"{int(a.domain):04x}:{int(a.bus):02x}:{int(a.device):02x}.{int(a.function):x}"

    @property
    def kernel_driver(self) -> str | None:
        """Return the Linux kernel driver bound to the device (xe, i915), or None."""
        return kernel_driver_of(
            self.pci_address, SYSFS_PCI, vendor_id=self.vendor_id, device_id=self.device_id
        )

    def sub_devices(self) -> list[Device]:
        """Return the device's sub-devices (tiles); empty when it has none."""
        with self._lock:
            if self._subs is None:
                query = api().zeDeviceGetSubDevices
                count = ctypes.c_uint32(0)
                _raw.call(query, self._handle, ctypes.byref(count), None)
                arr = _raw.handles(ze_device_handle_t, count.value)
                if count.value:
                    _raw.call(query, self._handle, ctypes.byref(count), arr)
                self._subs = [
                    Device(self._driver, _raw.address(arr[i]), i, parent=self)
                    for i in range(count.value)
                ]
            return list(self._subs)

    def can_access_peer(self, other: Device) -> bool:
        """Return True when this device can access memory of ``other`` directly."""
        value = ze_bool_t(0)
        _raw.call(api().zeDeviceCanAccessPeer, self._handle, other.handle, ctypes.byref(value))
        return bool(value.value)

    def p2p_properties(self, other: Device) -> P2PProperties:
        """Return peer flags towards ``other`` and the bandwidth where the driver reports it."""
        p = ze_device_p2p_properties_t()
        bw = None
        if "ZE_experimental_bandwidth_properties" in self._driver.extensions():
            bw = ze_device_p2p_bandwidth_exp_properties_t()
            p.pNext = ctypes.cast(ctypes.pointer(bw), ctypes.c_void_p)
        _raw.call(api().zeDeviceGetP2PProperties, self._handle, other.handle, ctypes.byref(p))
        return P2PProperties.from_c(p, bw)

    @property
    def external_memory_export_types(self) -> int:
        """Return the ``ze_external_memory_type_flags_t`` the device can export allocations as."""
        p = ze_device_external_memory_properties_t()
        _raw.call(api().zeDeviceGetExternalMemoryProperties, self._handle, ctypes.byref(p))
        return int(p.memoryAllocationExportTypes)

    @property
    def supports_dmabuf_export(self) -> bool:
        """Return True when device allocations can be exported as dma-buf file descriptors."""
        dma_buf = ze_external_memory_type_flag_t.ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF
        return bool(self.external_memory_export_types & dma_buf)

    def sysman_memory(self) -> list[MemoryState] | None:
        """Return Sysman's view of the device's memory modules, or None without Sysman.

        Sysman answers only when ``ZES_ENABLE_SYSMAN=1`` was set at the
        process's first ``zeInit``; :func:`l0mem.core.drivers` sets it unless
        the environment already says otherwise. On None, ``sysman_unavailable``
        says why.
        """
        lib = api()
        count = ctypes.c_uint32(0)
        try:
            _raw.call(lib.zesDeviceEnumMemoryModules, self._handle, ctypes.byref(count), None)
        except _UNAVAILABLE as err:
            self.sysman_unavailable = _sysman_reason(err)
            return None
        self.sysman_unavailable = None
        arr = _raw.handles(zes_mem_handle_t, count.value)
        if count.value:
            _raw.call(lib.zesDeviceEnumMemoryModules, self._handle, ctypes.byref(count), arr)
        states = []
        for i in range(count.value):
            props = zes_mem_properties_t()
            _raw.call(lib.zesMemoryGetProperties, _raw.address(arr[i]), ctypes.byref(props))
            state = zes_mem_state_t()
            _raw.call(lib.zesMemoryGetState, _raw.address(arr[i]), ctypes.byref(state))
            states.append(MemoryState.from_c(props, state))
        return states

    def queue_group_ordinals(self) -> tuple[int, int]:
        """Return (compute ordinal, copy ordinal) of the device's command queue groups."""
        if self._ordinals is None:
            query = api().zeDeviceGetCommandQueueGroupProperties
            count = ctypes.c_uint32(0)
            _raw.call(query, self._handle, ctypes.byref(count), None)
            arr = _raw.struct_array(ze_command_queue_group_properties_t, count.value)
            _raw.call(query, self._handle, ctypes.byref(count), arr)
            flags = [int(arr[i].flags) for i in range(count.value)]
            compute = next((i for i, f in enumerate(flags) if f & _QUEUE_GROUP_COMPUTE), 0)
            copy = next(
                (
                    i
                    for i, f in enumerate(flags)
                    if f & _QUEUE_GROUP_COPY and not f & _QUEUE_GROUP_COMPUTE
                ),
                compute,
            )
            self._ordinals = (compute, copy)
        return self._ordinals

    def __eq__(self, other: object) -> bool:
        """Return True when both wrap the same device handle."""
        return isinstance(other, Device) and other.handle == self._handle

    def __hash__(self) -> int:
        """Return the hash of the device handle."""
        return hash(self._handle)

    def __repr__(self) -> str:
        """Return a short description for debugging."""
        if self.parent is not None:
            return f"<Device {self.parent.index}.{self.index}: {self.name} (sub-device)>"
        return f"<Device {self.index}: {self.name}>"


def _sysman_reason(err: Exception) -> str:
    """Return one line saying why Sysman did not answer."""
    from l0mem.core.driver import sysman_env_at_init

    value = sysman_env_at_init()
    if value is None:
        setting = "Level Zero was initialized outside l0mem.core.drivers()"
    else:
        setting = f"ZES_ENABLE_SYSMAN was {value!r} at zeInit"
    return f"Sysman is unavailable ({err}); it needs ZES_ENABLE_SYSMAN=1 at zeInit: {setting}"


def kernel_driver_of(
    pci_address: str | None,
    sysfs: str = SYSFS_PCI,
    *,
    vendor_id: int | None = None,
    device_id: int | None = None,
) -> str | None:
    """Return the kernel driver bound to a PCI address in sysfs, or None.

    With ``vendor_id``/``device_id`` the sysfs entry must carry the same ids,
    so a driver reporting an address that belongs to another card (or a
    simulated one) is not credited with that card's kernel driver.
    """
    if not pci_address:
        return None
    entry = os.path.join(sysfs, pci_address)
    for name, want in (("vendor", vendor_id), ("device", device_id)):
        if want is None:
            continue
        try:
            with open(os.path.join(entry, name)) as f:
                if int(f.read().strip(), 16) != want:
                    return None
        except (OSError, ValueError):
            return None
    try:
        return os.path.basename(os.readlink(os.path.join(entry, "driver")))
    except OSError:
        return None
