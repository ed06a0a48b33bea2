/*
 * Driver, devices, contexts, Sysman, object bookkeeping and the zesim_*
 * control entry points.
 */
#include "zesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_cond;
sim_driver_t sim_driver = {MAGIC_DRIVER};
sim_device_t sim_devices[SIM_MAX_DEVICES];
int sim_initialized;
int sim_sysman_enabled;
uint64_t sim_moved[SIM_MAX_DEVICES + 1][SIM_MAX_DEVICES + 1];
uint64_t sim_launches;
uint64_t sim_api_calls;
uint64_t sim_alloc_calls;
int sim_lost;

static ze_result_t sim_init_result = ZE_RESULT_ERROR_UNINITIALIZED;

/* ------------------------------------------------------------------ objects */

typedef struct sim_free_node {
    uint32_t magic; /* MAGIC_DEAD while on the free list */
    struct sim_free_node *next;
} sim_free_node_t;

/* One free list per object kind; every kind has one fixed size. */
static sim_free_node_t *sim_free_lists[MAGIC_MEMMOD - MAGIC_DRIVER + 1];

static size_t sim_block_size(size_t size)
{
    return size < sizeof(sim_free_node_t) ? sizeof(sim_free_node_t) : size;
}

void *sim_obj_new(uint32_t magic, size_t size)
{
    uint32_t kind = magic - MAGIC_DRIVER;
    size = sim_block_size(size);
    void *obj = sim_free_lists[kind];
    if (obj) {
        sim_free_lists[kind] = sim_free_lists[kind]->next;
        memset(obj, 0, size);
    } else {
        obj = calloc(1, size);
        if (!obj)
            return NULL;
    }
    *(uint32_t *)obj = magic;
    return obj;
}

void sim_obj_free(void *obj)
{
    /* Blocks are recycled, never freed, so a stale handle reads MAGIC_DEAD, not freed memory. */
    uint32_t kind = *(uint32_t *)obj - MAGIC_DRIVER;
    sim_free_node_t *n = obj;
    n->magic = MAGIC_DEAD;
    n->next = sim_free_lists[kind];
    sim_free_lists[kind] = n;
}

int sim_obj_is(const void *handle, uint32_t magic)
{
    return handle != NULL && *(const uint32_t *)handle == magic;
}

/* ------------------------------------------------------------ entry bracket */

ze_result_t sim_enter_at(const char *api)
{
    pthread_mutex_lock(&sim_lock);
    if (!sim_initialized)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    sim_api_calls++;
    if (sim_cfg.device_lost_at && sim_api_calls >= sim_cfg.device_lost_at)
        sim_lost = 1;
    if (sim_cfg.device_lost_on[0] && !strncmp(api, "sim_", 4) &&
        !strcmp(api + 4, sim_cfg.device_lost_on))
        sim_lost = 1;
    return sim_lost ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_SUCCESS;
}

ze_result_t sim_leave(ze_result_t result)
{
    pthread_mutex_unlock(&sim_lock);
    return result;
}

static sim_device_t *dev_of(ze_device_handle_t h)
{
    return (sim_device_t *)h;
}

/* ------------------------------------------------------------------ global */

