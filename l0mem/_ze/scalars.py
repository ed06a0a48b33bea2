"""Level Zero scalar typedefs, handle types and array-size constants as ctypes.

Transcribed from the Level Zero 1.4 headers (ze_api.h, zes_api.h, loader/ze_loader.h);
tests/test_ze_layout.py checks every value and layout against them with a C compiler.
"""

from __future__ import annotations

from ctypes import c_uint8, c_void_p

ze_bool_t = c_uint8

ze_driver_handle_t = c_void_p
ze_device_handle_t = c_void_p
ze_context_handle_t = c_void_p
ze_command_queue_handle_t = c_void_p
ze_command_list_handle_t = c_void_p
ze_fence_handle_t = c_void_p
ze_event_pool_handle_t = c_void_p
ze_event_handle_t = c_void_p
ze_image_handle_t = c_void_p
ze_module_handle_t = c_void_p
ze_module_build_log_handle_t = c_void_p
ze_kernel_handle_t = c_void_p
ze_sampler_handle_t = c_void_p
ze_physical_mem_handle_t = c_void_p
ze_fabric_vertex_handle_t = c_void_p
ze_fabric_edge_handle_t = c_void_p
zes_sched_handle_t = c_void_p
zes_perf_handle_t = c_void_p
zes_pwr_handle_t = c_void_p
zes_freq_handle_t = c_void_p
zes_engine_handle_t = c_void_p
zes_standby_handle_t = c_void_p
zes_firmware_handle_t = c_void_p
zes_mem_handle_t = c_void_p
zes_fabric_port_handle_t = c_void_p
zes_temp_handle_t = c_void_p
zes_psu_handle_t = c_void_p
zes_fan_handle_t = c_void_p
zes_led_handle_t = c_void_p
zes_ras_handle_t = c_void_p
zes_diag_handle_t = c_void_p
zes_driver_handle_t = ze_driver_handle_t
zes_device_handle_t = ze_device_handle_t

ZEL_COMPONENT_STRING_SIZE = 64
ZES_STRING_PROPERTY_SIZE = 64
ZE_MAX_DEVICE_NAME = 256
ZE_MAX_DEVICE_UUID_SIZE = 16
ZE_MAX_DRIVER_UUID_SIZE = 16
ZE_MAX_EXTENSION_NAME = 256
ZE_MAX_IPC_HANDLE_SIZE = 64
ZE_MAX_KERNEL_UUID_SIZE = 16
ZE_MAX_MODULE_UUID_SIZE = 16
ZE_MAX_NATIVE_KERNEL_UUID_SIZE = 16
ZE_SUBGROUPSIZE_COUNT = 8

__all__ = [
    "ZEL_COMPONENT_STRING_SIZE",
    "ZES_STRING_PROPERTY_SIZE",
    "ZE_MAX_DEVICE_NAME",
    "ZE_MAX_DEVICE_UUID_SIZE",
    "ZE_MAX_DRIVER_UUID_SIZE",
    "ZE_MAX_EXTENSION_NAME",
    "ZE_MAX_IPC_HANDLE_SIZE",
    "ZE_MAX_KERNEL_UUID_SIZE",
    "ZE_MAX_MODULE_UUID_SIZE",
    "ZE_MAX_NATIVE_KERNEL_UUID_SIZE",
    "ZE_SUBGROUPSIZE_COUNT",
    "ze_bool_t",
    "ze_command_list_handle_t",
    "ze_command_queue_handle_t",
    "ze_context_handle_t",
    "ze_device_handle_t",
    "ze_driver_handle_t",
    "ze_event_handle_t",
    "ze_event_pool_handle_t",
    "ze_fabric_edge_handle_t",
    "ze_fabric_vertex_handle_t",
    "ze_fence_handle_t",
    "ze_image_handle_t",
    "ze_kernel_handle_t",
    "ze_module_build_log_handle_t",
    "ze_module_handle_t",
    "ze_physical_mem_handle_t",
    "ze_sampler_handle_t",
    "zes_device_handle_t",
    "zes_diag_handle_t",
    "zes_driver_handle_t",
    "zes_engine_handle_t",
    "zes_fabric_port_handle_t",
    "zes_fan_handle_t",
    "zes_firmware_handle_t",
    "zes_freq_handle_t",
    "zes_led_handle_t",
    "zes_mem_handle_t",
    "zes_perf_handle_t",
    "zes_psu_handle_t",
    "zes_pwr_handle_t",
    "zes_ras_handle_t",
    "zes_sched_handle_t",
    "zes_standby_handle_t",
    "zes_temp_handle_t",
]
