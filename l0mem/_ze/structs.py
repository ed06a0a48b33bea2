"""Level Zero structs as ctypes Structures with C field names, sizes and offsets.

Transcribed from the Level Zero 1.4 headers (ze_api.h, zes_api.h, loader/ze_loader.h);
tests/test_ze_layout.py checks every value and layout against them with a C compiler.
"""

from __future__ import annotations

from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, ClassVar

from l0mem._ze import enums as E
from l0mem._ze.scalars import (
    ZE_MAX_DEVICE_NAME,
    ZE_MAX_DEVICE_UUID_SIZE,
    ZE_MAX_DRIVER_UUID_SIZE,
    ZE_MAX_EXTENSION_NAME,
    ZE_MAX_IPC_HANDLE_SIZE,
    ZE_MAX_KERNEL_UUID_SIZE,
    ZE_MAX_MODULE_UUID_SIZE,
    ZE_MAX_NATIVE_KERNEL_UUID_SIZE,
    ZE_SUBGROUPSIZE_COUNT,
    ZEL_COMPONENT_STRING_SIZE,
    ZES_STRING_PROPERTY_SIZE,
    ze_bool_t,
)


class Struct(Structure):
    """Base of every Level Zero struct: presets ``stype`` so an instance is ready to pass."""

    _stype_: ClassVar[int | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Zero-fill the struct, preset ``stype`` (also of embedded structs), then apply arguments."""
        super().__init__()
        _preset_stypes(self)
        if args or kwargs:
            # Applied after presetting so explicit values (including stype) win.
            Structure.__init__(self, *args, **kwargs)

    def __repr__(self) -> str:
        """Return the struct name and its scalar fields."""
        parts = []
        for name, *_ in self._fields_:
            value = getattr(self, name)
            if isinstance(value, (int, bytes)) or value is None:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


# Per struct class: the names of its fields that are structs themselves (found once).
_EMBEDDED: dict[type, tuple[str, ...]] = {}


def _preset_stypes(obj: Struct) -> None:
    """Set ``stype`` of ``obj`` and of every struct embedded in it by value."""
    cls = type(obj)
    if cls._stype_ is not None:
        obj.stype = cls._stype_
    names = _EMBEDDED.get(cls)
    if names is None:
        names = _EMBEDDED[cls] = tuple(
            name
            for name, ftype, *_ in cls._fields_
            if isinstance(ftype, type) and issubclass(ftype, Struct)
        )
    for name in names:
        _preset_stypes(getattr(obj, name))


class ze_driver_uuid_t(Struct):
    """C struct ze_driver_uuid_t (ze_api.h)."""

    _fields_ = [
        ("id", c_uint8 * ZE_MAX_DRIVER_UUID_SIZE),
    ]


class ze_driver_properties_t(Struct):
    """C struct ze_driver_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("uuid", ze_driver_uuid_t),
        ("driverVersion", c_uint32),
    ]


class ze_driver_extension_properties_t(Struct):
    """C struct ze_driver_extension_properties_t (ze_api.h)."""

    _fields_ = [
        ("name", c_char * ZE_MAX_EXTENSION_NAME),
        ("version", c_uint32),
    ]


class ze_driver_ipc_properties_t(Struct):
    """C struct ze_driver_ipc_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_device_uuid_t(Struct):
    """C struct ze_device_uuid_t (ze_api.h)."""

    _fields_ = [
        ("id", c_uint8 * ZE_MAX_DEVICE_UUID_SIZE),
    ]


class ze_device_properties_t(Struct):
    """C struct ze_device_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("type", c_int32),
        ("vendorId", c_uint32),
        ("deviceId", c_uint32),
        ("flags", c_uint32),
        ("subdeviceId", c_uint32),
        ("coreClockRate", c_uint32),
        ("maxMemAllocSize", c_uint64),
        ("maxHardwareContexts", c_uint32),
        ("maxCommandQueuePriority", c_uint32),
        ("numThreadsPerEU", c_uint32),
        ("physicalEUSimdWidth", c_uint32),
        ("numEUsPerSubslice", c_uint32),
        ("numSubslicesPerSlice", c_uint32),
        ("numSlices", c_uint32),
        ("timerResolution", c_uint64),
        ("timestampValidBits", c_uint32),
        ("kernelTimestampValidBits", c_uint32),
        ("uuid", ze_device_uuid_t),
        ("name", c_char * ZE_MAX_DEVICE_NAME),
    ]


