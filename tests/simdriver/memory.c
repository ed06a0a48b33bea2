/*
 * Allocations and the simulated host mirror.
 *
 * Device memory is reserved with MAP_NORESERVE and costs host pages only
 * where written. A mirror of the memfd kind is a memfd whose pages are
 * allocated and never mapped: it lowers MemAvailable and raises Shmem in
 * /proc/meminfo without showing in the process's VmRSS, like pages held by a
 * kernel driver. A mirror of the anon kind is private anonymous memory of the
 * keeper process (keeper.c): no Shmem, no VmRSS of the caller.
 */
#include "zesim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static sim_alloc_t *sim_allocs;
static uint64_t sim_next_id = 1;
uint64_t sim_leaked_mirror_bytes;
static uint64_t sim_leaked_anon_bytes; /* anon mirrors kept by mirror_release=0, in the keeper */

#define SIM_IPC_MAGIC 0x5a534950u
#define SIM_MAX_ALLOC (1ull << 46) /* keeps the page rounding below from overflowing */

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

sim_alloc_t *sim_alloc_find(const void *ptr)
{
    const uint8_t *p = ptr;
    for (sim_alloc_t *a = sim_allocs; a; a = a->next)
        if (p >= a->base && p < a->base + a->size)
            return a;
    return NULL;
}

/* Bytes of live host allocations (zeMemAllocHost), with sim_lock held. */
uint64_t sim_host_alloc_bytes(void)
{
    uint64_t n = 0;
    for (sim_alloc_t *a = sim_allocs; a; a = a->next)
        if (a->type == ZE_MEMORY_TYPE_HOST)
            n += a->size;
    return n;
}

/* Device index of the memory at ptr, or -1 for host and shared memory. */
int sim_ptr_device(const void *ptr)
{
    sim_alloc_t *a = sim_alloc_find(ptr);
    return a && a->type == ZE_MEMORY_TYPE_DEVICE ? a->device : -1;
}

/* A range that starts in a known allocation must end inside it. */
ze_result_t sim_check_range(const void *ptr, size_t size)
{
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a)
        return ZE_RESULT_SUCCESS;
    if (size > (size_t)(a->base + a->size - (const uint8_t *)ptr))
        return ZE_RESULT_ERROR_INVALID_SIZE;
    return ZE_RESULT_SUCCESS;
}

uint64_t sim_mirror_total(void)
{
    uint64_t total = sim_leaked_mirror_bytes + sim_leaked_anon_bytes;
    for (sim_alloc_t *a = sim_allocs; a; a = a->next)
        total += a->mirror_bytes;
    return total;
}

void sim_anon_mirrors_lost(uint32_t gen)
{
    for (sim_alloc_t *a = sim_allocs; a; a = a->next)
        if (a->mirrored && a->mirror_anon && a->mirror_gen == gen) {
            a->mirrored = a->mirror_anon = 0;
            a->mirror_bytes = 0;
        }
    sim_leaked_anon_bytes = 0;
}

/*
 * Hold size * mirror_ratio bytes of host pages outside the process for allocation a:
 * an unmapped memfd, or (mirror_kind=anon) the keeper's anonymous memory. A mirror
 * that a dma-buf export hands out is a memfd whatever the kind: the fd carries its pages.
 */