ze_result_t ZE_APICALL sim_zeInit(ze_init_flags_t flags)
{
    sim_fault_point("init");
    pthread_mutex_lock(&sim_lock);
    /* The loader calls zeInit more than once; configuration is read on the first call only. */
    if (!sim_initialized) {
        if (flags && !(flags & ZE_INIT_FLAG_GPU_ONLY)) {
            pthread_mutex_unlock(&sim_lock);
            return ZE_RESULT_ERROR_UNINITIALIZED;
        }
        if (sim_config_load() || sim_shared_open()) {
            sim_init_result = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        } else {
            pthread_condattr_t attr;
            pthread_condattr_init(&attr);
            pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
            pthread_cond_init(&sim_cond, &attr);
            pthread_condattr_destroy(&attr);
            for (uint32_t i = 0; i < SIM_MAX_DEVICES; i++) {
                sim_devices[i].magic = MAGIC_DEVICE;
                sim_devices[i].index = i;
                sim_devices[i].memmod.magic = MAGIC_MEMMOD;
                sim_devices[i].memmod.device = i;
                sim_devices[i].memmod.sub = -1;
                sim_devices[i].sub = -1;
            }
            sim_subdevices_init();
            sim_drv_env_load();
            const char *sysman = getenv("ZES_ENABLE_SYSMAN");
            sim_sysman_enabled = sysman && !strcmp(sysman, "1");
            sim_initialized = 1;
            sim_init_result = ZE_RESULT_SUCCESS;
        }
    }
    ze_result_t r = sim_init_result;
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* ze_init_driver_type_desc_t of API 1.10, which the 1.4 headers lack. */
typedef struct {
    ze_structure_type_t stype;
    const void *pNext;
    uint32_t flags;
} sim_init_driver_type_desc_t;
#define SIM_INIT_DRIVER_TYPE_FLAG_GPU 1u

/*
 * Offered to loaders of API 1.10 and later only with ZESIM_INIT_DRIVERS=1
 * (ddi.c), so that tests can give l0mem a driver with or without it.
 */
ze_result_t ZE_APICALL sim_zeInitDrivers(uint32_t *pCount, ze_driver_handle_t *phDrivers,
                                         const void *desc)
{
    const sim_init_driver_type_desc_t *d = desc;
    if (pCount == NULL || d == NULL)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (!(d->flags & SIM_INIT_DRIVER_TYPE_FLAG_GPU)) {
        *pCount = 0;
        return ZE_RESULT_SUCCESS;
    }
    ze_result_t r = sim_zeInit(ZE_INIT_FLAG_GPU_ONLY);
    if (r)
        return r;
    return sim_zeDriverGet(pCount, phDrivers);
}

/* ------------------------------------------------------------------ driver */

ze_result_t ZE_APICALL sim_zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_NOTNULL(pCount);
    if (*pCount == 0 || phDrivers == NULL) {
        *pCount = 1;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    phDrivers[0] = (ze_driver_handle_t)&sim_driver;
    *pCount = 1;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDriverGetApiVersion(ze_driver_handle_t h, ze_api_version_t *version)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(version);
    *version = ZE_API_VERSION_1_4;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* sub is -1 for the driver or a root device: byte 13 stays 0, so tiles get UUIDs of their own. */
static void sim_uuid(uint8_t out[16], const char *tag, uint32_t index, int sub)
{
    memset(out, 0, 16);
    snprintf((char *)out, 12, "%s", tag);
    out[12] = (uint8_t)index;
    out[13] = (uint8_t)(sub + 1);
    out[15] = 0x5a;
}

ze_result_t ZE_APICALL sim_zeDriverGetProperties(ze_driver_handle_t h, ze_driver_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(p);
    sim_uuid(p->uuid.id, "l0mem-zesim", 0, -1);
    p->driverVersion = sim_cfg.driver_version;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDriverGetIpcProperties(ze_driver_handle_t h,
                                                     ze_driver_ipc_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(p);
    p->flags = ZE_IPC_PROPERTY_FLAG_MEMORY;
    return sim_leave(ZE_RESULT_SUCCESS);
}

static const struct {
    const char *name;
    uint32_t version;
} sim_extensions[] = {
    {ZE_PCI_PROPERTIES_EXT_NAME, ZE_PCI_PROPERTIES_EXT_VERSION_1_0},
    {ZE_BANDWIDTH_PROPERTIES_EXP_NAME, ZE_MAKE_VERSION(1, 0)},
};

ze_result_t ZE_APICALL sim_zeDriverGetExtensionProperties(ze_driver_handle_t h, uint32_t *pCount,
                                                           ze_driver_extension_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(pCount);
    uint32_t total = sizeof(sim_extensions) / sizeof(sim_extensions[0]);
    if (*pCount == 0 || p == NULL) {
        *pCount = total;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    uint32_t n = *pCount < total ? *pCount : total;
    for (uint32_t i = 0; i < n; i++) {
        snprintf(p[i].name, ZE_MAX_EXTENSION_NAME, "%s", sim_extensions[i].name);
        p[i].version = sim_extensions[i].version;
    }
    *pCount = n;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDriverGetExtensionFunctionAddress(ze_driver_handle_t h,
                                                                const char *name,
                                                                void **ppFunctionAddress)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(name);
    SIM_NOTNULL(ppFunctionAddress);
    *ppFunctionAddress = NULL;
    return sim_leave(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE);
}

/* ------------------------------------------------------------------ device */

ze_result_t ZE_APICALL sim_zeDeviceGet(ze_driver_handle_t h, uint32_t *pCount,
                                       ze_device_handle_t *phDevices)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(pCount);
    uint32_t total = sim_visible_devices(NULL, 0);
    if (*pCount == 0 || phDevices == NULL) {
        *pCount = total;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    uint32_t n = *pCount < total ? *pCount : total;
    sim_visible_devices(phDevices, n);
    *pCount = n;
    return sim_leave(ZE_RESULT_SUCCESS);
}

#define SIM_CHECK_DEVICE(h)                                                              \
    do {                                                                                 \
        SIM_CHECK(h, MAGIC_DEVICE);                                                      \
        if (!sim_device_usable(dev_of(h)))                                               \
            return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);                          \
    } while (0)

ze_result_t ZE_APICALL sim_zeDeviceGetSubDevices(ze_device_handle_t h, uint32_t *pCount,
                                                 ze_device_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(pCount);
    /* One level of tiles, as on Intel's multi-tile GPUs: a sub-device has none. */
    uint32_t total = dev_of(h)->sub < 0 ? sim_cfg.subdevices : 0;
    if (*pCount == 0 || ph == NULL) {
        *pCount = total;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    uint32_t n = *pCount < total ? *pCount : total;
    for (uint32_t k = 0; k < n; k++)
        ph[k] = (ze_device_handle_t)&sim_subdevices[dev_of(h)->index][k];
    *pCount = n;
    return sim_leave(ZE_RESULT_SUCCESS);
}

void sim_fill_device_properties(const sim_device_t *d, ze_device_properties_t *p)
{
    void *next = p->pNext;
    ze_structure_type_t stype = p->stype;
    memset(p, 0, sizeof(*p));
    p->stype = stype;
    p->pNext = next;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->deviceId = 0x5a51;
    p->flags = ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING;
    if (d->sub >= 0)
        p->flags |= ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE;
    p->subdeviceId = d->sub >= 0 ? (uint32_t)d->sub : 0;
    p->coreClockRate = 2400;
    p->maxMemAllocSize = sim_device_capacity(d);
    p->maxHardwareContexts = 64;
    p->maxCommandQueuePriority = 0;
    p->numThreadsPerEU = 8;
    p->physicalEUSimdWidth = 8;
    p->numEUsPerSubslice = 8;
    p->numSubslicesPerSlice = 4;
    /* A root device is the sum of its tiles. */
    p->numSlices = d->sub < 0 && sim_cfg.subdevices ? sim_cfg.subdevices : 1;
    /* Spec: nanoseconds per tick for the 1.0 stype, ticks per second for the 1.2 stype. */
    p->timerResolution =
        stype == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 ? SIM_TIMER_HZ : 1000000000ull / SIM_TIMER_HZ;
    p->timestampValidBits = SIM_GLOBAL_TS_BITS;
    p->kernelTimestampValidBits = SIM_KERNEL_TS_BITS;
    sim_uuid(p->uuid.id, "l0mem-dev", d->index, d->sub);
    /* Intel's driver gives tiles their card's name; the UUID and subdeviceId tell them apart. */
    snprintf(p->name, ZE_MAX_DEVICE_NAME, "l0mem simulated GPU %u", d->index);
}

ze_result_t ZE_APICALL sim_zeDeviceGetProperties(ze_device_handle_t h, ze_device_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    sim_fill_device_properties(dev_of(h), p);
    /* Not a device-properties extension in the spec, but harmless to honour if chained. */
    for (ze_base_properties_t *e = p->pNext; e; e = e->pNext) {
        if (e->stype == ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES) {
            ze_pci_ext_properties_t *pci = (void *)e;
            sim_fill_pci(dev_of(h)->index, &pci->address.domain, &pci->address.bus,
                         &pci->address.device, &pci->address.function);
            pci->maxSpeed.genVersion = 4;
            pci->maxSpeed.width = 16;
            pci->maxSpeed.maxBandwidth = 32000000000ll;
        }
    }
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetComputeProperties(ze_device_handle_t h,
                                                        ze_device_compute_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    p->maxTotalGroupSize = 1024;
    p->maxGroupSizeX = 1024;
    p->maxGroupSizeY = 1024;
    p->maxGroupSizeZ = 64;
    p->maxGroupCountX = 0xffffffffu;
    p->maxGroupCountY = 0xffffffffu;
    p->maxGroupCountZ = 0xffffffffu;
    p->maxSharedLocalMemory = 65536;
    p->numSubGroupSizes = 3;
    memset(p->subGroupSizes, 0, sizeof(p->subGroupSizes));
    p->subGroupSizes[0] = 8;
    p->subGroupSizes[1] = 16;
    p->subGroupSizes[2] = 32;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetModuleProperties(ze_device_handle_t h,
                                                       ze_device_module_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    p->spirvVersionSupported = ZE_MAKE_VERSION(1, 2);
    p->flags = ZE_DEVICE_MODULE_FLAG_FP16 | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS;
    p->fp16flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST;
    p->fp32flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST | ZE_DEVICE_FP_FLAG_DENORM;
    p->fp64flags = 0;
    p->maxArgumentsSize = 2048;
    p->printfBufferSize = 0;
    memset(&p->nativeKernelSupported, 0, sizeof(p->nativeKernelSupported));
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetMemoryProperties(ze_device_handle_t h, uint32_t *pCount,
                                                       ze_device_memory_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(pCount);
    if (*pCount == 0 || p == NULL) {
        *pCount = 1;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    p[0].flags = 0;
    p[0].maxClockRate = 2000;
    p[0].maxBusWidth = 256;
    p[0].totalSize = sim_device_capacity(dev_of(h));
    snprintf(p[0].name, ZE_MAX_DEVICE_NAME, "simulated VRAM");
    *pCount = 1;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetMemoryAccessProperties(ze_device_handle_t h,
                                                             ze_device_memory_access_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    ze_memory_access_cap_flags_t rw = ZE_MEMORY_ACCESS_CAP_FLAG_RW | ZE_MEMORY_ACCESS_CAP_FLAG_ATOMIC;
    p->hostAllocCapabilities = rw;
    p->deviceAllocCapabilities = rw;
    p->sharedSingleDeviceAllocCapabilities = rw;
    p->sharedCrossDeviceAllocCapabilities = 0;
    p->sharedSystemAllocCapabilities = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetCommandQueueGroupProperties(
    ze_device_handle_t h, uint32_t *pCount, ze_command_queue_group_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(pCount);
    if (*pCount == 0 || p == NULL) {
        *pCount = 1;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE |
                 ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[0].maxMemoryFillPatternSize = SIM_FILL_PATTERN_MAX;
    p[0].numQueues = 1;
    *pCount = 1;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetExternalMemoryProperties(
    ze_device_handle_t h, ze_device_external_memory_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    p->memoryAllocationImportTypes = 0;
    p->memoryAllocationExportTypes = sim_cfg.dmabuf ? ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF : 0;
    p->imageImportTypes = 0;
    p->imageExportTypes = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetP2PProperties(ze_device_handle_t h, ze_device_handle_t peer,
                                                    ze_device_p2p_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_CHECK_DEVICE(peer);
    SIM_NOTNULL(p);
    int ok = sim_can_access(dev_of(h)->index, dev_of(peer)->index);
    p->flags = ok ? (ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS | ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS) : 0;
    for (ze_base_properties_t *e = p->pNext; e; e = e->pNext) {
        if (e->stype == ZE_STRUCTURE_TYPE_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES) {
            ze_device_p2p_bandwidth_exp_properties_t *bw = (void *)e;
            bw->logicalBandwidth = ok ? 32 : 0;
            bw->physicalBandwidth = ok ? 32 : 0;
            bw->bandwidthUnit = ZE_BANDWIDTH_UNIT_BYTES_PER_NANOSEC;
            bw->logicalLatency = ok ? 1000 : 0;
            bw->physicalLatency = ok ? 1000 : 0;
            bw->latencyUnit = ZE_LATENCY_UNIT_NANOSEC;
        }
    }
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceCanAccessPeer(ze_device_handle_t h, ze_device_handle_t peer,
                                                 ze_bool_t *value)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_CHECK_DEVICE(peer);
    SIM_NOTNULL(value);
    *value = sim_can_access(dev_of(h)->index, dev_of(peer)->index) ? 1 : 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetStatus(ze_device_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeDeviceGetGlobalTimestamps(ze_device_handle_t h, uint64_t *host,
                                                       uint64_t *device)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(host);
    SIM_NOTNULL(device);
    *host = sim_host_ns();
    *device = sim_ticks() & ((1ull << SIM_GLOBAL_TS_BITS) - 1);
    return sim_leave(ZE_RESULT_SUCCESS);
}

void sim_fill_pci(uint32_t index, uint32_t *domain, uint32_t *bus, uint32_t *dev, uint32_t *fn)
{
    *domain = 0;
    *bus = 0x10 + index; /* 0000:10:00.0, 0000:11:00.0, ... */
    *dev = 0;
    *fn = 0;
}

ze_result_t ZE_APICALL sim_zeDevicePciGetPropertiesExt(ze_device_handle_t h,
                                                       ze_pci_ext_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK_DEVICE(h);
    SIM_NOTNULL(p);
    sim_fill_pci(dev_of(h)->index, &p->address.domain, &p->address.bus, &p->address.device,
                 &p->address.function);
    p->maxSpeed.genVersion = 4;
    p->maxSpeed.width = 16;
    p->maxSpeed.maxBandwidth = 32000000000ll;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ------------------------------------------------------------------ context */

/* Both entry points create a context; `api` names the one called (for device_lost_on). */
static ze_result_t sim_context_create(const char *api, ze_driver_handle_t h,
                                      const ze_context_desc_t *desc, uint32_t numDevices,
                                      ze_device_handle_t *phDevices, ze_context_handle_t *ph)
{
    ze_result_t r = sim_enter_at(api);
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_DRIVER);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    uint32_t mask = 0;
    uint8_t sub_mask[SIM_MAX_DEVICES] = {0};
    if (numDevices == 0) {
        for (uint32_t i = 0; i < sim_cfg.devices; i++)
            if (sim_devices[i].visible)
                mask |= 1u << i;
    } else {
        SIM_NOTNULL(phDevices);
        /* Spec: a context can use the devices it was given and their sub-devices, not their roots. */
        for (uint32_t i = 0; i < numDevices; i++) {
            SIM_CHECK_DEVICE(phDevices[i]);
            const sim_device_t *d = dev_of(phDevices[i]);
            if (d->sub < 0)
                mask |= 1u << d->index;
            else
                sub_mask[d->index] |= (uint8_t)(1u << d->sub);
        }
    }
    sim_context_t *c = sim_obj_new(MAGIC_CONTEXT, sizeof(*c));
    if (!c)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    c->device_mask = mask;
    memcpy(c->sub_mask, sub_mask, sizeof(sub_mask));
    *ph = (ze_context_handle_t)c;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeContextCreateEx(ze_driver_handle_t h, const ze_context_desc_t *desc,
                                             uint32_t numDevices, ze_device_handle_t *phDevices,
                                             ze_context_handle_t *ph)
{
    return sim_context_create(__func__, h, desc, numDevices, phDevices, ph);
}

ze_result_t ZE_APICALL sim_zeContextCreate(ze_driver_handle_t h, const ze_context_desc_t *desc,
                                           ze_context_handle_t *ph)
{
    return sim_context_create(__func__, h, desc, 0, NULL, ph);
}

ze_result_t ZE_APICALL sim_zeContextDestroy(ze_context_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    /* Release even on a lost device, so the host-memory ground truth stays right. */
    sim_free_context_allocs((sim_context_t *)h);
    sim_obj_free(h);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeContextGetStatus(ze_context_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ------------------------------------------------------------------ sysman */

/*
 * Sysman describes whole cards. Intel's driver hands each sub-device its root's
 * Sysman device, so a tile's handle answers for its root here too.
 */
static sim_device_t *sysman_root(zes_device_handle_t h)
{
    return sim_root_of((const sim_device_t *)h);
}

#define SIM_SYSMAN_ENTER()                                                               \
    ze_result_t r = sim_enter();                                                         \
    if (r)                                                                               \
        return sim_leave(r);                                                             \
    if (!sim_sysman_enabled || !sim_cfg.sysman)                                          \
        return sim_leave(ZE_RESULT_ERROR_UNINITIALIZED)

ze_result_t ZE_APICALL sim_zesDeviceGetProperties(zes_device_handle_t h, zes_device_properties_t *p)
{
    SIM_SYSMAN_ENTER();
    SIM_CHECK_DEVICE((ze_device_handle_t)h);
    SIM_NOTNULL(p);
    sim_device_t *d = sysman_root(h);
    p->core.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    p->core.pNext = NULL;
    sim_fill_device_properties(d, &p->core);
    p->numSubdevices = sim_cfg.subdevices;
    snprintf(p->serialNumber, ZES_STRING_PROPERTY_SIZE, "ZESIM%04u", d->index);
    snprintf(p->boardNumber, ZES_STRING_PROPERTY_SIZE, "unknown");
    snprintf(p->brandName, ZES_STRING_PROPERTY_SIZE, "l0mem simulator");
    snprintf(p->modelName, ZES_STRING_PROPERTY_SIZE, "l0mem simulated GPU %u", d->index);
    snprintf(p->vendorName, ZES_STRING_PROPERTY_SIZE, "l0mem simulator");
    snprintf(p->driverVersion, ZES_STRING_PROPERTY_SIZE, "%u", sim_cfg.driver_version);
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zesDeviceEnumMemoryModules(zes_device_handle_t h, uint32_t *pCount,
                                                      zes_mem_handle_t *ph)
{
    SIM_SYSMAN_ENTER();
    SIM_CHECK_DEVICE((ze_device_handle_t)h);
    SIM_NOTNULL(pCount);
    /* A multi-tile card reports one memory module per tile, as Intel's driver does. */
    sim_device_t *d = sysman_root(h);
    uint32_t total = sim_cfg.subdevices ? sim_cfg.subdevices : 1;
    if (*pCount == 0 || ph == NULL) {
        *pCount = total;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    uint32_t n = *pCount < total ? *pCount : total;
    for (uint32_t k = 0; k < n; k++)
        ph[k] = sim_cfg.subdevices ? (zes_mem_handle_t)&sim_subdevices[d->index][k].memmod
                                   : (zes_mem_handle_t)&d->memmod;
    *pCount = n;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* The root device or tile a Sysman memory module describes. */
static const sim_device_t *memmod_device(const sim_memmod_t *m)
{
    return m->sub < 0 ? &sim_devices[m->device] : &sim_subdevices[m->device][m->sub];
}

ze_result_t ZE_APICALL sim_zesMemoryGetProperties(zes_mem_handle_t h, zes_mem_properties_t *p)
{
    SIM_SYSMAN_ENTER();
    SIM_CHECK(h, MAGIC_MEMMOD);
    SIM_NOTNULL(p);
    const sim_device_t *d = memmod_device((sim_memmod_t *)h);
    p->type = ZES_MEM_TYPE_GDDR6;
    p->onSubdevice = d->sub >= 0;
    p->subdeviceId = d->sub >= 0 ? (uint32_t)d->sub : 0;
    p->location = ZES_MEM_LOC_DEVICE;
    p->physicalSize = sim_device_capacity(d);
    p->busWidth = 256;
    p->numChannels = -1;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zesMemoryGetState(zes_mem_handle_t h, zes_mem_state_t *p)
{
    SIM_SYSMAN_ENTER();
    SIM_CHECK(h, MAGIC_MEMMOD);
    SIM_NOTNULL(p);
    const sim_device_t *d = memmod_device((sim_memmod_t *)h);
    uint64_t size = sim_device_capacity(d);
    uint64_t used = d->used;
    sim_shared_used(d->index, d->sub, &used); /* every process's, as a device counts */
    p->health = ZES_MEM_HEALTH_OK;
    p->size = size;
    p->free = used < size ? size - used : 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zesDevicePciGetProperties(zes_device_handle_t h, zes_pci_properties_t *p)
{
    SIM_SYSMAN_ENTER();
    SIM_CHECK_DEVICE((ze_device_handle_t)h);
    SIM_NOTNULL(p);
    sim_fill_pci(((sim_device_t *)h)->index, &p->address.domain, &p->address.bus,
                 &p->address.device, &p->address.function);
    p->maxSpeed.gen = 4;
    p->maxSpeed.width = 16;
    p->maxSpeed.maxBandwidth = 32000000000ll;
    p->haveBandwidthCounters = 0;
    p->havePacketCounters = 0;
    p->haveReplayCounters = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ------------------------------------------------------- control (ground truth) */

SIM_EXPORT int zesim_set(const char *key, const char *value)
{
    char err[300];
    if (!key || !value)
        return -1;
    pthread_mutex_lock(&sim_lock);
    int rc = sim_config_set(key, value, sim_initialized, err, sizeof(err));
    pthread_mutex_unlock(&sim_lock);
    if (rc)
        fprintf(stderr, "zesim: zesim_set: %s\n", err);
    return rc;
}

SIM_EXPORT uint64_t zesim_mirror_bytes(void)
{
    pthread_mutex_lock(&sim_lock);
    uint64_t v = sim_mirror_total();
    pthread_mutex_unlock(&sim_lock);
    return v;
}

SIM_EXPORT uint64_t zesim_device_used(uint32_t device)
{
    if (device >= SIM_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&sim_lock);
    uint64_t v = sim_devices[device].used;
    pthread_mutex_unlock(&sim_lock);
    return v;
}

SIM_EXPORT uint64_t zesim_host_used(void)
{
    pthread_mutex_lock(&sim_lock);
    uint64_t v = sim_host_alloc_bytes();
    pthread_mutex_unlock(&sim_lock);
    return v;
}

SIM_EXPORT uint64_t zesim_subdevice_used(uint32_t device, uint32_t sub)
{
    if (device >= SIM_MAX_DEVICES || sub >= SIM_MAX_SUBDEVICES)
        return 0;
    pthread_mutex_lock(&sim_lock);
    uint64_t v = sim_subdevices[device][sub].used;
    pthread_mutex_unlock(&sim_lock);
    return v;
}

SIM_EXPORT uint64_t zesim_bytes_moved(int32_t src_device, int32_t dst_device)
{
    if (src_device < -1 || dst_device < -1 || src_device >= SIM_MAX_DEVICES ||
        dst_device >= SIM_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&sim_lock);
    uint64_t v = sim_moved[src_device + 1][dst_device + 1];
    pthread_mutex_unlock(&sim_lock);
    return v;
}

uint64_t sim_locked_read(const uint64_t *counter)
{
    pthread_mutex_lock(&sim_lock);
    uint64_t v = *counter;
    pthread_mutex_unlock(&sim_lock);
    return v;
}

SIM_EXPORT uint64_t zesim_kernel_launches(void)
{
    return sim_locked_read(&sim_launches);
}

SIM_EXPORT void zesim_reset_counters(void)
{
    pthread_mutex_lock(&sim_lock);
    memset(sim_moved, 0, sizeof(sim_moved));
    sim_launches = 0;
    pthread_mutex_unlock(&sim_lock);
}
