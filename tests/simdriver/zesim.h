/*
 * l0mem simulated Level Zero driver: shared internal declarations.
 *
 * The simulator is test support only. It is built against the Level Zero
 * headers installed with the loader (API 1.4) and is loaded by the real loader
 * through ZE_ENABLE_ALT_DRIVERS. Nothing here is a hardware measurement.
 */
#ifndef ZESIM_H
#define ZESIM_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ze_api.h>
#include <zes_api.h>

/* DDI tables built from other header versions do not match loader 1.8's. */
_Static_assert(ZE_API_VERSION_CURRENT == ZE_MAKE_VERSION(1, 4),
               "the simulator must be built against the Level Zero 1.4 headers of loader 1.8");

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_MAX_DEVICES 16
#define SIM_MAX_FREE_DELAY_MS 600000 /* ten minutes: longer than any test waits */
#define SIM_MAX_SUBDEVICES 8 /* per root device; bits of sim_context_t.sub_mask */
#define SIM_MAX_ARGS 32
#define SIM_MAX_ARG_SIZE 64
#define SIM_FILL_PATTERN_MAX 128
#define SIM_TIMER_HZ 100000000ull /* 10 ns per device tick */
#define SIM_KERNEL_TS_BITS 32
#define SIM_GLOBAL_TS_BITS 36

enum sim_magic {
    MAGIC_DEAD = 0,
    MAGIC_DRIVER = 0x5a530001,
    MAGIC_DEVICE,
    MAGIC_CONTEXT,
    MAGIC_QUEUE,
    MAGIC_LIST,
    MAGIC_POOL,
    MAGIC_EVENT,
    MAGIC_FENCE,
    MAGIC_MODULE,
    MAGIC_BUILDLOG,
    MAGIC_KERNEL,
    MAGIC_MEMMOD,
};

enum sim_mirror_mode { MIRROR_NONE, MIRROR_PEER_RESIDENT, MIRROR_DMABUF, MIRROR_ALL };
/* Where a mirror's pages live: a memfd (Shmem) or a keeper process's anonymous memory (keeper.c). */
enum sim_mirror_kind { MIRROR_KIND_MEMFD, MIRROR_KIND_ANON };

/* The keeper is started by running this library as a program through its own _start (keeper.c). */
#if defined(__x86_64__) || defined(__aarch64__)
#define SIM_KEEPER_SUPPORTED 1
#else
#define SIM_KEEPER_SUPPORTED 0
#endif

