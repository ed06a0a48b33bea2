/*
 * l0mem allocation tracer: a Level Zero "driver" that forwards to the real one.
 *
 * The loader loads this library as a driver (ZE_ENABLE_ALT_DRIVERS=<this>) and
 * asks it for its DDI tables. Each exported table getter calls the same getter of
 * the real driver (the first library of L0MEM_TRACE_DRIVERS that loads), keeps the
 * real function pointers it needs and replaces only the slots it traces. Every
 * loader reaches drivers this way, including the copies linked into SYCL
 * runtimes, which dlopen the loader where LD_PRELOAD cannot interpose.
 *
 * Records go to a file of their own per process in L0MEM_TRACE_DIR, mapped shared
 * into the process: a record is copied there, with no system call, so a slow reader
 * or a child closing descriptors never blocks or breaks the workload. L0MEM_TRACE_DIR may list several directories,
 * separated by ':' (a traced run inside a traced run): each gets every record. A wrapped call always returns exactly what the real
 * driver returned, except zeContextMakeMemoryResident on a peer device under
 * L0MEM_TRACE_NO_PEER_RESIDENCY=1, which is skipped and reports success.
 *
 * No Level Zero header is needed: the few types used are declared here, and a
 * DDI table is only touched up to its last slot used (tables are append-only).
 * Record layout: l0mem/trace/records.py.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint32_t lt_result;
typedef uint32_t lt_version;
typedef void *lt_handle;
typedef lt_result (*lt_getter)(lt_version, void *);

#define LT_SUCCESS 0u
#define LT_ERROR_UNINITIALIZED 0x78000001u
#define LT_ERROR_UNSUPPORTED_FEATURE 0x78000003u
#define LT_MINOR(v) ((v)&0xffffu)

#define STYPE_DEVICE_PROPERTIES 0x3u
#define STYPE_MEMORY_ALLOCATION_PROPERTIES 0x17u
#define STYPE_PCI_EXT_PROPERTIES 0x10008u
#define STYPE_DRIVER_DDI_HANDLES_EXT_PROPERTIES 0x00020027u
#define DDI_HANDLE_EXT_SUPPORTED 1u
#define DDI_HANDLES_EXT_NAME "ZE_extension_driver_ddi_handles"

typedef struct {
    uint32_t stype;
    void *pNext;
} lt_base;

typedef struct {
    uint32_t stype;
    void *pNext;
    uint32_t type, vendorId, deviceId, flags, subdeviceId, coreClockRate;
    uint64_t maxMemAllocSize;
    uint32_t maxHardwareContexts, maxCommandQueuePriority, numThreadsPerEU, physicalEUSimdWidth;
    uint32_t numEUsPerSubslice, numSubslicesPerSlice, numSlices;
    uint64_t timerResolution;
    uint32_t timestampValidBits, kernelTimestampValidBits;
    uint8_t uuid[16];
    char name[256];
} lt_device_properties;

typedef struct {
    uint32_t stype;
    void *pNext;
    uint32_t domain, bus, device, function;
    int32_t genVersion, width;
    int64_t maxBandwidth;
} lt_pci_ext_properties;

typedef struct {
    uint32_t stype;
    void *pNext;
    uint32_t type;
    uint64_t id;
    uint64_t pageSize;
} lt_memory_allocation_properties;

typedef struct {
    char name[256];
    uint32_t version;
} lt_extension_properties;

typedef struct {
    uint32_t stype;
    void *pNext;
    uint32_t flags;
} lt_ddi_handles_properties;

/* Slot indices of the DDI tables (ze_ddi.h). */
enum { DRV_GET = 0, DRV_GET_PROPERTIES = 2, DRV_GET_EXTENSION_PROPERTIES = 4 };
enum { DEV_GET = 0, DEV_GET_SUB_DEVICES = 1, DEV_GET_PROPERTIES = 2, DEV_CAN_ACCESS_PEER = 12,
       DEV_PCI_GET_PROPERTIES_EXT = 17 };
enum { CTX_CREATE = 0, CTX_DESTROY = 1, CTX_MAKE_MEMORY_RESIDENT = 4, CTX_EVICT_MEMORY = 5,
       CTX_CREATE_EX = 8 };
enum { MEM_ALLOC_SHARED = 0, MEM_ALLOC_DEVICE = 1, MEM_ALLOC_HOST = 2, MEM_FREE = 3,
       MEM_GET_ALLOC_PROPERTIES = 4, MEM_FREE_EXT = 9 };

typedef void (*lt_fn)(void);
#define SLOT(table, i) (((lt_fn *)(table))[i])

/* Record kinds and layout: keep equal to records.py. */
enum {
    REC_PROCESS = 1, REC_DEVICE, REC_ALLOC_DEVICE, REC_ALLOC_HOST, REC_ALLOC_SHARED, REC_FREE,
    REC_FREE_EXT, REC_RESIDENT, REC_EVICT, REC_CONTEXT_CREATE, REC_CONTEXT_CREATE_EX,
    REC_CONTEXT_DESTROY, REC_CAN_ACCESS_PEER, REC_BEGIN
};
#define REC_FLAG_SKIPPED 1u
#define REC_FLAG_HAS_PCI 2u
#define TRACE_FORMAT 1u

