/*
 * Command queues, command lists, events and fences.
 *
 * Execution is synchronous: an immediate list runs each command as it is
 * appended; a regular list records commands and runs them, in order, inside
 * zeCommandQueueExecuteCommandLists. Timestamps come from CLOCK_MONOTONIC_RAW
 * taken around each command, in device ticks of SIM_TIMER_HZ.
 *
 * The link model (link_gbps > 0): bytes still move at once, but each root
 * device has one engine whose commands complete in host time as a device's
 * would. A command starts when its engine is free and what it waits for has
 * completed, and lasts its real time, or, for a copy between a device and the
 * host or another device, its bytes at link_gbps (twice that time for
 * pageable host memory, which a driver stages through its own buffer). Its
 * event counts as complete from then on (ready_ns): host waits and queries
 * see it then. Engines of different devices run at once, so a download on one
 * device overlaps an upload on another, as on a machine with one link each.
 */
#include "zesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_CMD_WAIT_NS 2000000000ull   /* a command waiting longer is a hang */
#define SIM_HOST_WAIT_CAP_NS 10000000000ull /* cap for "wait forever" host calls */

uint64_t sim_host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sim_ticks(void)
{
    return sim_host_ns() / (1000000000ull / SIM_TIMER_HZ);
}

/* The CLOCK_MONOTONIC time (sim_cond's clock) ns from now. */
static struct timespec deadline_in(uint64_t ns)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t sum = (uint64_t)dl.tv_nsec + ns % 1000000000ull;
    dl.tv_sec += (time_t)(ns / 1000000000ull + sum / 1000000000ull);
    dl.tv_nsec = (long)(sum % 1000000000ull);
    return dl;
}

/* Wait with sim_lock held until *flag is set or timeout_ns passes; returns 1 if set. */
static int wait_flag(const int *flag, uint64_t timeout_ns)
{
    if (*flag)
        return 1;
    if (timeout_ns == 0)
        return 0;
    struct timespec dl = deadline_in(timeout_ns);
    while (!*flag) {
        if (pthread_cond_timedwait(&sim_cond, &sim_lock, &dl) == ETIMEDOUT)
            return *flag;
    }
    return 1;
}

static uint64_t host_wait_timeout(uint64_t timeout)
{
    return timeout == UINT64_MAX ? SIM_HOST_WAIT_CAP_NS : timeout;
}

/* A host synchronize on *flag: an infinite wait gives up at the cap and says why on stderr. */
static ze_result_t host_sync(const int *flag, uint64_t timeout, const char *routine,
                             const char *what)
{
    if (wait_flag(flag, host_wait_timeout(timeout)))
        return ZE_RESULT_SUCCESS;
    if (timeout == UINT64_MAX)
        fprintf(stderr, "zesim: %s gave up after %llu s on %s\n", routine,
                SIM_HOST_WAIT_CAP_NS / 1000000000ull, what);
    return ZE_RESULT_NOT_READY;
}

static void event_signal(sim_event_t *e, uint64_t t0, uint64_t t1)
{
    if (!sim_obj_is(e, MAGIC_EVENT))
        return;
    e->ts_start = t0;
    e->ts_end = t1;
    e->ready_ns = 0;
    e->signaled = 1;
    pthread_cond_broadcast(&sim_cond);
}

/* ------------------------------------------------------------- link model */

static uint64_t engine_free_ns[SIM_MAX_DEVICES]; /* when each root device's engine is idle */

/* A new link speed starts from idle engines (config.c, when link_gbps is set). */
void sim_engines_reset(void)
{
    memset(engine_free_ns, 0, sizeof(engine_free_ns));
}

static int ready(uint64_t ready_ns)
{
    return ready_ns == 0 || sim_host_ns() >= ready_ns;
}

/* Wait, with sim_lock held (released while waiting), until ready_ns or timeout; 1 if ready. */
static int wait_ready(uint64_t ready_ns, uint64_t timeout)
{
    uint64_t now = sim_host_ns();
    if (ready_ns <= now)
        return 1;
    uint64_t left = ready_ns - now;
    /* Not ready within the timeout: wait it out, as a device's event would be waited on. */
    uint64_t wait = timeout < left ? timeout : left;
    struct timespec dl = deadline_in(wait);
    while (sim_host_ns() < now + wait)
        if (pthread_cond_timedwait(&sim_cond, &sim_lock, &dl) == ETIMEDOUT)
            break;
    return ready(ready_ns);
}