typedef struct sim_config {
    uint32_t devices;
    uint64_t device_memory;
    uint8_t peers[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
    int mirror;
    int mirror_kind; /* enum sim_mirror_kind, for mirrors made from now on */
    double mirror_ratio;
    int mirror_release;
    int sysman;
    int dmabuf;
    int defer_backing_mirror; /* 1: mirrors exist only while deferred backing is on */
    uint32_t driver_version;
    int oom_after_on;
    uint64_t fail_oom_after;
    uint64_t fail_alloc_at;  /* 0: off */
    uint64_t device_lost_at; /* 0: off */
    char device_lost_on[64]; /* entry point from whose first call the device is lost; "": off */
    uint32_t subdevices;     /* sub-devices per root device, 0: none */
    int timestamp_not_ready; /* 1: zeEventQueryKernelTimestamp answers NOT_READY even when signalled */
    int fill_noop;           /* 1: fills complete without writing (an untouched allocation) */
    uint64_t free_delay_ms;  /* each zeMemFree waits this long before freeing; 0: at once */
    uint64_t corrupt_offsets[16]; /* peer copies: bytes at these destination offsets are flipped */
    uint32_t ncorrupt_offsets;
    double corrupt_rate;           /* peer copies: this share of the bytes is flipped (seeded) */
    uint64_t corrupt_seed;
    uint64_t hang_copy_at;         /* the K-th peer copy never completes; 0: off */
    double link_gbps;              /* copy engines with a host link of this speed; 0: off */
    char shared_state[256];  /* file shared by simulator processes for device-wide usage; "": off */
} sim_config_t;

typedef struct sim_memmod {
    uint32_t magic;
    uint32_t device;
    int sub; /* -1: the whole root device, else the tile it describes */
} sim_memmod_t;

/*
 * A root device (sim_devices[index]) or a sub-device (sim_subdevices[index][sub]).
 * A sub-device keeps its root's configured index, so peers, mirrors, bytes
 * moved and PCI location follow the card it belongs to.
 */
typedef struct sim_device {
    uint32_t magic;
    uint32_t index;      /* configured index of the root device */
    int visible;         /* listed by ZE_AFFINITY_MASK (or no mask); roots only */
    uint64_t used;       /* live device allocation bytes (a root's include its sub-devices') */
    uint64_t oom_bytes;  /* bytes allocated since fail_oom_after was set; roots only */
    sim_memmod_t memmod; /* a root's Sysman module when it has no sub-devices, else a tile's */
    int sub;             /* -1 for a root device, else the sub-device id */
} sim_device_t;

typedef struct sim_driver {
    uint32_t magic;
} sim_driver_t;

typedef struct sim_context {
    uint32_t magic;
    uint32_t device_mask;                 /* root devices given, with all their sub-devices */
    uint8_t sub_mask[SIM_MAX_DEVICES];    /* sub-devices given without their root */
} sim_context_t;

typedef struct sim_alloc {
    struct sim_alloc *next;
    uint64_t id;
    uint8_t *base;
    size_t size;
    uint8_t *map_base;
    size_t map_size;
    ze_memory_type_t type;
    int device; /* owner's configured root index, -1 for host allocations */
    int sub;    /* owner's sub-device id, -1 when owned by a root device or none */
    sim_context_t *ctx;
    int exportable;
    uint32_t resident_peers; /* bit per peer root device made resident */
    uint8_t resident_tiles[SIM_MAX_DEVICES]; /* bit per peer sub-device made resident */
    int mirrored;      /* a mirror exists (of either kind; possibly of 0 bytes) */
    int mirror_fd;     /* memfd kind: the memfd, else -1 */
    int mirror_anon;   /* anon kind: held by the keeper (keeper.c) */
    uint32_t mirror_gen;  /* anon kind: the keeper generation that holds it */
    uint32_t mirror_slot; /* anon kind: the keeper's slot */
    uint64_t mirror_bytes;
    uint32_t ipc_opens;
} sim_alloc_t;

typedef struct sim_pool {
    uint32_t magic;
    uint32_t count;
    ze_event_pool_flags_t flags;
    uint8_t *used_index;
} sim_pool_t;

typedef struct sim_event {
    uint32_t magic;
    sim_pool_t *pool;
    uint32_t index;
    int signaled;
    int never; /* its command hung, or waits behind one: it will not be signalled */
    uint64_t ts_start;
    uint64_t ts_end;
    uint64_t ready_ns; /* link model: host time from which it counts as complete (0: at once) */
} sim_event_t;

typedef struct sim_fence {
    uint32_t magic;
    int signaled;
    uint64_t ready_ns; /* link model: as for events */
} sim_fence_t;

typedef struct sim_module sim_module_t;

typedef struct sim_kernel {
    uint32_t magic;
    sim_module_t *module;
    char *name;
    int builtin; /* index into the reference kernels, -1 if none */
    uint32_t nargs;
    uint64_t arg_set; /* bit per argument set */
    uint8_t args[SIM_MAX_ARGS][SIM_MAX_ARG_SIZE];
    uint32_t arg_size[SIM_MAX_ARGS];
    uint32_t group[3];
} sim_kernel_t;

typedef struct sim_entry {
    char *name;
    uint32_t nargs;
} sim_entry_t;

struct sim_module {
    uint32_t magic;
    uint32_t nentries;
    sim_entry_t *entries;
    const char **names; /* views of entries[i].name, for zeModuleGetKernelNames */
};

typedef struct sim_buildlog {
    uint32_t magic;
    char *text;
} sim_buildlog_t;

enum sim_cmd_kind {
    CMD_COPY,
    CMD_FILL,
    CMD_BARRIER,
    CMD_KERNEL,
    CMD_SIGNAL,
    CMD_WAIT,
    CMD_RESET,
    CMD_TS_WRITE,
    CMD_TS_QUERY,
};

typedef struct sim_cmd {
    enum sim_cmd_kind kind;
    sim_event_t *signal;
    uint32_t nwait;
    sim_event_t **wait;
    union {
        struct {
            void *dst;
            const void *src;
            size_t size;
            uint64_t dst_id, src_id; /* allocation ids at append, 0 for other memory */
        } copy;
        struct {
            void *ptr;
            uint8_t pattern[SIM_FILL_PATTERN_MAX];
            size_t pattern_size;
            size_t size;
            uint64_t ptr_id;
        } fill;
        struct {
            int builtin;
            char *name;
            uint64_t args[3];
            uint32_t group[3];
            uint32_t count[3];
        } kernel;
        struct {
            uint64_t *dst;
        } ts;
        struct {
            uint32_t n;
            sim_event_t **events;
            uint8_t *dst;
            size_t *offsets;
        } tsq;
        struct {
            sim_event_t *event;
        } ev;
    } u;
} sim_cmd_t;

typedef struct sim_list {
    uint32_t magic;
    int immediate;
    int hung;  /* an immediate list behind a hung copy: nothing on it runs or signals */
    int closed;
    const sim_device_t *device;
    size_t ncmds;
    size_t cap;
    sim_cmd_t *cmds;
} sim_list_t;

typedef struct sim_queue {
    uint32_t magic;
    int hung;  /* a queue behind a hung copy: nothing on it runs or signals */
    const sim_device_t *device;
} sim_queue_t;

/* Driver variables read at the first zeInit (driverenv.c). */
typedef struct sim_drv_env {
    int read_debug_keys;   /* NEOReadDebugKeys set non-zero */
    long force_can_access; /* -1: no override, else 0 or 1 */
    int defer_backing;     /* 0 after NEOReadDebugKeys=1 EnableDeferBacking=0 */
} sim_drv_env_t;

/* Global state, guarded by sim_lock. */
extern pthread_mutex_t sim_lock;
extern pthread_cond_t sim_cond;
extern sim_config_t sim_cfg;
extern sim_driver_t sim_driver;
extern sim_device_t sim_devices[SIM_MAX_DEVICES];
extern sim_device_t sim_subdevices[SIM_MAX_DEVICES][SIM_MAX_SUBDEVICES];
extern int sim_initialized;
extern int sim_sysman_enabled;
extern uint64_t sim_moved[SIM_MAX_DEVICES + 1][SIM_MAX_DEVICES + 1];
extern uint64_t sim_launches;
extern uint64_t sim_api_calls;
extern uint64_t sim_alloc_calls;
extern int sim_lost;
extern uint64_t sim_leaked_mirror_bytes;
extern sim_drv_env_t sim_drv_env;

/* Entry bracket: lock, count the call, report a lost device. `api` is the entry point's
 * C name (sim_zeXxx), which the device_lost_on key matches. */
ze_result_t sim_enter_at(const char *api);
#define sim_enter() sim_enter_at(__func__)
ze_result_t sim_leave(ze_result_t result);

/* Objects: memory is recycled per type, never returned, so stale handles stay readable. */
void *sim_obj_new(uint32_t magic, size_t size);
void sim_obj_free(void *obj);
int sim_obj_is(const void *handle, uint32_t magic);
#define SIM_CHECK(handle, magic)                                                         \
    do {                                                                                 \
        if ((handle) == NULL)                                                            \
            return sim_leave(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);                       \
        if (!sim_obj_is((handle), (magic)))                                              \
            return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);                          \
    } while (0)