class ze_device_compute_properties_t(Struct):
    """C struct ze_device_compute_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("maxTotalGroupSize", c_uint32),
        ("maxGroupSizeX", c_uint32),
        ("maxGroupSizeY", c_uint32),
        ("maxGroupSizeZ", c_uint32),
        ("maxGroupCountX", c_uint32),
        ("maxGroupCountY", c_uint32),
        ("maxGroupCountZ", c_uint32),
        ("maxSharedLocalMemory", c_uint32),
        ("numSubGroupSizes", c_uint32),
        ("subGroupSizes", c_uint32 * ZE_SUBGROUPSIZE_COUNT),
    ]


class ze_device_memory_properties_t(Struct):
    """C struct ze_device_memory_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("maxClockRate", c_uint32),
        ("maxBusWidth", c_uint32),
        ("totalSize", c_uint64),
        ("name", c_char * ZE_MAX_DEVICE_NAME),
    ]


class ze_device_memory_access_properties_t(Struct):
    """C struct ze_device_memory_access_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_MEMORY_ACCESS_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("hostAllocCapabilities", c_uint32),
        ("deviceAllocCapabilities", c_uint32),
        ("sharedSingleDeviceAllocCapabilities", c_uint32),
        ("sharedCrossDeviceAllocCapabilities", c_uint32),
        ("sharedSystemAllocCapabilities", c_uint32),
    ]


class ze_command_queue_group_properties_t(Struct):
    """C struct ze_command_queue_group_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("maxMemoryFillPatternSize", c_size_t),
        ("numQueues", c_uint32),
    ]


class ze_device_external_memory_properties_t(Struct):
    """C struct ze_device_external_memory_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_EXTERNAL_MEMORY_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("memoryAllocationImportTypes", c_uint32),
        ("memoryAllocationExportTypes", c_uint32),
        ("imageImportTypes", c_uint32),
        ("imageExportTypes", c_uint32),
    ]


class ze_device_p2p_properties_t(Struct):
    """C struct ze_device_p2p_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_P2P_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_device_p2p_bandwidth_exp_properties_t(Struct):
    """C struct ze_device_p2p_bandwidth_exp_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("logicalBandwidth", c_uint32),
        ("physicalBandwidth", c_uint32),
        ("bandwidthUnit", c_int32),
        ("logicalLatency", c_uint32),
        ("physicalLatency", c_uint32),
        ("latencyUnit", c_int32),
    ]


class ze_pci_address_ext_t(Struct):
    """C struct ze_pci_address_ext_t (ze_api.h)."""

    _fields_ = [
        ("domain", c_uint32),
        ("bus", c_uint32),
        ("device", c_uint32),
        ("function", c_uint32),
    ]


class ze_pci_speed_ext_t(Struct):
    """C struct ze_pci_speed_ext_t (ze_api.h)."""

    _fields_ = [
        ("genVersion", c_int32),
        ("width", c_int32),
        ("maxBandwidth", c_int64),
    ]


class ze_pci_ext_properties_t(Struct):
    """C struct ze_pci_ext_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("address", ze_pci_address_ext_t),
        ("maxSpeed", ze_pci_speed_ext_t),
    ]


class ze_context_desc_t(Struct):
    """C struct ze_context_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_CONTEXT_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_device_mem_alloc_desc_t(Struct):
    """C struct ze_device_mem_alloc_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("ordinal", c_uint32),
    ]


class ze_host_mem_alloc_desc_t(Struct):
    """C struct ze_host_mem_alloc_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_memory_allocation_properties_t(Struct):
    """C struct ze_memory_allocation_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("type", c_int32),
        ("id", c_uint64),
        ("pageSize", c_uint64),
    ]


class ze_external_memory_export_desc_t(Struct):
    """C struct ze_external_memory_export_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_external_memory_export_fd_t(Struct):
    """C struct ze_external_memory_export_fd_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("fd", c_int32),
    ]


class ze_external_memory_import_fd_t(Struct):
    """C struct ze_external_memory_import_fd_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("fd", c_int32),
    ]


class ze_ipc_mem_handle_t(Struct):
    """C struct ze_ipc_mem_handle_t (ze_api.h)."""

    _fields_ = [
        ("data", c_char * ZE_MAX_IPC_HANDLE_SIZE),
    ]


class ze_command_queue_desc_t(Struct):
    """C struct ze_command_queue_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("ordinal", c_uint32),
        ("index", c_uint32),
        ("flags", c_uint32),
        ("mode", c_int32),
        ("priority", c_int32),
    ]


class ze_command_list_desc_t(Struct):
    """C struct ze_command_list_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("commandQueueGroupOrdinal", c_uint32),
        ("flags", c_uint32),
    ]


class ze_copy_region_t(Struct):
    """C struct ze_copy_region_t (ze_api.h)."""

    _fields_ = [
        ("originX", c_uint32),
        ("originY", c_uint32),
        ("originZ", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("depth", c_uint32),
    ]


class ze_event_pool_desc_t(Struct):
    """C struct ze_event_pool_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_EVENT_POOL_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("count", c_uint32),
    ]


