/*
 * The exported ze/zes/zet *GetProcAddrTable functions that the loader looks
 * up with dlsym. With a single driver the loader hands these tables straight
 * to the application, so no slot may stay NULL: every slot first gets a stub
 * that returns ZE_RESULT_ERROR_UNSUPPORTED_FEATURE.
 */
#include "zesim.h"

#include <string.h>

#include <ze_ddi.h>
#include <zes_ddi.h>
#include <zet_ddi.h>

static ze_result_t ZE_APICALL sim_unsupported(void)
{
    return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
}

/* Every DDI table is a struct made only of function pointers. */
void sim_fill_unsupported(void *table, size_t size)
{
    ze_result_t(ZE_APICALL * stub)(void) = sim_unsupported;
    for (size_t off = 0; off + sizeof(stub) <= size; off += sizeof(stub))
        memcpy((char *)table + off, &stub, sizeof(stub));
}

/* The tables are laid out as in the 1.4 headers; a caller built for older ones has smaller tables. */
static ze_result_t check_version(ze_api_version_t version, const void *table)
{
    if (table == NULL)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ZE_MAJOR_VERSION(version) != 1 || ZE_MINOR_VERSION(version) < 4)
        return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
    return ZE_RESULT_SUCCESS;
}

#define SIM_TABLE_BEGIN(fn, type)                                                        \
    ZE_DLLEXPORT ze_result_t ZE_APICALL fn(ze_api_version_t version, type *t)            \
    {                                                                                    \
        ze_result_t r = check_version(version, t);                                       \
        if (r)                                                                           \
            return r;                                                                    \
        sim_fill_unsupported(t, sizeof(*t));
#define SIM_TABLE_END                                                                    \
    return ZE_RESULT_SUCCESS;                                                            \
    }
#define SIM_STUB_TABLE(fn, type) SIM_TABLE_BEGIN(fn, type) SIM_TABLE_END

/* ---------------------------------------------------------------------- ze */

SIM_TABLE_BEGIN(zeGetGlobalProcAddrTable, ze_global_dditable_t)
    t->pfnInit = sim_zeInit;
    /*
     * API 1.10 put pfnInitDrivers right after pfnInit. A loader asking for 1.10
     * or later has room for it; the 1.4 struct does not name it.
     */
    if (ZE_MINOR_VERSION(version) >= 10 && sim_offers_init_drivers()) {
        ze_result_t(ZE_APICALL * init_drivers)(uint32_t *, ze_driver_handle_t *, const void *) =
            sim_zeInitDrivers;
        memcpy((char *)t + sizeof(*t), &init_drivers, sizeof(init_drivers));
    }
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetDriverProcAddrTable, ze_driver_dditable_t)
    t->pfnGet = sim_zeDriverGet;
    t->pfnGetApiVersion = sim_zeDriverGetApiVersion;
    t->pfnGetProperties = sim_zeDriverGetProperties;
    t->pfnGetIpcProperties = sim_zeDriverGetIpcProperties;
    t->pfnGetExtensionProperties = sim_zeDriverGetExtensionProperties;
    t->pfnGetExtensionFunctionAddress = sim_zeDriverGetExtensionFunctionAddress;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetDeviceProcAddrTable, ze_device_dditable_t)
    t->pfnGet = sim_zeDeviceGet;
    t->pfnGetSubDevices = sim_zeDeviceGetSubDevices;
    t->pfnGetProperties = sim_zeDeviceGetProperties;
    t->pfnGetComputeProperties = sim_zeDeviceGetComputeProperties;
    t->pfnGetModuleProperties = sim_zeDeviceGetModuleProperties;
    t->pfnGetCommandQueueGroupProperties = sim_zeDeviceGetCommandQueueGroupProperties;
    t->pfnGetMemoryProperties = sim_zeDeviceGetMemoryProperties;
    t->pfnGetMemoryAccessProperties = sim_zeDeviceGetMemoryAccessProperties;
    t->pfnGetExternalMemoryProperties = sim_zeDeviceGetExternalMemoryProperties;
    t->pfnGetP2PProperties = sim_zeDeviceGetP2PProperties;
    t->pfnCanAccessPeer = sim_zeDeviceCanAccessPeer;
    t->pfnGetStatus = sim_zeDeviceGetStatus;
    t->pfnGetGlobalTimestamps = sim_zeDeviceGetGlobalTimestamps;
    t->pfnPciGetPropertiesExt = sim_zeDevicePciGetPropertiesExt;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetContextProcAddrTable, ze_context_dditable_t)
    t->pfnCreate = sim_zeContextCreate;
    t->pfnCreateEx = sim_zeContextCreateEx;
    t->pfnDestroy = sim_zeContextDestroy;
    t->pfnGetStatus = sim_zeContextGetStatus;
    t->pfnMakeMemoryResident = sim_zeContextMakeMemoryResident;
    t->pfnEvictMemory = sim_zeContextEvictMemory;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t)
    t->pfnCreate = sim_zeCommandQueueCreate;
    t->pfnDestroy = sim_zeCommandQueueDestroy;
    t->pfnExecuteCommandLists = sim_zeCommandQueueExecuteCommandLists;
    t->pfnSynchronize = sim_zeCommandQueueSynchronize;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetCommandListProcAddrTable, ze_command_list_dditable_t)
    t->pfnCreate = sim_zeCommandListCreate;
    t->pfnCreateImmediate = sim_zeCommandListCreateImmediate;
    t->pfnDestroy = sim_zeCommandListDestroy;
    t->pfnClose = sim_zeCommandListClose;
    t->pfnReset = sim_zeCommandListReset;
    t->pfnAppendWriteGlobalTimestamp = sim_zeCommandListAppendWriteGlobalTimestamp;
    t->pfnAppendBarrier = sim_zeCommandListAppendBarrier;
    t->pfnAppendMemoryCopy = sim_zeCommandListAppendMemoryCopy;
    t->pfnAppendMemoryFill = sim_zeCommandListAppendMemoryFill;
    t->pfnAppendSignalEvent = sim_zeCommandListAppendSignalEvent;
    t->pfnAppendWaitOnEvents = sim_zeCommandListAppendWaitOnEvents;
    t->pfnAppendEventReset = sim_zeCommandListAppendEventReset;
    t->pfnAppendQueryKernelTimestamps = sim_zeCommandListAppendQueryKernelTimestamps;
    t->pfnAppendLaunchKernel = sim_zeCommandListAppendLaunchKernel;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetFenceProcAddrTable, ze_fence_dditable_t)
    t->pfnCreate = sim_zeFenceCreate;
    t->pfnDestroy = sim_zeFenceDestroy;
    t->pfnHostSynchronize = sim_zeFenceHostSynchronize;
    t->pfnQueryStatus = sim_zeFenceQueryStatus;
    t->pfnReset = sim_zeFenceReset;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t)
    t->pfnCreate = sim_zeEventPoolCreate;
    t->pfnDestroy = sim_zeEventPoolDestroy;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetEventProcAddrTable, ze_event_dditable_t)
    t->pfnCreate = sim_zeEventCreate;
    t->pfnDestroy = sim_zeEventDestroy;
    t->pfnHostSignal = sim_zeEventHostSignal;
    t->pfnHostSynchronize = sim_zeEventHostSynchronize;
    t->pfnQueryStatus = sim_zeEventQueryStatus;
    t->pfnHostReset = sim_zeEventHostReset;
    t->pfnQueryKernelTimestamp = sim_zeEventQueryKernelTimestamp;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetModuleProcAddrTable, ze_module_dditable_t)
    t->pfnCreate = sim_zeModuleCreate;
    t->pfnDestroy = sim_zeModuleDestroy;
    t->pfnGetKernelNames = sim_zeModuleGetKernelNames;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
    t->pfnDestroy = sim_zeModuleBuildLogDestroy;
    t->pfnGetString = sim_zeModuleBuildLogGetString;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
    t->pfnCreate = sim_zeKernelCreate;
    t->pfnDestroy = sim_zeKernelDestroy;
    t->pfnSetGroupSize = sim_zeKernelSetGroupSize;
    t->pfnSuggestGroupSize = sim_zeKernelSuggestGroupSize;
    t->pfnSetArgumentValue = sim_zeKernelSetArgumentValue;
    t->pfnGetProperties = sim_zeKernelGetProperties;
    t->pfnGetName = sim_zeKernelGetName;