#define SIM_NOTNULL(ptr)                                                                 \
    do {                                                                                 \
        if ((ptr) == NULL)                                                               \
            return sim_leave(ZE_RESULT_ERROR_INVALID_NULL_POINTER);                      \
    } while (0)

/* config.c */
int sim_config_load(void);
int sim_shared_open(void);
/* Copy faults (faults.c): SIM_HUNG from run_copy means the copy never completes. */
#define SIM_HUNG ((ze_result_t)0x7ff0beef)
int sim_copy_hangs(int src_device, int dst_device);
void sim_fault_point(const char *point); /* ZESIM_HANG_IN / ZESIM_ABORT_IN (faults.c) */
void sim_copy_corrupt(int src_device, int dst_device, uint8_t *dst, const uint8_t *src, size_t size);
void sim_faults_reset(void);
uint64_t sim_locked_read(const uint64_t *counter); /* a counter read under sim_lock */
void sim_shared_charge(uint32_t device, int sub, uint64_t size, int sign);
int sim_shared_used(uint32_t device, int sub, uint64_t *out);
int sim_offers_init_drivers(void);
int sim_config_set(const char *key, const char *value, int runtime, char *err, size_t errlen);

/* driverenv.c */
void sim_drv_env_load(void);
/* Handles of the devices zeDeviceGet reports, up to max; returns their number. */
uint32_t sim_visible_devices(ze_device_handle_t *out, uint32_t max);
/* Whether d is configured and visible under ZE_AFFINITY_MASK (a sub-device: its root is). */
int sim_device_usable(const sim_device_t *d);
/* zeDeviceCanAccessPeer: device a can access device b's memory (configured indices). */
int sim_can_access(uint32_t a, uint32_t b);
/* Whether mirrors are made at all (mirror mode, EnableDeferBacking, defer_backing_mirror). */
int sim_mirrors_enabled(void);

