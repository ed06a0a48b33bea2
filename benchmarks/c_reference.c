/*
 * The C side of benchmarks/bench_core.py: the Level Zero calls l0mem.core makes for
 * each operation it measures, made directly through the loader, timed in loops.
 *
 *     c_reference ITERATIONS SPIRV_FILE
 *
 * prints one JSON object: nanoseconds per operation, by the names bench_core.py uses.
 * A synchronous append is what l0mem's immediate list does without `signal`: the
 * append signals the list's private event, the host waits on it and resets it.
 */
#include <level_zero/ze_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NBYTES 4096

static void ok(ze_result_t r, const char *what)
{
    if (r != ZE_RESULT_SUCCESS) {
        fprintf(stderr, "c_reference: %s failed: 0x%x\n", what, (unsigned)r);
        exit(2);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(data);
        return NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return data;
}

struct fixture {
    ze_context_handle_t ctx;
    ze_device_handle_t dev;
    ze_command_list_handle_t list;
    ze_event_pool_handle_t pool;
    ze_event_handle_t sync;
    ze_kernel_handle_t kernel;
    void *src, *dst;
};

static void finish(struct fixture *f)
{
    ok(zeEventHostSynchronize(f->sync, UINT64_MAX), "zeEventHostSynchronize");
    ok(zeEventHostReset(f->sync), "zeEventHostReset");
}

/* One operation of each kind; bench_core.py's Python loops do the same through l0mem.core. */
static void op_status(struct fixture *f)
{
    ok(zeDeviceGetStatus(f->dev), "zeDeviceGetStatus");
}

static void op_alloc_free(struct fixture *f)
{
    ze_device_mem_alloc_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    void *ptr = NULL;
    ok(zeMemAllocDevice(f->ctx, &desc, NBYTES, 0, f->dev, &ptr), "zeMemAllocDevice");
    ok(zeMemFree(f->ctx, ptr), "zeMemFree");
}

static void op_copy(struct fixture *f)
{
    ok(zeCommandListAppendMemoryCopy(f->list, f->dst, f->src, NBYTES, f->sync, 0, NULL),
       "zeCommandListAppendMemoryCopy");
    finish(f);
}

static void op_fill(struct fixture *f)
{
    unsigned char pattern = 0x5a;
    ok(zeCommandListAppendMemoryFill(f->list, f->dst, &pattern, 1, NBYTES, f->sync, 0, NULL),
       "zeCommandListAppendMemoryFill");
    finish(f);
}

static void op_event_create(struct fixture *f)
{
    ze_event_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                            .index = 0,
                            .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                            .wait = ZE_EVENT_SCOPE_FLAG_HOST};
    ze_event_handle_t ev;
    ok(zeEventCreate(f->pool, &desc, &ev), "zeEventCreate");
    ok(zeEventDestroy(ev), "zeEventDestroy");
}

static void op_event_signal(struct fixture *f)
{
    ok(zeEventHostSignal(f->sync), "zeEventHostSignal");
    finish(f);
}

static void op_launch(struct fixture *f)
{
    ze_group_count_t groups = {1, 1, 1};
    ok(zeCommandListAppendLaunchKernel(f->list, f->kernel, &groups, f->sync, 0, NULL),
       "zeCommandListAppendLaunchKernel");
    finish(f);
}

static const struct {
    const char *name;
    void (*run)(struct fixture *);
} ops[] = {
    {"status", op_status},           {"alloc_free", op_alloc_free},
    {"copy", op_copy},               {"fill", op_fill},
    {"event_create", op_event_create}, {"event_signal", op_event_signal},
    {"launch", op_launch},
};

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: c_reference ITERATIONS SPIRV_FILE\n");
        return 2;
    }
    long n = atol(argv[1]);
    size_t spv_size = 0;
    unsigned char *spv = read_file(argv[2], &spv_size);
    if (n < 1 || !spv) {
        fprintf(stderr, "c_reference: bad iteration count or unreadable %s\n", argv[2]);
        return 2;
    }
    struct fixture f = {0};
    ok(zeInit(0), "zeInit");
    uint32_t count = 1;
    ze_driver_handle_t driver;
    ok(zeDriverGet(&count, &driver), "zeDriverGet");
    count = 1;
    ok(zeDeviceGet(driver, &count, &f.dev), "zeDeviceGet");
    ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ok(zeContextCreate(driver, &cdesc, &f.ctx), "zeContextCreate");
    ze_command_queue_desc_t qdesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                     .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS};
    ok(zeCommandListCreateImmediate(f.ctx, f.dev, &qdesc, &f.list), "zeCommandListCreateImmediate");
    ze_event_pool_desc_t pdesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                                  .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                                  .count = 2};
    ok(zeEventPoolCreate(f.ctx, &pdesc, 1, &f.dev, &f.pool), "zeEventPoolCreate");
    ze_event_desc_t edesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                             .index = 1,
                             .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                             .wait = ZE_EVENT_SCOPE_FLAG_HOST};
    ok(zeEventCreate(f.pool, &edesc, &f.sync), "zeEventCreate");
    ze_device_mem_alloc_desc_t adesc = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ok(zeMemAllocDevice(f.ctx, &adesc, NBYTES, 0, f.dev, &f.src), "zeMemAllocDevice");
    ok(zeMemAllocDevice(f.ctx, &adesc, NBYTES, 0, f.dev, &f.dst), "zeMemAllocDevice");
    ze_module_desc_t mdesc = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC,
                              .format = ZE_MODULE_FORMAT_IL_SPIRV,
                              .inputSize = spv_size,
                              .pInputModule = spv,
                              .pBuildFlags = ""};
    ze_module_handle_t module;
    ok(zeModuleCreate(f.ctx, f.dev, &mdesc, &module, NULL), "zeModuleCreate");
    ze_kernel_desc_t kdesc = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = "l0mem_f32_add"};
    ok(zeKernelCreate(module, &kdesc, &f.kernel), "zeKernelCreate");
    uint64_t elements = NBYTES / 4;
    ok(zeKernelSetGroupSize(f.kernel, 64, 1, 1), "zeKernelSetGroupSize");
    ok(zeKernelSetArgumentValue(f.kernel, 0, sizeof(void *), &f.src), "zeKernelSetArgumentValue");
    ok(zeKernelSetArgumentValue(f.kernel, 1, sizeof(void *), &f.dst), "zeKernelSetArgumentValue");
    ok(zeKernelSetArgumentValue(f.kernel, 2, sizeof(elements), &elements),
       "zeKernelSetArgumentValue");

    printf("{");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        for (long k = 0; k < n / 10 + 1; k++) /* warm caches and the driver's free lists */
            ops[i].run(&f);
        uint64_t t0 = now_ns();
        for (long k = 0; k < n; k++)
            ops[i].run(&f);
        uint64_t t1 = now_ns();
        printf("%s\"%s\": %.1f", i ? ", " : "", ops[i].name, (double)(t1 - t0) / (double)n);
    }
    printf("}\n");

    ok(zeKernelDestroy(f.kernel), "zeKernelDestroy");
    ok(zeModuleDestroy(module), "zeModuleDestroy");
    ok(zeMemFree(f.ctx, f.src), "zeMemFree");
    ok(zeMemFree(f.ctx, f.dst), "zeMemFree");
    ok(zeEventDestroy(f.sync), "zeEventDestroy");
    ok(zeEventPoolDestroy(f.pool), "zeEventPoolDestroy");
    ok(zeCommandListDestroy(f.list), "zeCommandListDestroy");
    ok(zeContextDestroy(f.ctx), "zeContextDestroy");
    free(spv);
    return 0;
}