static ze_result_t mirror_create(sim_alloc_t *a)
{
    if (a->mirrored)
        return ZE_RESULT_SUCCESS;
    uint64_t bytes = round_up((uint64_t)((double)a->size * sim_cfg.mirror_ratio), page_size());
    if (sim_cfg.mirror_kind == MIRROR_KIND_ANON && !a->exportable) {
        uint32_t gen = 0, slot = 0;
        if (bytes) {
            ze_result_t r = sim_keeper_hold(a->id, bytes, &gen, &slot);
            if (r)
                return r;
        }
        a->mirror_anon = 1;
        a->mirror_gen = gen;
        a->mirror_slot = slot;
    } else {
        int fd = memfd_create("zesim-mirror", MFD_CLOEXEC);
        if (fd < 0)
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        if (bytes && (ftruncate(fd, (off_t)bytes) || fallocate(fd, 0, 0, (off_t)bytes))) {
            close(fd);
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
        a->mirror_fd = fd;
    }
    a->mirrored = 1;
    a->mirror_bytes = bytes;
    return ZE_RESULT_SUCCESS;
}

static void mirror_release(sim_alloc_t *a)
{
    if (!a->mirrored)
        return;
    if (sim_cfg.mirror_release) {
        if (!a->mirror_anon)
            close(a->mirror_fd);
        else if (a->mirror_bytes)
            sim_keeper_drop(a->mirror_gen, a->mirror_slot, a->id);
    } else if (a->mirror_anon) {
        /* The keeper holds the pages until the process exits. */
        sim_leaked_anon_bytes += a->mirror_bytes;
    } else {
        /* The fd stays open until exit: the leak an audit must find. */
        sim_leaked_mirror_bytes += a->mirror_bytes;
    }
    a->mirrored = a->mirror_anon = 0;
    a->mirror_fd = -1;
    a->mirror_bytes = 0;
}

void sim_zero_device_range(uint8_t *ptr, size_t size)
{
    size_t ps = page_size();
    uintptr_t start = (uintptr_t)ptr, end = start + size;
    uintptr_t pstart = round_up(start, ps), pend = end / ps * ps;
    if (pstart >= pend) {
        memset(ptr, 0, size);
        return;
    }
    memset(ptr, 0, pstart - start);
    /* Dropping private anonymous pages reads back zeros and frees their host memory. */
    madvise((void *)pstart, pend - pstart, MADV_DONTNEED);
    memset((void *)pend, 0, end - pend);
}

static int is_pow2(size_t v)
{
    return v && !(v & (v - 1));
}

static void alloc_unlink(sim_alloc_t *a)
{
    for (sim_alloc_t **pp = &sim_allocs; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            return;
        }
}

static void adjust(uint64_t *used, uint64_t n, int sign)
{
    if (sign > 0)
        *used += n;
    else
        *used -= n;
}

/*
 * Add (sign 1) or remove (sign -1) a device allocation's bytes: on its owner and
 * the owner's root, and for a root allocation on a card with tiles, each
 * tile's even part.
 */
static void charge(int device, int sub, uint64_t size, int sign)
{
    sim_shared_charge((uint32_t)device, sub, size, sign);
    adjust(&sim_devices[device].used, size, sign);
    if (sub >= 0) {
        adjust(&sim_subdevices[device][sub].used, size, sign);
        return;
    }
    for (uint32_t k = 0; k < sim_cfg.subdevices; k++)
        adjust(&sim_subdevices[device][k].used, sim_root_part(size, k), sign);
}

/* Whether a device allocation of size bytes fits on d (and, for a root with tiles, on each tile). */
static int fits(const sim_device_t *d, uint64_t size)
{
    uint64_t cap = sim_device_capacity(d);
    if (size > cap || d->used + size > cap)
        return 0;
    if (d->sub >= 0)
        return 1;
    for (uint32_t k = 0; k < sim_cfg.subdevices; k++) {
        const sim_device_t *t = &sim_subdevices[d->index][k];
        if (t->used + sim_root_part(size, k) > sim_device_capacity(t))
            return 0;
    }
    return 1;
}

static void alloc_destroy(sim_alloc_t *a)
{
    alloc_unlink(a);
    if (a->type == ZE_MEMORY_TYPE_DEVICE)
        charge(a->device, a->sub, a->size, -1);
    mirror_release(a);
    munmap(a->map_base, a->map_size);
    free(a);
}

/* Count an allocation call; the fail_alloc_at-th one fails. */
static int alloc_call_fails(void)
{
    sim_alloc_calls++;
    return sim_cfg.fail_alloc_at && sim_alloc_calls == sim_cfg.fail_alloc_at;
}

/* owner: the device (root or tile) the allocation is for, NULL for host memory. */
static ze_result_t alloc_common(sim_context_t *ctx, ze_memory_type_t type, const sim_device_t *owner,
                                size_t size, size_t alignment, int exportable, void **pptr)
{
    int device = owner ? (int)owner->index : -1;
    if (size == 0 || size > SIM_MAX_ALLOC)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (alignment && !is_pow2(alignment))
        return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (type == ZE_MEMORY_TYPE_DEVICE) {
        /* The fail_oom_after budget is per card: a tile's allocations count on its root. */
        sim_device_t *root = &sim_devices[device];
        if (!fits(owner, size))
            return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
        if (sim_cfg.oom_after_on && root->oom_bytes + size > sim_cfg.fail_oom_after)
            return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    size_t ps = page_size();
    size_t align = alignment > ps ? alignment : ps;
    size_t len = round_up(size, ps);
    size_t map_size = len + (align > ps ? align : 0);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (type == ZE_MEMORY_TYPE_DEVICE)
        flags |= MAP_NORESERVE;
    uint8_t *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (map == MAP_FAILED)
        return type == ZE_MEMORY_TYPE_DEVICE ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY
                                             : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    sim_alloc_t *a = calloc(1, sizeof(*a));
    if (!a) {
        munmap(map, map_size);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    a->id = sim_next_id++;
    a->map_base = map;
    a->map_size = map_size;
    a->base = (uint8_t *)round_up((uintptr_t)map, align);
    a->size = size;
    a->type = type;
    a->device = device;
    a->sub = owner ? owner->sub : -1;
    a->ctx = ctx;
    a->exportable = exportable;
    a->mirror_fd = -1;
    if (type == ZE_MEMORY_TYPE_DEVICE && sim_mirrors_enabled() &&
        (sim_cfg.mirror == MIRROR_ALL || (sim_cfg.mirror == MIRROR_DMABUF && exportable))) {
        ze_result_t r = mirror_create(a);
        if (r) {
            munmap(map, map_size);
            free(a);
            return r;
        }
    }
    if (type == ZE_MEMORY_TYPE_DEVICE) {
        charge(device, a->sub, size, 1);
        sim_devices[device].oom_bytes += size;
    }
    a->next = sim_allocs;
    sim_allocs = a;
    *pptr = a->base;
    return ZE_RESULT_SUCCESS;
}

/* Walk a device allocation descriptor chain; returns 0 or an error for what cannot be honoured. */
static ze_result_t device_desc_chain(const ze_device_mem_alloc_desc_t *desc, int *exportable)
{
    *exportable = 0;
    if (desc->ordinal != 0)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (const ze_base_desc_t *e = desc->pNext; e; e = e->pNext) {
        if (e->stype == ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC) {
            const ze_external_memory_export_desc_t *x = (const void *)e;
            if (x->flags & ~(ze_external_memory_type_flags_t)ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF)
                return ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION;
            if (x->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF) {
                if (!sim_cfg.dmabuf)
                    return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
                *exportable = 1;
            }
        } else if (e->stype == ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD ||
                   e->stype == ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_WIN32) {
            return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
        }
    }
    return ZE_RESULT_SUCCESS;
}

static ze_result_t check_context_device(ze_context_handle_t h, ze_device_handle_t dev)
{
    sim_device_t *d = (sim_device_t *)dev;
    if (!sim_device_usable(d) || !sim_context_has((sim_context_t *)h, d))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL sim_zeMemAllocDevice(ze_context_handle_t h,
                                            const ze_device_mem_alloc_desc_t *desc, size_t size,
                                            size_t alignment, ze_device_handle_t dev, void **pptr)
{
    sim_fault_point("alloc");
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(pptr);
    if ((r = check_context_device(h, dev)))
        return sim_leave(r);
    int exportable;
    if ((r = device_desc_chain(desc, &exportable)))
        return sim_leave(r);
    if (alloc_call_fails())
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    r = alloc_common((sim_context_t *)h, ZE_MEMORY_TYPE_DEVICE, (sim_device_t *)dev, size,
                     alignment, exportable, pptr);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeMemAllocHost(ze_context_handle_t h,
                                          const ze_host_mem_alloc_desc_t *desc, size_t size,
                                          size_t alignment, void **pptr)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(pptr);
    if (alloc_call_fails())
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    r = alloc_common((sim_context_t *)h, ZE_MEMORY_TYPE_HOST, NULL, size, alignment, 0, pptr);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeMemAllocShared(ze_context_handle_t h,
                                            const ze_device_mem_alloc_desc_t *ddesc,
                                            const ze_host_mem_alloc_desc_t *hdesc, size_t size,
                                            size_t alignment, ze_device_handle_t dev, void **pptr)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(ddesc);
    SIM_NOTNULL(hdesc);
    SIM_NOTNULL(pptr);
    const sim_device_t *owner = NULL;
    if (dev) {
        SIM_CHECK(dev, MAGIC_DEVICE);
        if ((r = check_context_device(h, dev)))
            return sim_leave(r);
        owner = (const sim_device_t *)dev;
    }
    if (ddesc->ordinal != 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    if (alloc_call_fails())
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    r = alloc_common((sim_context_t *)h, ZE_MEMORY_TYPE_SHARED, owner, size, alignment, 0, pptr);
    return sim_leave(r);
}

/* free_delay_ms: a driver slow to release memory. The wait comes before the lock, so other
 * threads go on; the allocation stays live until it ends. */
static void free_delay(void)
{
    uint64_t ms = sim_cfg.free_delay_ms;
    if (!ms)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

ze_result_t ZE_APICALL sim_zeMemFree(ze_context_handle_t h, void *ptr)
{
    sim_fault_point("free");
    free_delay();
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(ptr);
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a || a->base != ptr)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    /* Freed even on a lost device, so the host-memory ground truth stays right. */
    alloc_destroy(a);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeMemFreeExt(ze_context_handle_t h, const ze_memory_free_ext_desc_t *desc,
                                        void *ptr)
{
    (void)desc; /* execution is synchronous, so every free policy frees at once */
    return sim_zeMemFree(h, ptr);
}

void sim_free_context_allocs(sim_context_t *ctx)
{
    sim_alloc_t *a = sim_allocs;
    while (a) {
        sim_alloc_t *next = a->next;
        if (a->ctx == ctx)
            alloc_destroy(a);
        a = next;
    }
}

/* A fresh memfd the size of the allocation, without pages, stands in for a dma-buf. */
static int sparse_fd(size_t size)
{
    int fd = memfd_create("zesim-dmabuf", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)size)) {
        close(fd);
        return -1;
    }
    return fd;
}

ze_result_t ZE_APICALL sim_zeMemGetAllocProperties(ze_context_handle_t h, const void *ptr,
                                                   ze_memory_allocation_properties_t *p,
                                                   ze_device_handle_t *phDevice)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(p);
    sim_alloc_t *a = ptr ? sim_alloc_find(ptr) : NULL;
    p->type = a ? a->type : ZE_MEMORY_TYPE_UNKNOWN;
    p->id = a ? a->id : 0;
    p->pageSize = a ? page_size() : 0;
    if (phDevice)
        *phDevice = a ? sim_alloc_owner(a) : NULL;
    for (ze_base_properties_t *e = p->pNext; e; e = e->pNext) {
        if (e->stype != ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD)
            continue;
        ze_external_memory_export_fd_t *x = (void *)e;
        if (!a || a->type != ZE_MEMORY_TYPE_DEVICE ||
            !(x->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF))
            return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
        if (!sim_cfg.dmabuf)
            return sim_leave(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE);
        /* The caller owns the fd; the mirror's pages live until every copy of it is closed. */
        x->fd = a->mirror_fd >= 0 && a->exportable ? fcntl(a->mirror_fd, F_DUPFD_CLOEXEC, 0)
                                                   : sparse_fd(a->size);
        if (x->fd < 0)
            return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    }
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeMemGetAddressRange(ze_context_handle_t h, const void *ptr,
                                                void **pBase, size_t *pSize)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(ptr);
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a)
        return sim_leave(ZE_RESULT_ERROR_NOT_AVAILABLE);
    if (pBase)
        *pBase = a->base;
    if (pSize)
        *pSize = a->size;
    return sim_leave(ZE_RESULT_SUCCESS);
}

static sim_alloc_t *resident_target(ze_context_handle_t h, ze_device_handle_t dev, void *ptr,
                                    size_t size, ze_result_t *r)
{
    *r = check_context_device(h, dev);
    if (*r)
        return NULL;
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a || size > (size_t)(a->base + a->size - (uint8_t *)ptr)) {
        *r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        return NULL;
    }
    return a;
}

/* Record (on = 1) or forget residency of a on peer device d, a root or a tile. */
static void mark_resident(const sim_device_t *d, sim_alloc_t *a, int on)
{
    if (d->sub < 0) {
        if (on)
            a->resident_peers |= 1u << d->index;
        else
            a->resident_peers &= ~(1u << d->index);
    } else {
        if (on)
            a->resident_tiles[d->index] |= (uint8_t)(1u << d->sub);
        else
            a->resident_tiles[d->index] &= (uint8_t)~(1u << d->sub);
    }
}

ze_result_t ZE_APICALL sim_zeContextMakeMemoryResident(ze_context_handle_t h,
                                                       ze_device_handle_t dev, void *ptr,
                                                       size_t size)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(ptr);
    sim_alloc_t *a = resident_target(h, dev, ptr, size, &r);
    if (!a)
        return sim_leave(r);
    uint32_t idx = ((sim_device_t *)dev)->index;
    if (a->type != ZE_MEMORY_TYPE_DEVICE || (int)idx == a->device)
        return sim_leave(ZE_RESULT_SUCCESS);
    /*
     * Resident on a peer that can access the owner's memory: the first such call
     * per allocation mirrors it in host memory. Without peer access the call is
     * still legal and succeeds, but there is nothing to map for the peer.
     */
    if (sim_cfg.mirror == MIRROR_PEER_RESIDENT && sim_mirrors_enabled() && !a->mirrored &&
        sim_can_access(idx, (uint32_t)a->device)) {
        r = mirror_create(a);
        if (r)
            return sim_leave(r);
    }
    mark_resident((sim_device_t *)dev, a, 1);
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* Whether a peer card that can access the owner's memory still holds a resident (root or tile). */
static int accessing_peers(const sim_alloc_t *a)
{
    for (uint32_t p = 0; p < SIM_MAX_DEVICES; p++)
        if (((a->resident_peers & (1u << p)) || a->resident_tiles[p]) &&
            sim_can_access(p, (uint32_t)a->device))
            return 1;
    return 0;
}

ze_result_t ZE_APICALL sim_zeContextEvictMemory(ze_context_handle_t h, ze_device_handle_t dev,
                                                void *ptr, size_t size)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(ptr);
    sim_alloc_t *a = resident_target(h, dev, ptr, size, &r);
    if (!a)
        return sim_leave(r);
    uint32_t idx = ((sim_device_t *)dev)->index;
    if (a->type != ZE_MEMORY_TYPE_DEVICE || (int)idx == a->device)
        return sim_leave(ZE_RESULT_SUCCESS);
    mark_resident((sim_device_t *)dev, a, 0);
    if (sim_cfg.mirror == MIRROR_PEER_RESIDENT && !accessing_peers(a))
        mirror_release(a);
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ---------------------------------------------------------------------- IPC */

typedef struct sim_ipc {
    uint32_t magic;
    uint32_t pid;
    uint64_t id;
    uint64_t offset;
} sim_ipc_t;

ze_result_t ZE_APICALL sim_zeMemGetIpcHandle(ze_context_handle_t h, const void *ptr,
                                             ze_ipc_mem_handle_t *ipc)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(ptr);
    SIM_NOTNULL(ipc);
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    sim_ipc_t v = {SIM_IPC_MAGIC, (uint32_t)getpid(), a->id, (uint64_t)((const uint8_t *)ptr - a->base)};
    memset(ipc->data, 0, sizeof(ipc->data));
    memcpy(ipc->data, &v, sizeof(v));
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeMemOpenIpcHandle(ze_context_handle_t h, ze_device_handle_t dev,
                                              ze_ipc_mem_handle_t ipc, ze_ipc_memory_flags_t flags,
                                              void **pptr)
{
    (void)flags;
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(pptr);
    sim_ipc_t v;
    memcpy(&v, ipc.data, sizeof(v));
    /* Only the exporting process can open a simulator handle. */
    if (v.magic != SIM_IPC_MAGIC || v.pid != (uint32_t)getpid())
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    for (sim_alloc_t *a = sim_allocs; a; a = a->next) {
        if (a->id == v.id) {
            a->ipc_opens++;
            *pptr = a->base + v.offset;
            return sim_leave(ZE_RESULT_SUCCESS);
        }
    }
    return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
}

ze_result_t ZE_APICALL sim_zeMemCloseIpcHandle(ze_context_handle_t h, const void *ptr)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(ptr);
    sim_alloc_t *a = sim_alloc_find(ptr);
    if (!a || a->ipc_opens == 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    a->ipc_opens--;
    return sim_leave(ZE_RESULT_SUCCESS);
}