class ze_event_desc_t(Struct):
    """C struct ze_event_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_EVENT_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("index", c_uint32),
        ("signal", c_uint32),
        ("wait", c_uint32),
    ]


class ze_kernel_timestamp_data_t(Struct):
    """C struct ze_kernel_timestamp_data_t (ze_api.h)."""

    _fields_ = [
        ("kernelStart", c_uint64),
        ("kernelEnd", c_uint64),
    ]


class ze_kernel_timestamp_result_t(Struct):
    """C struct ze_kernel_timestamp_result_t (ze_api.h)."""

    _fields_ = [
        ("global", ze_kernel_timestamp_data_t),
        ("context", ze_kernel_timestamp_data_t),
    ]


class ze_fence_desc_t(Struct):
    """C struct ze_fence_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_FENCE_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_module_constants_t(Struct):
    """C struct ze_module_constants_t (ze_api.h)."""

    _fields_ = [
        ("numConstants", c_uint32),
        ("pConstantIds", POINTER(c_uint32)),
        ("pConstantValues", POINTER(c_void_p)),
    ]


class ze_module_desc_t(Struct):
    """C struct ze_module_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_MODULE_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("format", c_int32),
        ("inputSize", c_size_t),
        ("pInputModule", POINTER(c_uint8)),
        ("pBuildFlags", c_char_p),
        ("pConstants", POINTER(ze_module_constants_t)),
    ]


class ze_kernel_desc_t(Struct):
    """C struct ze_kernel_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_KERNEL_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("pKernelName", c_char_p),
    ]


class ze_kernel_uuid_t(Struct):
    """C struct ze_kernel_uuid_t (ze_api.h)."""

    _fields_ = [
        ("kid", c_uint8 * ZE_MAX_KERNEL_UUID_SIZE),
        ("mid", c_uint8 * ZE_MAX_MODULE_UUID_SIZE),
    ]


class ze_kernel_properties_t(Struct):
    """C struct ze_kernel_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("numKernelArgs", c_uint32),
        ("requiredGroupSizeX", c_uint32),
        ("requiredGroupSizeY", c_uint32),
        ("requiredGroupSizeZ", c_uint32),
        ("requiredNumSubGroups", c_uint32),
        ("requiredSubgroupSize", c_uint32),
        ("maxSubgroupSize", c_uint32),
        ("maxNumSubgroups", c_uint32),
        ("localMemSize", c_uint32),
        ("privateMemSize", c_uint32),
        ("spillMemSize", c_uint32),
        ("uuid", ze_kernel_uuid_t),
    ]


class ze_group_count_t(Struct):
    """C struct ze_group_count_t (ze_api.h)."""

    _fields_ = [
        ("groupCountX", c_uint32),
        ("groupCountY", c_uint32),
        ("groupCountZ", c_uint32),
    ]


class ze_native_kernel_uuid_t(Struct):
    """C struct ze_native_kernel_uuid_t (ze_api.h)."""

    _fields_ = [
        ("id", c_uint8 * ZE_MAX_NATIVE_KERNEL_UUID_SIZE),
    ]


class ze_relaxed_allocation_limits_exp_desc_t(Struct):
    """C struct ze_relaxed_allocation_limits_exp_desc_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_RELAXED_ALLOCATION_LIMITS_EXP_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