/* The modelled duration of a copy across a link, in ns (0: it does not cross one). */
static uint64_t link_ns(const sim_cmd_t *c)
{
    int s = sim_ptr_device(c->u.copy.src), d = sim_ptr_device(c->u.copy.dst);
    if (c->kind != CMD_COPY || s == d)
        return 0;
    /* Memory the simulator did not allocate is pageable host memory. */
    double factor = (c->u.copy.src_id && c->u.copy.dst_id) ? 1.0 : 2.0;
    return (uint64_t)((double)c->u.copy.size * factor / sim_cfg.link_gbps); /* GB/s = bytes/ns */
}

/* Place a command that ran from t0 to t1 (host ns) on dev's engine; return its end (host ns). */
static uint64_t engine_place(const sim_cmd_t *c, const sim_device_t *dev, uint64_t t0,
                             uint64_t t1, uint64_t *start)
{
    uint64_t *engine = &engine_free_ns[dev ? dev->index : 0];
    uint64_t begin = t0 > *engine ? t0 : *engine;
    for (uint32_t i = 0; i < c->nwait; i++)
        if (c->wait[i]->ready_ns > begin)
            begin = c->wait[i]->ready_ns;
    uint64_t modelled = link_ns(c);
    *start = begin;
    *engine = begin + (modelled ? modelled : t1 - t0);
    return *engine;
}

/* --------------------------------------------------------------- commands */

static void cmd_release(sim_cmd_t *c)
{
    free(c->wait);
    if (c->kind == CMD_KERNEL)
        free(c->u.kernel.name);
    if (c->kind == CMD_TS_QUERY) {
        free(c->u.tsq.events);
        free(c->u.tsq.offsets);
    }
}

