"""The one table of Level Zero functions l0mem binds, and how C type names map to ctypes.

Each row is ``(name, restype, argtypes, required)`` with the types spelled as in
the C prototype (``const`` included), so tests/test_ze_layout.py can compile the
table against the headers and catch a wrong argument list. ``required=False``
rows may be absent from an older loader without breaking the load.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

from l0mem._ze import enums, scalars, structs

FunctionSpec = tuple[str, str, tuple[str, ...], bool]

# fmt: off
FUNCTIONS: tuple[FunctionSpec, ...] = (
    ("zeInit", "ze_result_t", ("ze_init_flags_t",), True),
    ("zeDriverGet", "ze_result_t", ("uint32_t*", "ze_driver_handle_t*"), True),
    ("zeDriverGetApiVersion", "ze_result_t", ("ze_driver_handle_t", "ze_api_version_t*"), True),
    ("zeDriverGetProperties", "ze_result_t", ("ze_driver_handle_t", "ze_driver_properties_t*"), True),
    ("zeDriverGetIpcProperties", "ze_result_t", ("ze_driver_handle_t", "ze_driver_ipc_properties_t*"), True),
    ("zeDriverGetExtensionProperties", "ze_result_t", ("ze_driver_handle_t", "uint32_t*", "ze_driver_extension_properties_t*"), True),
    ("zeDriverGetExtensionFunctionAddress", "ze_result_t", ("ze_driver_handle_t", "const char*", "void**"), True),
    ("zeDeviceGet", "ze_result_t", ("ze_driver_handle_t", "uint32_t*", "ze_device_handle_t*"), True),
    ("zeDeviceGetSubDevices", "ze_result_t", ("ze_device_handle_t", "uint32_t*", "ze_device_handle_t*"), True),
    ("zeDeviceGetProperties", "ze_result_t", ("ze_device_handle_t", "ze_device_properties_t*"), True),
    ("zeDeviceGetComputeProperties", "ze_result_t", ("ze_device_handle_t", "ze_device_compute_properties_t*"), True),
    ("zeDeviceGetMemoryProperties", "ze_result_t", ("ze_device_handle_t", "uint32_t*", "ze_device_memory_properties_t*"), True),
    ("zeDeviceGetMemoryAccessProperties", "ze_result_t", ("ze_device_handle_t", "ze_device_memory_access_properties_t*"), True),
    ("zeDeviceGetCommandQueueGroupProperties", "ze_result_t", ("ze_device_handle_t", "uint32_t*", "ze_command_queue_group_properties_t*"), True),
    ("zeDeviceGetExternalMemoryProperties", "ze_result_t", ("ze_device_handle_t", "ze_device_external_memory_properties_t*"), True),
    ("zeDeviceGetP2PProperties", "ze_result_t", ("ze_device_handle_t", "ze_device_handle_t", "ze_device_p2p_properties_t*"), True),
    ("zeDeviceCanAccessPeer", "ze_result_t", ("ze_device_handle_t", "ze_device_handle_t", "ze_bool_t*"), True),
    ("zeDeviceGetStatus", "ze_result_t", ("ze_device_handle_t",), True),
    ("zeDeviceGetGlobalTimestamps", "ze_result_t", ("ze_device_handle_t", "uint64_t*", "uint64_t*"), True),
    ("zeDevicePciGetPropertiesExt", "ze_result_t", ("ze_device_handle_t", "ze_pci_ext_properties_t*"), False),
    ("zeContextCreate", "ze_result_t", ("ze_driver_handle_t", "const ze_context_desc_t*", "ze_context_handle_t*"), True),
    ("zeContextCreateEx", "ze_result_t", ("ze_driver_handle_t", "const ze_context_desc_t*", "uint32_t", "ze_device_handle_t*", "ze_context_handle_t*"), True),
    ("zeContextDestroy", "ze_result_t", ("ze_context_handle_t",), True),
    ("zeContextGetStatus", "ze_result_t", ("ze_context_handle_t",), True),
    ("zeContextMakeMemoryResident", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "void*", "size_t"), True),
    ("zeContextEvictMemory", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "void*", "size_t"), True),
    ("zeMemAllocDevice", "ze_result_t", ("ze_context_handle_t", "const ze_device_mem_alloc_desc_t*", "size_t", "size_t", "ze_device_handle_t", "void**"), True),
    ("zeMemAllocHost", "ze_result_t", ("ze_context_handle_t", "const ze_host_mem_alloc_desc_t*", "size_t", "size_t", "void**"), True),
    ("zeMemAllocShared", "ze_result_t", ("ze_context_handle_t", "const ze_device_mem_alloc_desc_t*", "const ze_host_mem_alloc_desc_t*", "size_t", "size_t", "ze_device_handle_t", "void**"), True),
    ("zeMemFree", "ze_result_t", ("ze_context_handle_t", "void*"), True),
    ("zeMemGetAllocProperties", "ze_result_t", ("ze_context_handle_t", "const void*", "ze_memory_allocation_properties_t*", "ze_device_handle_t*"), True),
    ("zeMemGetAddressRange", "ze_result_t", ("ze_context_handle_t", "const void*", "void**", "size_t*"), True),
    ("zeMemGetIpcHandle", "ze_result_t", ("ze_context_handle_t", "const void*", "ze_ipc_mem_handle_t*"), True),
    ("zeMemOpenIpcHandle", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "ze_ipc_mem_handle_t", "ze_ipc_memory_flags_t", "void**"), True),
    ("zeMemCloseIpcHandle", "ze_result_t", ("ze_context_handle_t", "const void*"), True),
    ("zeCommandQueueCreate", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "const ze_command_queue_desc_t*", "ze_command_queue_handle_t*"), True),
    ("zeCommandQueueDestroy", "ze_result_t", ("ze_command_queue_handle_t",), True),
    ("zeCommandQueueExecuteCommandLists", "ze_result_t", ("ze_command_queue_handle_t", "uint32_t", "ze_command_list_handle_t*", "ze_fence_handle_t"), True),
    ("zeCommandQueueSynchronize", "ze_result_t", ("ze_command_queue_handle_t", "uint64_t"), True),
    ("zeCommandListCreate", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "const ze_command_list_desc_t*", "ze_command_list_handle_t*"), True),
    ("zeCommandListCreateImmediate", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "const ze_command_queue_desc_t*", "ze_command_list_handle_t*"), True),
    ("zeCommandListClose", "ze_result_t", ("ze_command_list_handle_t",), True),
    ("zeCommandListReset", "ze_result_t", ("ze_command_list_handle_t",), True),
    ("zeCommandListDestroy", "ze_result_t", ("ze_command_list_handle_t",), True),
    ("zeCommandListAppendBarrier", "ze_result_t", ("ze_command_list_handle_t", "ze_event_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeCommandListAppendMemoryCopy", "ze_result_t", ("ze_command_list_handle_t", "void*", "const void*", "size_t", "ze_event_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeCommandListAppendMemoryFill", "ze_result_t", ("ze_command_list_handle_t", "void*", "const void*", "size_t", "size_t", "ze_event_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeCommandListAppendLaunchKernel", "ze_result_t", ("ze_command_list_handle_t", "ze_kernel_handle_t", "const ze_group_count_t*", "ze_event_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeCommandListAppendSignalEvent", "ze_result_t", ("ze_command_list_handle_t", "ze_event_handle_t"), True),
    ("zeCommandListAppendWaitOnEvents", "ze_result_t", ("ze_command_list_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeCommandListAppendEventReset", "ze_result_t", ("ze_command_list_handle_t", "ze_event_handle_t"), True),
    ("zeCommandListAppendWriteGlobalTimestamp", "ze_result_t", ("ze_command_list_handle_t", "uint64_t*", "ze_event_handle_t", "uint32_t", "ze_event_handle_t*"), True),
    ("zeEventPoolCreate", "ze_result_t", ("ze_context_handle_t", "const ze_event_pool_desc_t*", "uint32_t", "ze_device_handle_t*", "ze_event_pool_handle_t*"), True),
    ("zeEventPoolDestroy", "ze_result_t", ("ze_event_pool_handle_t",), True),
    ("zeEventCreate", "ze_result_t", ("ze_event_pool_handle_t", "const ze_event_desc_t*", "ze_event_handle_t*"), True),
    ("zeEventDestroy", "ze_result_t", ("ze_event_handle_t",), True),
    ("zeEventHostSignal", "ze_result_t", ("ze_event_handle_t",), True),
    ("zeEventHostSynchronize", "ze_result_t", ("ze_event_handle_t", "uint64_t"), True),
    ("zeEventQueryStatus", "ze_result_t", ("ze_event_handle_t",), True),
    ("zeEventHostReset", "ze_result_t", ("ze_event_handle_t",), True),
    ("zeEventQueryKernelTimestamp", "ze_result_t", ("ze_event_handle_t", "ze_kernel_timestamp_result_t*"), True),
    ("zeFenceCreate", "ze_result_t", ("ze_command_queue_handle_t", "const ze_fence_desc_t*", "ze_fence_handle_t*"), True),
    ("zeFenceDestroy", "ze_result_t", ("ze_fence_handle_t",), True),
    ("zeFenceHostSynchronize", "ze_result_t", ("ze_fence_handle_t", "uint64_t"), True),
    ("zeFenceQueryStatus", "ze_result_t", ("ze_fence_handle_t",), True),
    ("zeFenceReset", "ze_result_t", ("ze_fence_handle_t",), True),
    ("zeModuleCreate", "ze_result_t", ("ze_context_handle_t", "ze_device_handle_t", "const ze_module_desc_t*", "ze_module_handle_t*", "ze_module_build_log_handle_t*"), True),
    ("zeModuleDestroy", "ze_result_t", ("ze_module_handle_t",), True),
    ("zeModuleBuildLogGetString", "ze_result_t", ("ze_module_build_log_handle_t", "size_t*", "char*"), True),
    ("zeModuleBuildLogDestroy", "ze_result_t", ("ze_module_build_log_handle_t",), True),
    ("zeModuleGetKernelNames", "ze_result_t", ("ze_module_handle_t", "uint32_t*", "const char**"), True),
    ("zeKernelCreate", "ze_result_t", ("ze_module_handle_t", "const ze_kernel_desc_t*", "ze_kernel_handle_t*"), True),
    ("zeKernelDestroy", "ze_result_t", ("ze_kernel_handle_t",), True),
    ("zeKernelSetGroupSize", "ze_result_t", ("ze_kernel_handle_t", "uint32_t", "uint32_t", "uint32_t"), True),
    ("zeKernelSuggestGroupSize", "ze_result_t", ("ze_kernel_handle_t", "uint32_t", "uint32_t", "uint32_t", "uint32_t*", "uint32_t*", "uint32_t*"), True),
    ("zeKernelSetArgumentValue", "ze_result_t", ("ze_kernel_handle_t", "uint32_t", "size_t", "const void*"), True),
    ("zeKernelGetProperties", "ze_result_t", ("ze_kernel_handle_t", "ze_kernel_properties_t*"), True),
    ("zeKernelGetName", "ze_result_t", ("ze_kernel_handle_t", "size_t*", "char*"), True),
    ("zesDeviceGetProperties", "ze_result_t", ("zes_device_handle_t", "zes_device_properties_t*"), True),
    ("zesDeviceEnumMemoryModules", "ze_result_t", ("zes_device_handle_t", "uint32_t*", "zes_mem_handle_t*"), True),
    ("zesMemoryGetProperties", "ze_result_t", ("zes_mem_handle_t", "zes_mem_properties_t*"), True),
    ("zesMemoryGetState", "ze_result_t", ("zes_mem_handle_t", "zes_mem_state_t*"), True),
    ("zesDevicePciGetProperties", "ze_result_t", ("zes_device_handle_t", "zes_pci_properties_t*"), True),
    ("zelLoaderGetVersions", "ze_result_t", ("size_t*", "zel_component_version_t*"), False),
    # From loader 1.18 (spec 1.10); replaces zeInit + zeDriverGet there.
    ("zeInitDrivers", "ze_result_t", ("uint32_t*", "ze_driver_handle_t*", "ze_init_driver_type_desc_t*"), False),
)
# fmt: on

# Functions newer than the 1.4 headers, so the signature test cannot compile them.
NEWER_THAN_HEADERS = frozenset({"zeInitDrivers"})

# Integer typedefs other than the handles and the enumerations.
_SCALARS: dict[str, Any] = {
    "uint8_t": ctypes.c_uint8,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
    "ze_bool_t": scalars.ze_bool_t,
    # ze_result_t is an enum with no negative values: GCC gives it an unsigned int.
    "ze_result_t": ctypes.c_uint32,
}


def _named_type(name: str) -> Any:
    """Return the ctypes type for a C type name without pointers or const."""
    if name in _SCALARS:
        return _SCALARS[name]
    if name.endswith("_handle_t") and hasattr(scalars, name):
        return getattr(scalars, name)
    if name.endswith("_flags_t") and hasattr(enums, name):
        return ctypes.c_uint32
    value = getattr(enums, name, None)
    if isinstance(value, type) and issubclass(value, enum.IntEnum):
        return ctypes.c_int32
    value = getattr(structs, name, None)
    if isinstance(value, type) and issubclass(value, structs.Struct):
        return value
    raise KeyError(f"no ctypes mapping for C type '{name}'")


def _is_enum(name: str) -> bool:
    """Return whether ``name`` is an enumeration (not a flags typedef)."""
    value = getattr(enums, name, None)
    return (
        not name.endswith("_flags_t")
        and isinstance(value, type)
        and issubclass(value, enum.IntEnum)
    )


def ctype_of(c_type: str) -> Any:
    """Return the ctypes type for a C parameter type such as ``const ze_context_desc_t*``."""
    text = c_type.replace("const ", "").replace(" ", "")
    depth = len(text) - len(text.rstrip("*"))
    base = text.rstrip("*")
    if base == "void" or (base == "char" and depth > 0):
        if depth == 0:
            raise KeyError("void is not a parameter type")
        result: Any = ctypes.c_void_p if base == "void" else ctypes.c_char_p
        depth -= 1
    elif depth > 0 and _is_enum(base):
        # Callers hold enum outputs in c_int32 or c_uint32 (GCC makes these enums unsigned).
        result = ctypes.c_void_p
        depth -= 1
    else:
        result = _named_type(base)
    for _ in range(depth):
        result = ctypes.POINTER(result)
    return result