/* subdev.c */
void sim_subdevices_init(void);
/* Bytes of device memory of d: device_memory for a root, its share for a sub-device. */
uint64_t sim_device_capacity(const sim_device_t *d);
/* Bytes of a root-device allocation of size bytes that tile sub holds. */
uint64_t sim_root_part(uint64_t size, uint32_t sub);
/* Whether context ctx may use device d (a root it names, or a sub-device of one). */
int sim_context_has(const sim_context_t *ctx, const sim_device_t *d);
uint64_t sim_host_alloc_bytes(void);
void sim_engines_reset(void);

/* The device handle that owns allocation a, or NULL for host memory. */
ze_device_handle_t sim_alloc_owner(const sim_alloc_t *a);
/* The root device of d (d itself for a root). */
sim_device_t *sim_root_of(const sim_device_t *d);

/* memory.c */
sim_alloc_t *sim_alloc_find(const void *ptr);
int sim_ptr_device(const void *ptr);
ze_result_t sim_check_range(const void *ptr, size_t size);
void sim_free_context_allocs(sim_context_t *ctx);
uint64_t sim_mirror_total(void);
/* The keeper of generation gen died: forget the mirrors it held (their pages are gone). */
void sim_anon_mirrors_lost(uint32_t gen);

/* keeper.c, with sim_lock held: hold bytes of anonymous memory for allocation id in the
 * keeper process (started at the first call), or drop them again. */
ze_result_t sim_keeper_hold(uint64_t id, uint64_t bytes, uint32_t *gen, uint32_t *slot);
void sim_keeper_drop(uint32_t gen, uint32_t slot, uint64_t id);
void sim_zero_device_range(uint8_t *ptr, size_t size);

/* exec.c */
uint64_t sim_ticks(void);
uint64_t sim_host_ns(void);

/* module.c */
int sim_builtin_index(const char *name);
ze_result_t sim_run_builtin(int builtin, const char *name, const uint64_t args[3],
                            const uint32_t group[3], const uint32_t count[3]);

/* DDI table filling helpers (ddi.c) */
void sim_fill_unsupported(void *table, size_t size);