class ze_device_memory_ext_properties_t(Struct):
    """C struct ze_device_memory_ext_properties_t (ze_api.h)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_DEVICE_MEMORY_EXT_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("type", c_int32),
        ("physicalSize", c_uint64),
        ("readBandwidth", c_uint32),
        ("writeBandwidth", c_uint32),
        ("bandwidthUnit", c_int32),
    ]


class zes_device_properties_t(Struct):
    """C struct zes_device_properties_t (zes_api.h)."""

    _stype_ = E.ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("core", ze_device_properties_t),
        ("numSubdevices", c_uint32),
        ("serialNumber", c_char * ZES_STRING_PROPERTY_SIZE),
        ("boardNumber", c_char * ZES_STRING_PROPERTY_SIZE),
        ("brandName", c_char * ZES_STRING_PROPERTY_SIZE),
        ("modelName", c_char * ZES_STRING_PROPERTY_SIZE),
        ("vendorName", c_char * ZES_STRING_PROPERTY_SIZE),
        ("driverVersion", c_char * ZES_STRING_PROPERTY_SIZE),
    ]


class zes_mem_properties_t(Struct):
    """C struct zes_mem_properties_t (zes_api.h)."""

    _stype_ = E.ZES_STRUCTURE_TYPE_MEM_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("type", c_int32),
        ("onSubdevice", ze_bool_t),
        ("subdeviceId", c_uint32),
        ("location", c_int32),
        ("physicalSize", c_uint64),
        ("busWidth", c_int32),
        ("numChannels", c_int32),
    ]


class zes_mem_state_t(Struct):
    """C struct zes_mem_state_t (zes_api.h)."""

    _stype_ = E.ZES_STRUCTURE_TYPE_MEM_STATE
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("health", c_int32),
        ("free", c_uint64),
        ("size", c_uint64),
    ]


class zes_pci_address_t(Struct):
    """C struct zes_pci_address_t (zes_api.h)."""

    _fields_ = [
        ("domain", c_uint32),
        ("bus", c_uint32),
        ("device", c_uint32),
        ("function", c_uint32),
    ]


class zes_pci_speed_t(Struct):
    """C struct zes_pci_speed_t (zes_api.h)."""

    _fields_ = [
        ("gen", c_int32),
        ("width", c_int32),
        ("maxBandwidth", c_int64),
    ]


class zes_pci_properties_t(Struct):
    """C struct zes_pci_properties_t (zes_api.h)."""

    _stype_ = E.ZES_STRUCTURE_TYPE_PCI_PROPERTIES
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("address", zes_pci_address_t),
        ("maxSpeed", zes_pci_speed_t),
        ("haveBandwidthCounters", ze_bool_t),
        ("havePacketCounters", ze_bool_t),
        ("haveReplayCounters", ze_bool_t),
    ]


class zel_version_t(Struct):
    """C struct zel_version_t (loader/ze_loader.h)."""

    _fields_ = [
        ("major", c_int32),
        ("minor", c_int32),
        ("patch", c_int32),
    ]


class zel_component_version_t(Struct):
    """C struct zel_component_version_t (loader/ze_loader.h)."""

    _fields_ = [
        ("component_name", c_char * ZEL_COMPONENT_STRING_SIZE),
        ("spec_version", c_int32),
        ("component_lib_version", zel_version_t),
    ]


class ze_init_driver_type_desc_t(Struct):
    """C struct ze_init_driver_type_desc_t (ze_api.h 1.10, newer than the 1.4 headers)."""

    _stype_ = E.ZE_STRUCTURE_TYPE_INIT_DRIVER_TYPE_DESC
    _fields_ = [
        ("stype", c_int32),
        ("pNext", c_void_p),
        ("flags", c_uint32),
    ]


# Structs absent from the 1.4 headers; the layout test checks them against a C copy of the spec.
NEWER_STRUCTS = frozenset({"ze_init_driver_type_desc_t"})


__all__ = [
    "NEWER_STRUCTS",
    "Struct",
    "ze_command_list_desc_t",
    "ze_command_queue_desc_t",
    "ze_command_queue_group_properties_t",
    "ze_context_desc_t",
    "ze_copy_region_t",
    "ze_device_compute_properties_t",
    "ze_device_external_memory_properties_t",
    "ze_device_mem_alloc_desc_t",
    "ze_device_memory_access_properties_t",
    "ze_device_memory_ext_properties_t",
    "ze_device_memory_properties_t",
    "ze_device_p2p_bandwidth_exp_properties_t",
    "ze_device_p2p_properties_t",
    "ze_device_properties_t",
    "ze_device_uuid_t",
    "ze_driver_extension_properties_t",
    "ze_driver_ipc_properties_t",
    "ze_driver_properties_t",
    "ze_driver_uuid_t",
    "ze_event_desc_t",
    "ze_event_pool_desc_t",
    "ze_external_memory_export_desc_t",
    "ze_external_memory_export_fd_t",
    "ze_external_memory_import_fd_t",
    "ze_fence_desc_t",
    "ze_group_count_t",
    "ze_host_mem_alloc_desc_t",
    "ze_init_driver_type_desc_t",
    "ze_ipc_mem_handle_t",
    "ze_kernel_desc_t",
    "ze_kernel_properties_t",
    "ze_kernel_timestamp_data_t",
    "ze_kernel_timestamp_result_t",
    "ze_kernel_uuid_t",
    "ze_memory_allocation_properties_t",
    "ze_module_constants_t",
    "ze_module_desc_t",
    "ze_native_kernel_uuid_t",
    "ze_pci_address_ext_t",
    "ze_pci_ext_properties_t",
    "ze_pci_speed_ext_t",
    "ze_relaxed_allocation_limits_exp_desc_t",
    "zel_component_version_t",
    "zel_version_t",
    "zes_device_properties_t",
    "zes_mem_properties_t",
    "zes_mem_state_t",
    "zes_pci_address_t",
    "zes_pci_properties_t",
    "zes_pci_speed_t",
]