SIM_TABLE_END

SIM_TABLE_BEGIN(zeGetMemProcAddrTable, ze_mem_dditable_t)
    t->pfnAllocShared = sim_zeMemAllocShared;
    t->pfnAllocDevice = sim_zeMemAllocDevice;
    t->pfnAllocHost = sim_zeMemAllocHost;
    t->pfnFree = sim_zeMemFree;
    t->pfnGetAllocProperties = sim_zeMemGetAllocProperties;
    t->pfnGetAddressRange = sim_zeMemGetAddressRange;
    t->pfnGetIpcHandle = sim_zeMemGetIpcHandle;
    t->pfnOpenIpcHandle = sim_zeMemOpenIpcHandle;
    t->pfnCloseIpcHandle = sim_zeMemCloseIpcHandle;
    t->pfnFreeExt = sim_zeMemFreeExt;
SIM_TABLE_END

SIM_STUB_TABLE(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t)
SIM_STUB_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
SIM_STUB_TABLE(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
SIM_STUB_TABLE(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
SIM_STUB_TABLE(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
SIM_STUB_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
SIM_STUB_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
SIM_STUB_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)
SIM_STUB_TABLE(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t)
SIM_STUB_TABLE(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t)

/* --------------------------------------------------------------------- zes */

SIM_TABLE_BEGIN(zesGetDeviceProcAddrTable, zes_device_dditable_t)
    t->pfnGetProperties = sim_zesDeviceGetProperties;
    t->pfnEnumMemoryModules = sim_zesDeviceEnumMemoryModules;
    t->pfnPciGetProperties = sim_zesDevicePciGetProperties;
SIM_TABLE_END

SIM_TABLE_BEGIN(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
    t->pfnGetProperties = sim_zesMemoryGetProperties;
    t->pfnGetState = sim_zesMemoryGetState;
SIM_TABLE_END

SIM_STUB_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t)
SIM_STUB_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
SIM_STUB_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t)
SIM_STUB_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
SIM_STUB_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t)
SIM_STUB_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
SIM_STUB_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
SIM_STUB_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t)
SIM_STUB_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
SIM_STUB_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t)
SIM_STUB_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t)
SIM_STUB_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t)
SIM_STUB_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
SIM_STUB_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
SIM_STUB_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)

/* --------------------------------------------------------------------- zet */

SIM_STUB_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t)
SIM_STUB_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t)
SIM_STUB_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
SIM_STUB_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t)
SIM_STUB_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
SIM_STUB_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
SIM_STUB_TABLE(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
SIM_STUB_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t)
SIM_STUB_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
SIM_STUB_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
SIM_STUB_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
SIM_STUB_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
SIM_STUB_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t)