/* Implemented entry points, referenced by the DDI tables. */
#define SIM_DECL(name, ...) ze_result_t ZE_APICALL sim_##name(__VA_ARGS__)
SIM_DECL(zeInit, ze_init_flags_t flags);
/* zeInitDrivers (API 1.10): its descriptor type is not in the 1.4 headers. */
SIM_DECL(zeInitDrivers, uint32_t *pCount, ze_driver_handle_t *phDrivers, const void *desc);
SIM_DECL(zeDriverGet, uint32_t *pCount, ze_driver_handle_t *phDrivers);
SIM_DECL(zeDriverGetApiVersion, ze_driver_handle_t h, ze_api_version_t *version);
SIM_DECL(zeDriverGetProperties, ze_driver_handle_t h, ze_driver_properties_t *p);
SIM_DECL(zeDriverGetIpcProperties, ze_driver_handle_t h, ze_driver_ipc_properties_t *p);
SIM_DECL(zeDriverGetExtensionProperties, ze_driver_handle_t h, uint32_t *pCount,
         ze_driver_extension_properties_t *p);
SIM_DECL(zeDriverGetExtensionFunctionAddress, ze_driver_handle_t h, const char *name,
         void **ppFunctionAddress);
SIM_DECL(zeDeviceGet, ze_driver_handle_t h, uint32_t *pCount, ze_device_handle_t *phDevices);
SIM_DECL(zeDeviceGetSubDevices, ze_device_handle_t h, uint32_t *pCount, ze_device_handle_t *ph);
SIM_DECL(zeDeviceGetProperties, ze_device_handle_t h, ze_device_properties_t *p);
SIM_DECL(zeDeviceGetComputeProperties, ze_device_handle_t h, ze_device_compute_properties_t *p);
SIM_DECL(zeDeviceGetModuleProperties, ze_device_handle_t h, ze_device_module_properties_t *p);
SIM_DECL(zeDeviceGetMemoryProperties, ze_device_handle_t h, uint32_t *pCount,
         ze_device_memory_properties_t *p);
SIM_DECL(zeDeviceGetMemoryAccessProperties, ze_device_handle_t h,
         ze_device_memory_access_properties_t *p);
SIM_DECL(zeDeviceGetCommandQueueGroupProperties, ze_device_handle_t h, uint32_t *pCount,
         ze_command_queue_group_properties_t *p);
SIM_DECL(zeDeviceGetExternalMemoryProperties, ze_device_handle_t h,
         ze_device_external_memory_properties_t *p);
SIM_DECL(zeDeviceGetP2PProperties, ze_device_handle_t h, ze_device_handle_t peer,
         ze_device_p2p_properties_t *p);
SIM_DECL(zeDeviceCanAccessPeer, ze_device_handle_t h, ze_device_handle_t peer, ze_bool_t *value);
SIM_DECL(zeDeviceGetStatus, ze_device_handle_t h);
SIM_DECL(zeDeviceGetGlobalTimestamps, ze_device_handle_t h, uint64_t *host, uint64_t *device);
SIM_DECL(zeDevicePciGetPropertiesExt, ze_device_handle_t h, ze_pci_ext_properties_t *p);
SIM_DECL(zeContextCreate, ze_driver_handle_t h, const ze_context_desc_t *desc,
         ze_context_handle_t *ph);
SIM_DECL(zeContextCreateEx, ze_driver_handle_t h, const ze_context_desc_t *desc,
         uint32_t numDevices, ze_device_handle_t *phDevices, ze_context_handle_t *ph);
SIM_DECL(zeContextDestroy, ze_context_handle_t h);
SIM_DECL(zeContextGetStatus, ze_context_handle_t h);
SIM_DECL(zeContextMakeMemoryResident, ze_context_handle_t h, ze_device_handle_t dev, void *ptr,
         size_t size);
SIM_DECL(zeContextEvictMemory, ze_context_handle_t h, ze_device_handle_t dev, void *ptr,
         size_t size);
SIM_DECL(zeMemAllocShared, ze_context_handle_t h, const ze_device_mem_alloc_desc_t *ddesc,
         const ze_host_mem_alloc_desc_t *hdesc, size_t size, size_t alignment,
         ze_device_handle_t dev, void **pptr);
SIM_DECL(zeMemAllocDevice, ze_context_handle_t h, const ze_device_mem_alloc_desc_t *desc,
         size_t size, size_t alignment, ze_device_handle_t dev, void **pptr);
SIM_DECL(zeMemAllocHost, ze_context_handle_t h, const ze_host_mem_alloc_desc_t *desc,
         size_t size, size_t alignment, void **pptr);