typedef struct {
    uint16_t kind, flags;
    uint32_t result;
    uint64_t time_ns, ptr, size, context;
    int32_t owner, target;
    int16_t owner_sub, target_sub;
    uint32_t lost;
    uint64_t aux;
} lt_record;
_Static_assert(sizeof(lt_record) == 64, "record header is 64 bytes");

typedef struct {
    lt_record head;
    uint8_t uuid[16];
    uint32_t pci[4];
    char name[256];
} lt_device_record;
_Static_assert(sizeof(lt_device_record) == 352, "device record is 352 bytes");

#define MAX_DEVICES 256
typedef struct {
    lt_handle handle;
    int32_t index;
    int16_t sub;
    lt_device_record desc;
} lt_device;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_real;
static int g_no_peer_residency;
#define MAX_SINKS 4
#define CHUNK ((size_t)256 << 10)     /* the file grows by this much at a time */
#define MAX_SPAN ((size_t)16 << 30)   /* address space reserved for one file, at most */
#define MIN_SPAN ((size_t)64 << 20)
/*
 * One directory the records go to, and this process's file in it, mapped shared: a
 * record is copied into the mapping, so a traced call makes no system call (the file
 * grows, under g_grow, once per CHUNK). The file is open only while it grows: a
 * workload closing descriptors cannot break it.
 */
typedef struct {
    char dir[4096];
    char path[4200];
    char *base;    /* the reserved addresses; the file is mapped from their start */
    size_t span;   /* bytes reserved */
    size_t mapped; /* bytes of the file mapped (atomic) */
    size_t next;   /* where the next record goes (atomic) */
    uint32_t lost; /* records this file missed (atomic) */
    uint32_t *written; /* bytes written into each CHUNK of the file (atomic) */
} lt_sink;
static lt_sink g_sinks[MAX_SINKS];
static int g_nsinks;

/* Real functions, kept from the real driver's tables. */
static lt_fn r_driver[5], r_device[18], r_context[9], r_mem[10];

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* devices */
static pthread_mutex_t g_grow = PTHREAD_MUTEX_INITIALIZER; /* creating and growing files */
static lt_device g_devices[MAX_DEVICES];
static int g_ndevices;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Copies a record to `off` in the mapping, its first 8 bytes (kind, flags, result) last:
 * a reader takes a kind of 0 for a record not written yet, and waits for it.
 */