static ze_result_t wait_events(uint32_t n, sim_event_t **ev)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!sim_obj_is(ev[i], MAGIC_EVENT))
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        if (ev[i]->never && !ev[i]->signaled)
            return SIM_HUNG; /* waits on a hung copy: stuck behind it, as on hardware */
        if (!wait_flag(&ev[i]->signaled, SIM_CMD_WAIT_NS)) {
            fprintf(stderr, "zesim: a command waits on an event nothing signaled; the simulator "
                            "runs commands when submitted, so this is a hang\n");
            return ZE_RESULT_ERROR_DEVICE_LOST;
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* Id of the allocation holding ptr, 0 for memory the simulator does not own. */
static uint64_t alloc_id(const void *ptr)
{
    sim_alloc_t *a = sim_alloc_find(ptr);
    return a ? a->id : 0;
}

/* A pointer that was in an allocation at append must still be in it at execution. */
static ze_result_t check_still_live(const void *ptr, uint64_t id)
{
    if (id && alloc_id(ptr) != id) {
        fprintf(stderr, "zesim: a command uses memory freed after it was appended\n");
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

static ze_result_t run_copy(sim_cmd_t *c)
{
    ze_result_t r;
    if ((r = check_still_live(c->u.copy.dst, c->u.copy.dst_id)) ||
        (r = check_still_live(c->u.copy.src, c->u.copy.src_id)))
        return r;
    if ((r = sim_check_range(c->u.copy.dst, c->u.copy.size)) ||
        (r = sim_check_range(c->u.copy.src, c->u.copy.size)))
        return r;
    int s = sim_ptr_device(c->u.copy.src), d = sim_ptr_device(c->u.copy.dst);
    if (sim_copy_hangs(s, d))
        return SIM_HUNG;
    memmove(c->u.copy.dst, c->u.copy.src, c->u.copy.size);
    sim_copy_corrupt(s, d, c->u.copy.dst, c->u.copy.src, c->u.copy.size);
    sim_moved[s + 1][d + 1] += c->u.copy.size;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t run_fill(sim_cmd_t *c)
{
    uint8_t *p = c->u.fill.ptr;
    size_t n = c->u.fill.size, ps = c->u.fill.pattern_size;
    ze_result_t r;
    if ((r = check_still_live(p, c->u.fill.ptr_id)) || (r = sim_check_range(p, n)))
        return r;
    if (sim_cfg.fill_noop)
        return ZE_RESULT_SUCCESS; /* the fault: the fill "completes" but touches nothing */
    int zero = 1;
    for (size_t i = 0; i < ps; i++)
        zero &= c->u.fill.pattern[i] == 0;
    if (zero && sim_ptr_device(p) >= 0) {
        sim_zero_device_range(p, n);
        return ZE_RESULT_SUCCESS;
    }
    if (ps == 1) {
        memset(p, c->u.fill.pattern[0], n);
        return ZE_RESULT_SUCCESS;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = c->u.fill.pattern[i % ps];
    return ZE_RESULT_SUCCESS;
}

/* A command that will never run: whoever waits on its event is stuck too. */
static ze_result_t never_runs(sim_cmd_t *c)
{
    if (c->signal && sim_obj_is(c->signal, MAGIC_EVENT))
        c->signal->never = 1;
    return SIM_HUNG;
}

static ze_result_t run_cmd(sim_cmd_t *c, const sim_device_t *dev)
{
    ze_result_t r = wait_events(c->nwait, c->wait);
    if (r == SIM_HUNG)
        return never_runs(c);
    if (r)
        return r;
    uint64_t t0 = sim_host_ns();
    switch (c->kind) {
    case CMD_COPY:
        r = run_copy(c);
        if (r == SIM_HUNG)
            return never_runs(c);
        break;
    case CMD_FILL:
        r = run_fill(c);
        break;
    case CMD_KERNEL:
        r = sim_run_builtin(c->u.kernel.builtin, c->u.kernel.name, c->u.kernel.args,
                            c->u.kernel.group, c->u.kernel.count);
        if (!r)
            sim_launches++;
        break;
    case CMD_RESET:
        if (sim_obj_is(c->u.ev.event, MAGIC_EVENT))
            c->u.ev.event->signaled = c->u.ev.event->never = 0, c->u.ev.event->ready_ns = 0;
        break;
    case CMD_TS_WRITE:
        *c->u.ts.dst = sim_ticks() & ((1ull << SIM_GLOBAL_TS_BITS) - 1);
        break;
    case CMD_TS_QUERY:
        for (uint32_t i = 0; i < c->u.tsq.n; i++) {
            sim_event_t *e = c->u.tsq.events[i];
            ze_kernel_timestamp_result_t ts;
            uint64_t mask = (1ull << SIM_KERNEL_TS_BITS) - 1;
            memset(&ts, 0, sizeof(ts));
            if (sim_obj_is(e, MAGIC_EVENT) && e->signaled) {
                ts.global.kernelStart = ts.context.kernelStart = e->ts_start & mask;
                ts.global.kernelEnd = ts.context.kernelEnd = e->ts_end & mask;
            }
            size_t off = c->u.tsq.offsets ? c->u.tsq.offsets[i] : i * sizeof(ts);
            memcpy(c->u.tsq.dst + off, &ts, sizeof(ts));
        }
        break;
    case CMD_BARRIER:
    case CMD_SIGNAL:
    case CMD_WAIT:
        break;
    }
    if (r)
        return r;
    uint64_t t1 = sim_host_ns(), tick = 1000000000ull / SIM_TIMER_HZ;
    if (sim_cfg.link_gbps > 0) {
        uint64_t start, end = engine_place(c, dev, t0, t1, &start);
        if (c->signal && sim_obj_is(c->signal, MAGIC_EVENT)) {
            event_signal(c->signal, start / tick, end / tick);
            c->signal->ready_ns = end;
        }
    } else if (c->signal) {
        event_signal(c->signal, t0 / tick, t1 / tick);
    }
    return ZE_RESULT_SUCCESS;
}

/* ------------------------------------------------------------ list append */

/* Start a command: validate the list and the events, copy the wait list. */
static ze_result_t cmd_begin(sim_list_t *l, sim_cmd_t *c, enum sim_cmd_kind kind,
                             ze_event_handle_t sig, uint32_t nwait, ze_event_handle_t *waits)
{
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    if (!l->immediate && l->closed)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (sig && !sim_obj_is(sig, MAGIC_EVENT))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    c->signal = (sim_event_t *)sig;
    if (nwait) {
        if (!waits)
            return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
        for (uint32_t i = 0; i < nwait; i++)
            if (!sim_obj_is(waits[i], MAGIC_EVENT))
                return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        c->wait = malloc(nwait * sizeof(*c->wait));
        if (!c->wait)
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        memcpy(c->wait, waits, nwait * sizeof(*c->wait));
        c->nwait = nwait;
    }
    return ZE_RESULT_SUCCESS;
}

/* Finish a command: run it now on an immediate list, record it on a regular one. */
static ze_result_t cmd_end(sim_list_t *l, sim_cmd_t *c)
{
    if (l->immediate) {
        /* In order: behind a hung copy nothing runs or signals, as on a stuck engine. */
        ze_result_t r = l->hung ? never_runs(c) : run_cmd(c, l->device);
        cmd_release(c);
        if (r == SIM_HUNG) {
            l->hung = 1;
            return ZE_RESULT_SUCCESS;
        }
        return r;
    }
    if (l->ncmds == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        sim_cmd_t *n = realloc(l->cmds, cap * sizeof(*n));
        if (!n) {
            cmd_release(c);
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
        l->cmds = n;
        l->cap = cap;
    }
    l->cmds[l->ncmds++] = *c;
    return ZE_RESULT_SUCCESS;
}

#define SIM_APPEND_BEGIN(h, kind, sig, nwait, waits)                                     \
    ze_result_t r = sim_enter();                                                         \
    if (r)                                                                               \
        return sim_leave(r);                                                             \
    SIM_CHECK(h, MAGIC_LIST);                                                            \
    sim_list_t *l = (sim_list_t *)(h);                                                   \
    sim_cmd_t c;                                                                         \
    if ((r = cmd_begin(l, &c, kind, sig, nwait, waits))) {                               \
        cmd_release(&c);                                                                 \
        return sim_leave(r);                                                             \
    }

#define SIM_APPEND_FAIL(err)                                                             \
    do {                                                                                 \
        cmd_release(&c);                                                                 \
        return sim_leave(err);                                                           \
    } while (0)

ze_result_t ZE_APICALL sim_zeCommandListAppendMemoryCopy(ze_command_list_handle_t h, void *dst,
                                                         const void *src, size_t size,
                                                         ze_event_handle_t sig, uint32_t nwait,
                                                         ze_event_handle_t *waits)
{
    sim_fault_point("copy"); /* before SIM_APPEND_BEGIN: a hang holds no lock */
    SIM_APPEND_BEGIN(h, CMD_COPY, sig, nwait, waits);
    if (!dst || !src)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    if ((r = sim_check_range(dst, size)) || (r = sim_check_range(src, size)))
        SIM_APPEND_FAIL(r);
    c.u.copy.dst = dst;
    c.u.copy.src = src;
    c.u.copy.size = size;
    c.u.copy.dst_id = alloc_id(dst);
    c.u.copy.src_id = alloc_id(src);
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendMemoryFill(ze_command_list_handle_t h, void *ptr,
                                                         const void *pattern, size_t pattern_size,
                                                         size_t size, ze_event_handle_t sig,
                                                         uint32_t nwait, ze_event_handle_t *waits)
{
    SIM_APPEND_BEGIN(h, CMD_FILL, sig, nwait, waits);
    if (!ptr || !pattern)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    if (pattern_size == 0 || pattern_size > SIM_FILL_PATTERN_MAX ||
        (pattern_size & (pattern_size - 1)))
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_SIZE);
    if ((r = sim_check_range(ptr, size)))
        SIM_APPEND_FAIL(r);
    c.u.fill.ptr = ptr;
    memcpy(c.u.fill.pattern, pattern, pattern_size);
    c.u.fill.pattern_size = pattern_size;
    c.u.fill.size = size;
    c.u.fill.ptr_id = alloc_id(ptr);
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendBarrier(ze_command_list_handle_t h,
                                                      ze_event_handle_t sig, uint32_t nwait,
                                                      ze_event_handle_t *waits)
{
    SIM_APPEND_BEGIN(h, CMD_BARRIER, sig, nwait, waits);
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendSignalEvent(ze_command_list_handle_t h,
                                                          ze_event_handle_t ev)
{
    SIM_APPEND_BEGIN(h, CMD_SIGNAL, ev, 0, NULL);
    if (!ev)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendWaitOnEvents(ze_command_list_handle_t h, uint32_t n,
                                                           ze_event_handle_t *events)
{
    SIM_APPEND_BEGIN(h, CMD_WAIT, NULL, n, events);
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendEventReset(ze_command_list_handle_t h,
                                                         ze_event_handle_t ev)
{
    SIM_APPEND_BEGIN(h, CMD_RESET, NULL, 0, NULL);
    if (!ev)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    if (!sim_obj_is(ev, MAGIC_EVENT))
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    c.u.ev.event = (sim_event_t *)ev;
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendWriteGlobalTimestamp(ze_command_list_handle_t h,
                                                                   uint64_t *dst,
                                                                   ze_event_handle_t sig,
                                                                   uint32_t nwait,
                                                                   ze_event_handle_t *waits)
{
    SIM_APPEND_BEGIN(h, CMD_TS_WRITE, sig, nwait, waits);
    if (!dst)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    if ((r = sim_check_range(dst, sizeof(*dst))))
        SIM_APPEND_FAIL(r);
    c.u.ts.dst = dst;
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendQueryKernelTimestamps(
    ze_command_list_handle_t h, uint32_t n, ze_event_handle_t *events, void *dst,
    const size_t *offsets, ze_event_handle_t sig, uint32_t nwait, ze_event_handle_t *waits)
{
    SIM_APPEND_BEGIN(h, CMD_TS_QUERY, sig, nwait, waits);
    if (!events || !dst)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    for (uint32_t i = 0; i < n; i++)
        if (!sim_obj_is(events[i], MAGIC_EVENT))
            SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    c.u.tsq.n = n;
    c.u.tsq.dst = dst;
    c.u.tsq.events = malloc((n ? n : 1) * sizeof(sim_event_t *));
    if (!c.u.tsq.events)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    memcpy(c.u.tsq.events, events, n * sizeof(sim_event_t *));
    if (offsets) {
        c.u.tsq.offsets = malloc((n ? n : 1) * sizeof(size_t));
        if (!c.u.tsq.offsets)
            SIM_APPEND_FAIL(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
        memcpy(c.u.tsq.offsets, offsets, n * sizeof(size_t));
    }
    return sim_leave(cmd_end(l, &c));
}

ze_result_t ZE_APICALL sim_zeCommandListAppendLaunchKernel(ze_command_list_handle_t h,
                                                           ze_kernel_handle_t k,
                                                           const ze_group_count_t *count,
                                                           ze_event_handle_t sig, uint32_t nwait,
                                                           ze_event_handle_t *waits)
{
    SIM_APPEND_BEGIN(h, CMD_KERNEL, sig, nwait, waits);
    if (!k)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    if (!sim_obj_is(k, MAGIC_KERNEL))
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    if (!count)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    sim_kernel_t *kern = (sim_kernel_t *)k;
    if (kern->builtin < 0)
        SIM_APPEND_FAIL(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE);
    /* Arguments are captured at append, as the spec requires. */
    for (uint32_t i = 0; i < 3; i++) {
        if (!(kern->arg_set & (1ull << i)) || kern->arg_size[i] != 8) {
            fprintf(stderr, "zesim: %s: argument %u is not set\n", kern->name, i);
            SIM_APPEND_FAIL(ZE_RESULT_ERROR_INVALID_ARGUMENT);
        }
        memcpy(&c.u.kernel.args[i], kern->args[i], 8);
    }
    c.u.kernel.builtin = kern->builtin;
    c.u.kernel.name = strdup(kern->name);
    memcpy(c.u.kernel.group, kern->group, sizeof(kern->group));
    c.u.kernel.count[0] = count->groupCountX;
    c.u.kernel.count[1] = count->groupCountY;
    c.u.kernel.count[2] = count->groupCountZ;
    return sim_leave(cmd_end(l, &c));
}

/* ---------------------------------------------------------- list lifetime */

static ze_result_t list_new(ze_context_handle_t h, ze_device_handle_t dev, uint32_t ordinal,
                            int immediate, ze_command_list_handle_t *ph)
{
    if (!sim_device_usable((sim_device_t *)dev) || ordinal != 0)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    (void)h;
    sim_list_t *l = sim_obj_new(MAGIC_LIST, sizeof(*l));
    if (!l)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    l->immediate = immediate;
    l->device = (const sim_device_t *)dev;
    *ph = (ze_command_list_handle_t)l;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL sim_zeCommandListCreate(ze_context_handle_t h, ze_device_handle_t dev,
                                               const ze_command_list_desc_t *desc,
                                               ze_command_list_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    return sim_leave(list_new(h, dev, desc->commandQueueGroupOrdinal, 0, ph));
}

ze_result_t ZE_APICALL sim_zeCommandListCreateImmediate(ze_context_handle_t h,
                                                        ze_device_handle_t dev,
                                                        const ze_command_queue_desc_t *desc,
                                                        ze_command_list_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    if (desc->index != 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    return sim_leave(list_new(h, dev, desc->ordinal, 1, ph));
}

static void list_clear(sim_list_t *l)
{
    for (size_t i = 0; i < l->ncmds; i++)
        cmd_release(&l->cmds[i]);
    l->ncmds = 0;
}

ze_result_t ZE_APICALL sim_zeCommandListDestroy(ze_command_list_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_LIST);
    sim_list_t *l = (sim_list_t *)h;
    list_clear(l);
    free(l->cmds);
    sim_obj_free(l);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeCommandListClose(ze_command_list_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_LIST);
    ((sim_list_t *)h)->closed = 1;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeCommandListReset(ze_command_list_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_LIST);
    sim_list_t *l = (sim_list_t *)h;
    list_clear(l);
    l->closed = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ------------------------------------------------------------------ queue */

ze_result_t ZE_APICALL sim_zeCommandQueueCreate(ze_context_handle_t h, ze_device_handle_t dev,
                                                const ze_command_queue_desc_t *desc,
                                                ze_command_queue_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    sim_device_t *d = (sim_device_t *)dev;
    if (!sim_device_usable(d) || desc->ordinal != 0 || desc->index != 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    sim_queue_t *q = sim_obj_new(MAGIC_QUEUE, sizeof(*q));
    if (!q)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    q->device = d;
    *ph = (ze_command_queue_handle_t)q;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeCommandQueueDestroy(ze_command_queue_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_QUEUE);
    sim_obj_free(h);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeCommandQueueExecuteCommandLists(ze_command_queue_handle_t h,
                                                             uint32_t n,
                                                             ze_command_list_handle_t *lists,
                                                             ze_fence_handle_t fence)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_QUEUE);
    if (n == 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_SIZE);
    SIM_NOTNULL(lists);
    if (fence && !sim_obj_is(fence, MAGIC_FENCE))
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    sim_queue_t *q = (sim_queue_t *)h;
    for (uint32_t i = 0; i < n; i++) {
        SIM_CHECK(lists[i], MAGIC_LIST);
        sim_list_t *l = (sim_list_t *)lists[i];
        if (l->immediate || !l->closed || l->device != q->device)
            return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    }
    for (uint32_t i = 0; i < n; i++) {
        sim_list_t *l = (sim_list_t *)lists[i];
        for (size_t j = 0; j < l->ncmds; j++) {
            r = q->hung ? never_runs(&l->cmds[j]) : run_cmd(&l->cmds[j], q->device);
            if (r == SIM_HUNG)
                q->hung = 1; /* the submission never completes: no fence either */
            else if (r)
                return sim_leave(r);
        }
    }
    if (q->hung)
        return sim_leave(ZE_RESULT_SUCCESS);
    if (fence) {
        ((sim_fence_t *)fence)->signaled = 1;
        ((sim_fence_t *)fence)->ready_ns =
            sim_cfg.link_gbps > 0 ? engine_free_ns[q->device->index] : 0;
        pthread_cond_broadcast(&sim_cond);
    }
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeCommandQueueSynchronize(ze_command_queue_handle_t h, uint64_t timeout)
{
    /* Work has already run when it was submitted, unless a copy on the queue hung. */
    static const int never = 0;
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_QUEUE);
    if (((sim_queue_t *)h)->hung)
        return sim_leave(host_sync(&never, timeout, "zeCommandQueueSynchronize", "a hung copy"));
    if (sim_cfg.link_gbps > 0 &&
        !wait_ready(engine_free_ns[((sim_queue_t *)h)->device->index], host_wait_timeout(timeout)))
        return sim_leave(ZE_RESULT_NOT_READY);
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ----------------------------------------------------------------- events */

ze_result_t ZE_APICALL sim_zeEventPoolCreate(ze_context_handle_t h, const ze_event_pool_desc_t *desc,
                                             uint32_t ndev, ze_device_handle_t *devs,
                                             ze_event_pool_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    if (desc->count == 0)
        return sim_leave(ZE_RESULT_ERROR_INVALID_SIZE);
    for (uint32_t i = 0; i < ndev; i++) {
        if (!devs)
            return sim_leave(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
        SIM_CHECK(devs[i], MAGIC_DEVICE);
    }
    sim_pool_t *p = sim_obj_new(MAGIC_POOL, sizeof(*p));
    if (!p)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    p->used_index = calloc(desc->count, 1);
    if (!p->used_index) {
        sim_obj_free(p);
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    }
    p->count = desc->count;
    p->flags = desc->flags;
    *ph = (ze_event_pool_handle_t)p;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeEventPoolDestroy(ze_event_pool_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_POOL);
    sim_pool_t *p = (sim_pool_t *)h;
    free(p->used_index);
    sim_obj_free(p);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeEventCreate(ze_event_pool_handle_t h, const ze_event_desc_t *desc,
                                         ze_event_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_POOL);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    sim_pool_t *p = (sim_pool_t *)h;
    if (desc->index >= p->count || p->used_index[desc->index])
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    sim_event_t *e = sim_obj_new(MAGIC_EVENT, sizeof(*e));
    if (!e)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    e->pool = p;
    e->index = desc->index;
    p->used_index[desc->index] = 1;
    *ph = (ze_event_handle_t)e;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeEventDestroy(ze_event_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    sim_event_t *e = (sim_event_t *)h;
    /* The pool may be gone and its memory reused by a smaller pool. */
    if (sim_obj_is(e->pool, MAGIC_POOL) && e->index < e->pool->count)
        e->pool->used_index[e->index] = 0;
    sim_obj_free(e);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeEventHostSignal(ze_event_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    uint64_t t = sim_ticks();
    event_signal((sim_event_t *)h, t, t);
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeEventHostSynchronize(ze_event_handle_t h, uint64_t timeout)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    sim_event_t *e = (sim_event_t *)h;
    r = host_sync(&e->signaled, timeout, "zeEventHostSynchronize", "an event nothing signaled");
    if (!r && !wait_ready(e->ready_ns, host_wait_timeout(timeout)))
        r = ZE_RESULT_NOT_READY;
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeEventQueryStatus(ze_event_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    sim_event_t *e = (sim_event_t *)h;
    return sim_leave(e->signaled && ready(e->ready_ns) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY);
}

ze_result_t ZE_APICALL sim_zeEventHostReset(ze_event_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    ((sim_event_t *)h)->signaled = ((sim_event_t *)h)->never = 0;
    ((sim_event_t *)h)->ready_ns = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeEventQueryKernelTimestamp(ze_event_handle_t h,
                                                       ze_kernel_timestamp_result_t *ts)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_EVENT);
    SIM_NOTNULL(ts);
    sim_event_t *e = (sim_event_t *)h;
    if (!sim_obj_is(e->pool, MAGIC_POOL) || !(e->pool->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP))
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    /* The fault seen on a real driver: NOT_READY although the event is signalled. */
    if (!e->signaled || !ready(e->ready_ns) || sim_cfg.timestamp_not_ready)
        return sim_leave(ZE_RESULT_NOT_READY);
    uint64_t mask = (1ull << SIM_KERNEL_TS_BITS) - 1;
    ts->global.kernelStart = ts->context.kernelStart = e->ts_start & mask;
    ts->global.kernelEnd = ts->context.kernelEnd = e->ts_end & mask;
    return sim_leave(ZE_RESULT_SUCCESS);
}

/* ----------------------------------------------------------------- fences */

ze_result_t ZE_APICALL sim_zeFenceCreate(ze_command_queue_handle_t h, const ze_fence_desc_t *desc,
                                         ze_fence_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_QUEUE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    sim_fence_t *f = sim_obj_new(MAGIC_FENCE, sizeof(*f));
    if (!f)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    f->signaled = (desc->flags & ZE_FENCE_FLAG_SIGNALED) != 0;
    *ph = (ze_fence_handle_t)f;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeFenceDestroy(ze_fence_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_FENCE);
    sim_obj_free(h);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeFenceHostSynchronize(ze_fence_handle_t h, uint64_t timeout)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_FENCE);
    sim_fence_t *f = (sim_fence_t *)h;
    r = host_sync(&f->signaled, timeout, "zeFenceHostSynchronize", "a fence no submission signals");
    if (!r && !wait_ready(f->ready_ns, host_wait_timeout(timeout)))
        r = ZE_RESULT_NOT_READY;
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeFenceQueryStatus(ze_fence_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_FENCE);
    sim_fence_t *f = (sim_fence_t *)h;
    return sim_leave(f->signaled && ready(f->ready_ns) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY);
}

ze_result_t ZE_APICALL sim_zeFenceReset(ze_fence_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_FENCE);
    ((sim_fence_t *)h)->signaled = 0;
    return sim_leave(ZE_RESULT_SUCCESS);
}