SIM_DECL(zeMemFree, ze_context_handle_t h, void *ptr);
SIM_DECL(zeMemFreeExt, ze_context_handle_t h, const ze_memory_free_ext_desc_t *desc, void *ptr);
SIM_DECL(zeMemGetAllocProperties, ze_context_handle_t h, const void *ptr,
         ze_memory_allocation_properties_t *p, ze_device_handle_t *phDevice);
SIM_DECL(zeMemGetAddressRange, ze_context_handle_t h, const void *ptr, void **pBase,
         size_t *pSize);
SIM_DECL(zeMemGetIpcHandle, ze_context_handle_t h, const void *ptr, ze_ipc_mem_handle_t *ipc);
SIM_DECL(zeMemOpenIpcHandle, ze_context_handle_t h, ze_device_handle_t dev,
         ze_ipc_mem_handle_t ipc, ze_ipc_memory_flags_t flags, void **pptr);
SIM_DECL(zeMemCloseIpcHandle, ze_context_handle_t h, const void *ptr);
SIM_DECL(zeCommandQueueCreate, ze_context_handle_t h, ze_device_handle_t dev,
         const ze_command_queue_desc_t *desc, ze_command_queue_handle_t *ph);
SIM_DECL(zeCommandQueueDestroy, ze_command_queue_handle_t h);
SIM_DECL(zeCommandQueueExecuteCommandLists, ze_command_queue_handle_t h, uint32_t n,
         ze_command_list_handle_t *lists, ze_fence_handle_t fence);
SIM_DECL(zeCommandQueueSynchronize, ze_command_queue_handle_t h, uint64_t timeout);
SIM_DECL(zeCommandListCreate, ze_context_handle_t h, ze_device_handle_t dev,
         const ze_command_list_desc_t *desc, ze_command_list_handle_t *ph);
SIM_DECL(zeCommandListCreateImmediate, ze_context_handle_t h, ze_device_handle_t dev,
         const ze_command_queue_desc_t *desc, ze_command_list_handle_t *ph);
SIM_DECL(zeCommandListDestroy, ze_command_list_handle_t h);
SIM_DECL(zeCommandListClose, ze_command_list_handle_t h);
SIM_DECL(zeCommandListReset, ze_command_list_handle_t h);
SIM_DECL(zeCommandListAppendWriteGlobalTimestamp, ze_command_list_handle_t h, uint64_t *dst,
         ze_event_handle_t sig, uint32_t nwait, ze_event_handle_t *waits);
SIM_DECL(zeCommandListAppendBarrier, ze_command_list_handle_t h, ze_event_handle_t sig,
         uint32_t nwait, ze_event_handle_t *waits);
SIM_DECL(zeCommandListAppendMemoryCopy, ze_command_list_handle_t h, void *dst, const void *src,
         size_t size, ze_event_handle_t sig, uint32_t nwait, ze_event_handle_t *waits);
SIM_DECL(zeCommandListAppendMemoryFill, ze_command_list_handle_t h, void *ptr,
         const void *pattern, size_t pattern_size, size_t size, ze_event_handle_t sig,
         uint32_t nwait, ze_event_handle_t *waits);
SIM_DECL(zeCommandListAppendSignalEvent, ze_command_list_handle_t h, ze_event_handle_t ev);
SIM_DECL(zeCommandListAppendWaitOnEvents, ze_command_list_handle_t h, uint32_t n,
         ze_event_handle_t *events);
SIM_DECL(zeCommandListAppendEventReset, ze_command_list_handle_t h, ze_event_handle_t ev);
SIM_DECL(zeCommandListAppendQueryKernelTimestamps, ze_command_list_handle_t h, uint32_t n,
         ze_event_handle_t *events, void *dst, const size_t *offsets, ze_event_handle_t sig,
         uint32_t nwait, ze_event_handle_t *waits);
SIM_DECL(zeCommandListAppendLaunchKernel, ze_command_list_handle_t h, ze_kernel_handle_t k,
         const ze_group_count_t *count, ze_event_handle_t sig, uint32_t nwait,
         ze_event_handle_t *waits);