static void put(lt_sink *s, size_t off, const void *rec, size_t len)
{
    char *slot = s->base + off;
    uint64_t first;
    memcpy(slot + sizeof(first), (const char *)rec + sizeof(first), len - sizeof(first));
    memcpy(&first, rec, sizeof(first));
    __atomic_store_n((uint64_t *)(void *)slot, first, __ATOMIC_RELEASE);
    /*
     * A chunk every byte of which is written is needed no more: its pages would only
     * count in the workload's RSS (RssFile, RssShmem), which l0mem measures. The writer
     * that completes it puts the reservation back (the file keeps the records).
     */
    for (size_t end = off + len; off < end;) {
        size_t chunk = off / CHUNK, stop = (chunk + 1) * CHUNK < end ? (chunk + 1) * CHUNK : end;
        if (__atomic_add_fetch(&s->written[chunk], (uint32_t)(stop - off), __ATOMIC_ACQ_REL) ==
            CHUNK)
            mmap(s->base + chunk * CHUNK, CHUNK, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        off = stop;
    }
}

/* Reserves addresses and creates the file, starting with the process and the known devices. */
static int create_file_locked(lt_sink *s)
{
    for (size_t span = MAX_SPAN; span >= MIN_SPAN && !s->base; span /= 2) {
        void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            s->base = p;
            s->span = span;
        }
    }
    if (!s->base)
        return -1;
    if (!s->written) {
        void *w = mmap(NULL, s->span / CHUNK * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (w == MAP_FAILED)
            return -1;
        s->written = w;
    }
    snprintf(s->path, sizeof(s->path), "%s/%d-%llu.l0trace", s->dir, (int)getpid(),
             (unsigned long long)now_ns());
    int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int map_more_locked(lt_sink *s, size_t size)
{
    int fd = open(s->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* Blocks taken now: a full file system fails here, never later with SIGBUS in a store. */
    int ok = posix_fallocate(fd, (off_t)s->mapped, (off_t)(size - s->mapped)) == 0 &&
             mmap(s->base + s->mapped, size - s->mapped, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_FIXED, fd, (off_t)s->mapped) != MAP_FAILED;
    close(fd);
    return ok ? 0 : -1;
}

/* Makes at least `need` bytes of the file mapped. */
static int grow(lt_sink *s, size_t need)
{
    pthread_mutex_lock(&g_grow);
    int res = 0;
    size_t mapped = s->mapped;
    if (mapped < need) {
        int fresh = !s->path[0];
        size_t size = mapped;
        while (size < need)
            size += CHUNK;
        if ((fresh && create_file_locked(s) != 0) || size > s->span ||
            map_more_locked(s, size) != 0) {
            if (fresh)
                s->path[0] = 0;
            res = -1;
        } else if (fresh) {
            lt_record head = {.kind = REC_PROCESS, .time_ns = now_ns(),
                              .ptr = (uint64_t)getppid(), .size = TRACE_FORMAT, .owner = -1,
                              .target = -1, .owner_sub = -1, .target_sub = -1,
                              .lost = s->lost, .aux = (uint64_t)getpid()};
            size_t off = 0;
            put(s, off, &head, sizeof(head));
            off += sizeof(head);
            int n = __atomic_load_n(&g_ndevices, __ATOMIC_ACQUIRE);
            for (int i = 0; i < n && off + sizeof(lt_device_record) <= size; i++) {
                lt_device_record d = g_devices[i].desc;
                d.head.lost = s->lost;
                put(s, off, &d, sizeof(d));
                off += sizeof(d);
            }
            __atomic_store_n(&s->next, off, __ATOMIC_RELAXED);
        }
        if (res == 0)
            __atomic_store_n(&s->mapped, size, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_grow);
    return res;
}

/* Reserves `len` bytes in the file, growing it when full; returns the offset, or -1. */
static long long reserve(lt_sink *s, size_t len)
{
    size_t cur = __atomic_load_n(&s->next, __ATOMIC_RELAXED);
    for (;;) {
        if (cur + len > __atomic_load_n(&s->mapped, __ATOMIC_ACQUIRE)) {
            if (grow(s, cur + len) != 0)
                return -1;
            cur = __atomic_load_n(&s->next, __ATOMIC_RELAXED);
            continue;
        }
        if (__atomic_compare_exchange_n(&s->next, &cur, cur + len, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return (long long)cur;
    }
}

/* Writes `rec` (its header's `lost` set per file) to every file. */
static void emit_all(lt_record *rec, size_t len)
{
    for (int i = 0; i < g_nsinks; i++) {
        lt_sink *s = &g_sinks[i];
        rec->lost = __atomic_load_n(&s->lost, __ATOMIC_RELAXED);
        long long off = reserve(s, len);
        if (off < 0)
            __atomic_add_fetch(&s->lost, 1, __ATOMIC_RELAXED);
        else
            put(s, (size_t)off, rec, len);
    }
}

static void emit(lt_record *rec)
{
    if (!g_nsinks)
        return;
    rec->time_ns = now_ns();
    emit_all(rec, sizeof(*rec));
}

static void atfork_child(void)
{
    /* A child writes its own file; the parent's mapping is left to the parent. */
    pthread_mutex_init(&g_lock, NULL);
    pthread_mutex_init(&g_grow, NULL);
    for (int i = 0; i < g_nsinks; i++) {
        lt_sink *s = &g_sinks[i];
        if (s->base)
            munmap(s->base, s->span);
        if (s->written)
            munmap(s->written, s->span / CHUNK * sizeof(uint32_t));
        s->base = NULL;
        s->written = NULL;
        s->path[0] = 0;
        s->span = s->mapped = s->next = 0;
        s->lost = 0;
    }
}

typedef lt_result (*pfn_driver_get)(uint32_t *, lt_handle *);
typedef lt_result (*pfn_device_get)(lt_handle, uint32_t *, lt_handle *);
typedef lt_result (*pfn_device_props)(lt_handle, void *);

/* Finds `h` among the real driver's devices: its index over all driver handles and its sub-device. */
static int locate_device(lt_handle h, int32_t *index, int16_t *sub, lt_handle *root)
{
    pfn_driver_get driver_get = (pfn_driver_get)r_driver[DRV_GET];
    pfn_device_get device_get = (pfn_device_get)r_device[DEV_GET];
    pfn_device_get sub_get = (pfn_device_get)r_device[DEV_GET_SUB_DEVICES];
    lt_handle drivers[16], devices[MAX_DEVICES], subs[64];
    uint32_t nd = 16;
    int32_t base = 0;
    if (!driver_get || !device_get || driver_get(&nd, drivers) != LT_SUCCESS)
        return -1;
    for (uint32_t d = 0; d < nd && d < 16; d++) {
        uint32_t n = MAX_DEVICES;
        if (device_get(drivers[d], &n, devices) != LT_SUCCESS)
            continue;
        for (uint32_t i = 0; i < n; i++) {
            *root = devices[i];
            if (devices[i] == h) {
                *index = base + (int32_t)i;
                *sub = -1;
                return 0;
            }
            uint32_t ns = 64;
            if (!sub_get || sub_get(devices[i], &ns, subs) != LT_SUCCESS)
                continue;
            for (uint32_t s = 0; s < ns && s < 64; s++)
                if (subs[s] == h) {
                    *index = base + (int32_t)i;
                    *sub = (int16_t)s;
                    return 0;
                }
        }
        base += (int32_t)n;
    }
    return -1;
}

static void describe(lt_device *dev)
{
    lt_device_record *d = &dev->desc;
    memset(d, 0, sizeof(*d));
    d->head.kind = REC_DEVICE;
    d->head.time_ns = now_ns();
    d->head.owner = dev->index;
    d->head.owner_sub = dev->sub;
    d->head.target = -1;
    d->head.target_sub = -1;
    d->head.ptr = (uint64_t)(uintptr_t)dev->handle;
    lt_device_properties props;
    memset(&props, 0, sizeof(props));
    props.stype = STYPE_DEVICE_PROPERTIES;
    pfn_device_props get_props = (pfn_device_props)r_device[DEV_GET_PROPERTIES];
    if (get_props && get_props(dev->handle, &props) == LT_SUCCESS) {
        memcpy(d->uuid, props.uuid, sizeof(d->uuid));
        memcpy(d->name, props.name, sizeof(d->name) - 1);
    }
    lt_pci_ext_properties pci;
    memset(&pci, 0, sizeof(pci));
    pci.stype = STYPE_PCI_EXT_PROPERTIES;
    pfn_device_props get_pci = (pfn_device_props)r_device[DEV_PCI_GET_PROPERTIES_EXT];
    if (get_pci && get_pci(dev->handle, &pci) == LT_SUCCESS) {
        d->head.flags |= REC_FLAG_HAS_PCI;
        d->pci[0] = pci.domain;
        d->pci[1] = pci.bus;
        d->pci[2] = pci.device;
        d->pci[3] = pci.function;
    }
}

static void add_device_locked(lt_handle h, int32_t index, int16_t sub)
{
    if (g_ndevices >= MAX_DEVICES)
        return;
    lt_device *dev = &g_devices[g_ndevices];
    dev->handle = h;
    dev->index = index;
    dev->sub = sub;
    describe(dev);
    /* Not yet counted in g_ndevices: a file created meanwhile does not carry it twice. */
    lt_device_record d = dev->desc;
    emit_all(&d.head, sizeof(d));
    __atomic_store_n(&g_ndevices, g_ndevices + 1, __ATOMIC_RELEASE);
}

/* The device's index and sub-device; describes it in the trace the first time it is seen. */
static void device_of(lt_handle h, int32_t *index, int16_t *sub)
{
    *index = -1;
    *sub = -1;
    if (!h)
        return;
    int n = __atomic_load_n(&g_ndevices, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (g_devices[i].handle == h) {
            *index = g_devices[i].index;
            *sub = g_devices[i].sub;
            return;
        }
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_ndevices; i++)
        if (g_devices[i].handle == h) {
            *index = g_devices[i].index;
            *sub = g_devices[i].sub;
            pthread_mutex_unlock(&g_lock);
            return;
        }
    lt_handle root = NULL;
    if (locate_device(h, index, sub, &root) == 0) {
        /* A sub-device's records count for its card: describe the root device first. */
        int known = *sub < 0;
        for (int i = 0; i < g_ndevices && !known; i++)
            known = g_devices[i].handle == root;
        if (!known)
            add_device_locked(root, *index, -1);
        add_device_locked(h, *index, *sub);
    }
    pthread_mutex_unlock(&g_lock);
}

static lt_record record(uint16_t kind, lt_result result, lt_handle ctx)
{
    lt_record r;
    memset(&r, 0, sizeof(r));
    r.kind = kind;
    r.result = result;
    r.context = (uint64_t)(uintptr_t)ctx;
    r.owner = r.target = -1;
    r.owner_sub = r.target_sub = -1;
    return r;
}

/* A call that moves memory is about to run: l0mem pairs no host reading with device
 * memory while one is in flight (its record, written when it returns, ends it). */
static void begin(uint16_t kind)
{
    lt_record r = record(REC_BEGIN, LT_SUCCESS, NULL);
    r.aux = kind;
    emit(&r);
}

/* ------------------------------------------------------------- wrapped calls */

typedef lt_result (*pfn_alloc_device)(lt_handle, const void *, size_t, size_t, lt_handle, void **);
typedef lt_result (*pfn_alloc_host)(lt_handle, const void *, size_t, size_t, void **);
typedef lt_result (*pfn_alloc_shared)(lt_handle, const void *, const void *, size_t, size_t,
                                      lt_handle, void **);
typedef lt_result (*pfn_free)(lt_handle, void *);
typedef lt_result (*pfn_free_ext)(lt_handle, const void *, void *);
typedef lt_result (*pfn_alloc_props)(lt_handle, const void *, void *, lt_handle *);
typedef lt_result (*pfn_residency)(lt_handle, lt_handle, void *, size_t);
typedef lt_result (*pfn_context_create)(lt_handle, const void *, lt_handle *);
typedef lt_result (*pfn_context_create_ex)(lt_handle, const void *, uint32_t, lt_handle *,
                                           lt_handle *);
typedef lt_result (*pfn_context_destroy)(lt_handle);
typedef lt_result (*pfn_can_access_peer)(lt_handle, lt_handle, uint8_t *);
typedef lt_result (*pfn_extension_props)(lt_handle, uint32_t *, lt_extension_properties *);
typedef lt_result (*pfn_driver_props)(lt_handle, void *);

static lt_result t_alloc_device(lt_handle ctx, const void *desc, size_t size, size_t align,
                                lt_handle dev, void **pptr)
{
    begin(REC_ALLOC_DEVICE);
    lt_result res = ((pfn_alloc_device)r_mem[MEM_ALLOC_DEVICE])(ctx, desc, size, align, dev, pptr);
    lt_record r = record(REC_ALLOC_DEVICE, res, ctx);
    r.size = size;
    r.ptr = (res == LT_SUCCESS && pptr) ? (uint64_t)(uintptr_t)*pptr : 0;
    device_of(dev, &r.owner, &r.owner_sub);
    emit(&r);
    return res;
}

static lt_result t_alloc_host(lt_handle ctx, const void *desc, size_t size, size_t align,
                              void **pptr)
{
    begin(REC_ALLOC_HOST);
    lt_result res = ((pfn_alloc_host)r_mem[MEM_ALLOC_HOST])(ctx, desc, size, align, pptr);
    lt_record r = record(REC_ALLOC_HOST, res, ctx);
    r.size = size;
    r.ptr = (res == LT_SUCCESS && pptr) ? (uint64_t)(uintptr_t)*pptr : 0;
    emit(&r);
    return res;
}

static lt_result t_alloc_shared(lt_handle ctx, const void *ddesc, const void *hdesc, size_t size,
                                size_t align, lt_handle dev, void **pptr)
{
    begin(REC_ALLOC_SHARED);
    lt_result res =
        ((pfn_alloc_shared)r_mem[MEM_ALLOC_SHARED])(ctx, ddesc, hdesc, size, align, dev, pptr);
    lt_record r = record(REC_ALLOC_SHARED, res, ctx);
    r.size = size;
    r.ptr = (res == LT_SUCCESS && pptr) ? (uint64_t)(uintptr_t)*pptr : 0;
    device_of(dev, &r.owner, &r.owner_sub);
    emit(&r);
    return res;
}

static lt_result t_free(lt_handle ctx, void *ptr)
{
    begin(REC_FREE);
    lt_result res = ((pfn_free)r_mem[MEM_FREE])(ctx, ptr);
    lt_record r = record(REC_FREE, res, ctx);
    r.ptr = (uint64_t)(uintptr_t)ptr;
    emit(&r);
    return res;
}

static lt_result t_free_ext(lt_handle ctx, const void *desc, void *ptr)
{
    begin(REC_FREE_EXT);
    lt_result res = ((pfn_free_ext)r_mem[MEM_FREE_EXT])(ctx, desc, ptr);
    lt_record r = record(REC_FREE_EXT, res, ctx);
    r.ptr = (uint64_t)(uintptr_t)ptr;
    emit(&r);
    return res;
}

/* The owner of the allocation holding `ptr`, from the real driver (no handle: none or unknown). */
static lt_handle owner_of(lt_handle ctx, void *ptr)
{
    lt_memory_allocation_properties props;
    lt_handle owner = NULL;
    memset(&props, 0, sizeof(props));
    props.stype = STYPE_MEMORY_ALLOCATION_PROPERTIES;
    pfn_alloc_props get = (pfn_alloc_props)r_mem[MEM_GET_ALLOC_PROPERTIES];
    if (!get || get(ctx, ptr, &props, &owner) != LT_SUCCESS)
        return NULL;
    return owner;
}

static lt_result t_make_resident(lt_handle ctx, lt_handle dev, void *ptr, size_t size)
{
    begin(REC_RESIDENT);
    lt_record r = record(REC_RESIDENT, LT_SUCCESS, ctx);
    r.ptr = (uint64_t)(uintptr_t)ptr;
    r.size = size;
    device_of(owner_of(ctx, ptr), &r.owner, &r.owner_sub);
    device_of(dev, &r.target, &r.target_sub);
    if (g_no_peer_residency && r.owner >= 0 && r.target >= 0 && r.owner != r.target) {
        r.flags |= REC_FLAG_SKIPPED;
        emit(&r);
        return LT_SUCCESS;
    }
    r.result = ((pfn_residency)r_context[CTX_MAKE_MEMORY_RESIDENT])(ctx, dev, ptr, size);
    emit(&r);
    return r.result;
}

static lt_result t_evict(lt_handle ctx, lt_handle dev, void *ptr, size_t size)
{
    begin(REC_EVICT);
    lt_record r = record(REC_EVICT, LT_SUCCESS, ctx);
    r.ptr = (uint64_t)(uintptr_t)ptr;
    r.size = size;
    device_of(owner_of(ctx, ptr), &r.owner, &r.owner_sub);
    device_of(dev, &r.target, &r.target_sub);
    r.result = ((pfn_residency)r_context[CTX_EVICT_MEMORY])(ctx, dev, ptr, size);
    emit(&r);
    return r.result;
}

static lt_result t_context_create(lt_handle drv, const void *desc, lt_handle *out)
{
    lt_result res = ((pfn_context_create)r_context[CTX_CREATE])(drv, desc, out);
    lt_record r = record(REC_CONTEXT_CREATE, res, (res == LT_SUCCESS && out) ? *out : NULL);
    emit(&r);
    return res;
}

static lt_result t_context_create_ex(lt_handle drv, const void *desc, uint32_t n, lt_handle *devs,
                                     lt_handle *out)
{
    lt_result res = ((pfn_context_create_ex)r_context[CTX_CREATE_EX])(drv, desc, n, devs, out);
    lt_record r = record(REC_CONTEXT_CREATE_EX, res, (res == LT_SUCCESS && out) ? *out : NULL);
    r.aux = n;
    emit(&r);
    return res;
}

static lt_result t_context_destroy(lt_handle ctx)
{
    lt_result res = ((pfn_context_destroy)r_context[CTX_DESTROY])(ctx);
    lt_record r = record(REC_CONTEXT_DESTROY, res, ctx);
    emit(&r);
    return res;
}

static lt_result t_can_access_peer(lt_handle dev, lt_handle peer, uint8_t *value)
{
    lt_result res = ((pfn_can_access_peer)r_device[DEV_CAN_ACCESS_PEER])(dev, peer, value);
    lt_record r = record(REC_CAN_ACCESS_PEER, res, NULL);
    device_of(dev, &r.owner, &r.owner_sub);
    device_of(peer, &r.target, &r.target_sub);
    r.aux = (res == LT_SUCCESS && value) ? *value : 0;
    emit(&r);
    return res;
}

/*
 * A loader that sees the driver-DDI-handles extension calls through tables inside
 * the real driver's handles and so around this proxy: hide it.
 */
static int hidden_extension(const lt_extension_properties *p)
{
    return strncmp(p->name, DDI_HANDLES_EXT_NAME, sizeof(p->name)) == 0;
}

static lt_result t_extension_properties(lt_handle drv, uint32_t *count,
                                        lt_extension_properties *props)
{
    pfn_extension_props real = (pfn_extension_props)r_driver[DRV_GET_EXTENSION_PROPERTIES];
    uint32_t n = 0;
    if (!count)
        return real(drv, count, props);
    lt_result res = real(drv, &n, NULL);
    if (res != LT_SUCCESS)
        return res;
    lt_extension_properties *all = calloc(n ? n : 1, sizeof(*all));
    if (!all) /* cannot filter: answer as the driver would */
        return real(drv, count, props);
    res = real(drv, &n, all);
    if (res == LT_SUCCESS) {
        uint32_t kept = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (hidden_extension(&all[i]))
                continue;
            if (props && kept < *count)
                props[kept] = all[i];
            kept++;
        }
        /* As the spec asks of a driver: 0 or too many asks for the number available. */
        if (!props || *count == 0 || kept < *count)
            *count = kept;
    }
    free(all);
    return res;
}

static lt_result t_driver_properties(lt_handle drv, void *props)
{
    lt_result res = ((pfn_driver_props)r_driver[DRV_GET_PROPERTIES])(drv, props);
    for (lt_base *p = props ? ((lt_base *)props)->pNext : NULL; p; p = p->pNext)
        if (p->stype == STYPE_DRIVER_DDI_HANDLES_EXT_PROPERTIES)
            ((lt_ddi_handles_properties *)p)->flags &= ~DDI_HANDLE_EXT_SUPPORTED;
    return res;
}

/* ------------------------------------------------------------------ loading */

static void load_real(void)
{
    const char *dir = getenv("L0MEM_TRACE_DIR");
    const char *npr = getenv("L0MEM_TRACE_NO_PEER_RESIDENCY");
    const char *list = getenv("L0MEM_TRACE_DRIVERS");
    if (dir) {
        char dirs[MAX_SINKS * 4096];
        char *save_dir = NULL;
        snprintf(dirs, sizeof(dirs), "%s", dir);
        for (char *d = strtok_r(dirs, ":", &save_dir); d && g_nsinks < MAX_SINKS;
             d = strtok_r(NULL, ":", &save_dir)) {
            if (strlen(d) >= sizeof(g_sinks[0].dir))
                continue;
            strcpy(g_sinks[g_nsinks].dir, d);
            g_nsinks++;
        }
    }
    g_no_peer_residency = npr && strcmp(npr, "1") == 0;
    pthread_atfork(NULL, NULL, atfork_child);
    char names[4096];
    snprintf(names, sizeof(names), "%s", list && *list ? list : "libze_intel_gpu.so.1");
    char *save = NULL;
    for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        while (*name == ' ')
            name++;
        if (!*name)
            continue;
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        void *getter = dlsym(h, "zeGetGlobalProcAddrTable");
        Dl_info self, other;
        /* Never proxy ourselves (the tracer named among the real drivers). */
        if (!getter || (dladdr(getter, &other) && dladdr((void *)load_real, &self) &&
                        other.dli_fbase == self.dli_fbase)) {
            dlclose(h);
            continue;
        }
        g_real = h;
        return;
    }
    fprintf(stderr, "l0mem trace: no Level Zero driver loaded from L0MEM_TRACE_DRIVERS=%s\n",
            list ? list : "");
}

static lt_result forward(const char *name, lt_version version, void *table)
{
    pthread_once(&g_once, load_real);
    if (!g_real)
        return LT_ERROR_UNINITIALIZED;
    lt_getter get = (lt_getter)dlsym(g_real, name);
    if (!get)
        return LT_ERROR_UNSUPPORTED_FEATURE;
    return get(version, table);
}

/* Keeps the real slots [0, n) and puts `wrap` where it is not NULL. */
static void keep(void *table, lt_fn *real, int n, const int *slots, const lt_fn *wraps, int nw)
{
    for (int i = 0; i < n; i++)
        real[i] = SLOT(table, i);
    for (int i = 0; i < nw; i++)
        if (real[slots[i]])
            SLOT(table, slots[i]) = wraps[i];
}

#ifndef L0MEM_TRACE_LAYOUT_CHECK
#define GETTER(fn)                                                                            \
    EXPORT lt_result fn(lt_version version, void *table)                                     \
    {                                                                                         \
        return forward(#fn, version, table);                                                  \
    }

EXPORT lt_result zeGetDriverProcAddrTable(lt_version version, void *table)
{
    lt_result res = forward("zeGetDriverProcAddrTable", version, table);
    if (res != LT_SUCCESS || !table)
        return res;
    static const int slots[] = {DRV_GET_PROPERTIES, DRV_GET_EXTENSION_PROPERTIES};
    const lt_fn wraps[] = {(lt_fn)t_driver_properties, (lt_fn)t_extension_properties};
    keep(table, r_driver, 5, slots, wraps, 2);
    return res;
}

EXPORT lt_result zeGetDeviceProcAddrTable(lt_version version, void *table)
{
    lt_result res = forward("zeGetDeviceProcAddrTable", version, table);
    if (res != LT_SUCCESS || !table)
        return res;
    static const int slots[] = {DEV_CAN_ACCESS_PEER};
    const lt_fn wraps[] = {(lt_fn)t_can_access_peer};
    /* pfnPciGetPropertiesExt came with API 1.3. */
    keep(table, r_device, LT_MINOR(version) >= 3 ? 18 : 17, slots, wraps, 1);
    return res;
}

EXPORT lt_result zeGetContextProcAddrTable(lt_version version, void *table)
{
    lt_result res = forward("zeGetContextProcAddrTable", version, table);
    if (res != LT_SUCCESS || !table)
        return res;
    static const int slots[] = {CTX_CREATE, CTX_DESTROY, CTX_MAKE_MEMORY_RESIDENT,
                                CTX_EVICT_MEMORY, CTX_CREATE_EX};
    const lt_fn wraps[] = {(lt_fn)t_context_create, (lt_fn)t_context_destroy,
                           (lt_fn)t_make_resident, (lt_fn)t_evict, (lt_fn)t_context_create_ex};
    /* pfnCreateEx came with API 1.1. */
    int has_ex = LT_MINOR(version) >= 1;
    keep(table, r_context, has_ex ? 9 : 8, slots, wraps, has_ex ? 5 : 4);
    return res;
}

EXPORT lt_result zeGetMemProcAddrTable(lt_version version, void *table)
{
    lt_result res = forward("zeGetMemProcAddrTable", version, table);
    if (res != LT_SUCCESS || !table)
        return res;
    static const int slots[] = {MEM_ALLOC_SHARED, MEM_ALLOC_DEVICE, MEM_ALLOC_HOST, MEM_FREE,
                                MEM_FREE_EXT};
    const lt_fn wraps[] = {(lt_fn)t_alloc_shared, (lt_fn)t_alloc_device, (lt_fn)t_alloc_host,
                           (lt_fn)t_free, (lt_fn)t_free_ext};
    /* pfnFreeExt came with API 1.3. */
    int has_ext = LT_MINOR(version) >= 3;
    keep(table, r_mem, has_ext ? 10 : 9, slots, wraps, has_ext ? 5 : 4);
    return res;
}

/* Every other table the loaders of API 1.4 to 1.15 ask a driver for, forwarded unchanged. */
GETTER(zeGetGlobalProcAddrTable)
GETTER(zeGetDriverExpProcAddrTable)
GETTER(zeGetDeviceExpProcAddrTable)
GETTER(zeGetCommandQueueProcAddrTable)
GETTER(zeGetCommandListProcAddrTable)
GETTER(zeGetCommandListExpProcAddrTable)
GETTER(zeGetEventProcAddrTable)
GETTER(zeGetEventExpProcAddrTable)
GETTER(zeGetEventPoolProcAddrTable)
GETTER(zeGetFenceProcAddrTable)
GETTER(zeGetImageProcAddrTable)
GETTER(zeGetImageExpProcAddrTable)
GETTER(zeGetKernelProcAddrTable)
GETTER(zeGetKernelExpProcAddrTable)
GETTER(zeGetMemExpProcAddrTable)
GETTER(zeGetModuleProcAddrTable)
GETTER(zeGetModuleBuildLogProcAddrTable)
GETTER(zeGetPhysicalMemProcAddrTable)
GETTER(zeGetSamplerProcAddrTable)
GETTER(zeGetVirtualMemProcAddrTable)
GETTER(zeGetFabricEdgeExpProcAddrTable)
GETTER(zeGetFabricVertexExpProcAddrTable)
GETTER(zeGetRTASBuilderProcAddrTable)
GETTER(zeGetRTASBuilderExpProcAddrTable)
GETTER(zeGetRTASParallelOperationProcAddrTable)
GETTER(zeGetRTASParallelOperationExpProcAddrTable)
GETTER(zeGetExecutableGraphProcAddrTable)
GETTER(zeGetGraphProcAddrTable)
GETTER(zerGetGlobalProcAddrTable)
GETTER(zesGetGlobalProcAddrTable)
GETTER(zesGetDeviceProcAddrTable)
GETTER(zesGetDeviceExpProcAddrTable)
GETTER(zesGetDriverProcAddrTable)
GETTER(zesGetDriverExpProcAddrTable)
GETTER(zesGetDiagnosticsProcAddrTable)
GETTER(zesGetEngineProcAddrTable)
GETTER(zesGetFabricPortProcAddrTable)
GETTER(zesGetFanProcAddrTable)
GETTER(zesGetFirmwareProcAddrTable)
GETTER(zesGetFirmwareExpProcAddrTable)
GETTER(zesGetFrequencyProcAddrTable)
GETTER(zesGetLedProcAddrTable)
GETTER(zesGetMemoryProcAddrTable)
GETTER(zesGetOverclockProcAddrTable)
GETTER(zesGetPerformanceFactorProcAddrTable)
GETTER(zesGetPowerProcAddrTable)
GETTER(zesGetPsuProcAddrTable)
GETTER(zesGetRasProcAddrTable)
GETTER(zesGetRasExpProcAddrTable)
GETTER(zesGetSchedulerProcAddrTable)
GETTER(zesGetStandbyProcAddrTable)
GETTER(zesGetTemperatureProcAddrTable)
GETTER(zesGetVFManagementExpProcAddrTable)
GETTER(zetGetCommandListProcAddrTable)
GETTER(zetGetCommandListExpProcAddrTable)
GETTER(zetGetContextProcAddrTable)
GETTER(zetGetDebugProcAddrTable)
GETTER(zetGetDeviceProcAddrTable)
GETTER(zetGetDeviceExpProcAddrTable)
GETTER(zetGetKernelProcAddrTable)
GETTER(zetGetMetricProcAddrTable)
GETTER(zetGetMetricExpProcAddrTable)
GETTER(zetGetMetricDecoderExpProcAddrTable)
GETTER(zetGetMetricGroupProcAddrTable)
GETTER(zetGetMetricGroupExpProcAddrTable)
GETTER(zetGetMetricProgrammableExpProcAddrTable)
GETTER(zetGetMetricQueryProcAddrTable)
GETTER(zetGetMetricQueryPoolProcAddrTable)
GETTER(zetGetMetricStreamerProcAddrTable)
GETTER(zetGetMetricTracerExpProcAddrTable)
GETTER(zetGetModuleProcAddrTable)
GETTER(zetGetTracerExpProcAddrTable)

#else
/* Built by the tests against the installed headers: the declarations above must match them. */
#include <ze_api.h>
#include <ze_ddi.h>
#define SAME(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), #b "." #f)
SAME(lt_device_properties, ze_device_properties_t, uuid);
SAME(lt_device_properties, ze_device_properties_t, name);
_Static_assert(sizeof(lt_device_properties) == sizeof(ze_device_properties_t), "device props");
SAME(lt_pci_ext_properties, ze_pci_ext_properties_t, pNext);
_Static_assert(offsetof(lt_pci_ext_properties, domain) == offsetof(ze_pci_ext_properties_t, address),
               "pci address");
_Static_assert(sizeof(lt_pci_ext_properties) == sizeof(ze_pci_ext_properties_t), "pci props");
SAME(lt_memory_allocation_properties, ze_memory_allocation_properties_t, pageSize);
_Static_assert(sizeof(lt_extension_properties) == sizeof(ze_driver_extension_properties_t), "ext");
#define SLOT_AT(t, f, i) _Static_assert(offsetof(t, f) == (i) * sizeof(void *), #t "." #f)
SLOT_AT(ze_driver_dditable_t, pfnGet, DRV_GET);
SLOT_AT(ze_driver_dditable_t, pfnGetProperties, DRV_GET_PROPERTIES);
SLOT_AT(ze_driver_dditable_t, pfnGetExtensionProperties, DRV_GET_EXTENSION_PROPERTIES);
SLOT_AT(ze_device_dditable_t, pfnGet, DEV_GET);
SLOT_AT(ze_device_dditable_t, pfnGetSubDevices, DEV_GET_SUB_DEVICES);
SLOT_AT(ze_device_dditable_t, pfnGetProperties, DEV_GET_PROPERTIES);
SLOT_AT(ze_device_dditable_t, pfnCanAccessPeer, DEV_CAN_ACCESS_PEER);
SLOT_AT(ze_device_dditable_t, pfnPciGetPropertiesExt, DEV_PCI_GET_PROPERTIES_EXT);
SLOT_AT(ze_context_dditable_t, pfnCreate, CTX_CREATE);
SLOT_AT(ze_context_dditable_t, pfnDestroy, CTX_DESTROY);
SLOT_AT(ze_context_dditable_t, pfnMakeMemoryResident, CTX_MAKE_MEMORY_RESIDENT);
SLOT_AT(ze_context_dditable_t, pfnEvictMemory, CTX_EVICT_MEMORY);
SLOT_AT(ze_context_dditable_t, pfnCreateEx, CTX_CREATE_EX);
SLOT_AT(ze_mem_dditable_t, pfnAllocShared, MEM_ALLOC_SHARED);
SLOT_AT(ze_mem_dditable_t, pfnAllocDevice, MEM_ALLOC_DEVICE);
SLOT_AT(ze_mem_dditable_t, pfnAllocHost, MEM_ALLOC_HOST);
SLOT_AT(ze_mem_dditable_t, pfnFree, MEM_FREE);
SLOT_AT(ze_mem_dditable_t, pfnGetAllocProperties, MEM_GET_ALLOC_PROPERTIES);
SLOT_AT(ze_mem_dditable_t, pfnFreeExt, MEM_FREE_EXT);
#endif