SIM_DECL(zeEventPoolCreate, ze_context_handle_t h, const ze_event_pool_desc_t *desc,
         uint32_t ndev, ze_device_handle_t *devs, ze_event_pool_handle_t *ph);
SIM_DECL(zeEventPoolDestroy, ze_event_pool_handle_t h);
SIM_DECL(zeEventCreate, ze_event_pool_handle_t h, const ze_event_desc_t *desc,
         ze_event_handle_t *ph);
SIM_DECL(zeEventDestroy, ze_event_handle_t h);
SIM_DECL(zeEventHostSignal, ze_event_handle_t h);
SIM_DECL(zeEventHostSynchronize, ze_event_handle_t h, uint64_t timeout);
SIM_DECL(zeEventQueryStatus, ze_event_handle_t h);
SIM_DECL(zeEventHostReset, ze_event_handle_t h);
SIM_DECL(zeEventQueryKernelTimestamp, ze_event_handle_t h, ze_kernel_timestamp_result_t *ts);
SIM_DECL(zeFenceCreate, ze_command_queue_handle_t h, const ze_fence_desc_t *desc,
         ze_fence_handle_t *ph);
SIM_DECL(zeFenceDestroy, ze_fence_handle_t h);
SIM_DECL(zeFenceHostSynchronize, ze_fence_handle_t h, uint64_t timeout);
SIM_DECL(zeFenceQueryStatus, ze_fence_handle_t h);
SIM_DECL(zeFenceReset, ze_fence_handle_t h);
SIM_DECL(zeModuleCreate, ze_context_handle_t h, ze_device_handle_t dev,
         const ze_module_desc_t *desc, ze_module_handle_t *ph,
         ze_module_build_log_handle_t *phLog);
SIM_DECL(zeModuleDestroy, ze_module_handle_t h);
SIM_DECL(zeModuleGetKernelNames, ze_module_handle_t h, uint32_t *pCount, const char **pNames);
SIM_DECL(zeModuleBuildLogDestroy, ze_module_build_log_handle_t h);
SIM_DECL(zeModuleBuildLogGetString, ze_module_build_log_handle_t h, size_t *pSize, char *log);
SIM_DECL(zeKernelCreate, ze_module_handle_t h, const ze_kernel_desc_t *desc,
         ze_kernel_handle_t *ph);
SIM_DECL(zeKernelDestroy, ze_kernel_handle_t h);
SIM_DECL(zeKernelSetGroupSize, ze_kernel_handle_t h, uint32_t x, uint32_t y, uint32_t z);
SIM_DECL(zeKernelSuggestGroupSize, ze_kernel_handle_t h, uint32_t gx, uint32_t gy, uint32_t gz,
         uint32_t *x, uint32_t *y, uint32_t *z);
SIM_DECL(zeKernelSetArgumentValue, ze_kernel_handle_t h, uint32_t index, size_t size,
         const void *value);
SIM_DECL(zeKernelGetProperties, ze_kernel_handle_t h, ze_kernel_properties_t *p);
SIM_DECL(zeKernelGetName, ze_kernel_handle_t h, size_t *pSize, char *name);
SIM_DECL(zesDeviceGetProperties, zes_device_handle_t h, zes_device_properties_t *p);
SIM_DECL(zesDeviceEnumMemoryModules, zes_device_handle_t h, uint32_t *pCount,
         zes_mem_handle_t *ph);
SIM_DECL(zesMemoryGetProperties, zes_mem_handle_t h, zes_mem_properties_t *p);
SIM_DECL(zesMemoryGetState, zes_mem_handle_t h, zes_mem_state_t *p);
SIM_DECL(zesDevicePciGetProperties, zes_device_handle_t h, zes_pci_properties_t *p);

/* Shared between core.c and the sysman entry points. */
void sim_fill_device_properties(const sim_device_t *d, ze_device_properties_t *p);
void sim_fill_pci(uint32_t index, uint32_t *domain, uint32_t *bus, uint32_t *dev, uint32_t *fn);

#endif
