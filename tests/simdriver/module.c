/*
 * Modules and kernels. The simulator reads kernel names and parameter counts
 * from the SPIR-V, but it does not execute SPIR-V: l0mem's three kernels are
 * run by name with the C reference implementations below, one loop iteration
 * per launched work-item.
 */
#include "zesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPIRV_MAGIC 0x07230203u
#define SPIRV_MAGIC_SWAPPED 0x03022307u
#define OP_ENTRY_POINT 15
#define OP_FUNCTION 54
#define OP_FUNCTION_PARAMETER 55
#define EXEC_MODEL_KERNEL 6

static const struct {
    const char *name;
    size_t src_elem; /* bytes per element of argument 0 */
    size_t dst_elem; /* bytes per element of argument 1 */
} sim_builtins[] = {
    {"l0mem_f32_to_bf16", 4, 2},
    {"l0mem_bf16_add_to_f32", 2, 4},
    {"l0mem_f32_add", 4, 4},
};
#define SIM_NBUILTINS (sizeof(sim_builtins) / sizeof(sim_builtins[0]))

int sim_builtin_index(const char *name)
{
    for (size_t i = 0; i < SIM_NBUILTINS; i++)
        if (!strcmp(name, sim_builtins[i].name))
            return (int)i;
    return -1;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x0040u); /* quiet NaN, sign kept */
    b += 0x7fffu + ((b >> 16) & 1u);             /* round to nearest, ties to even */
    return (uint16_t)(b >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Kernel pointers must lie in simulator allocations, as a GPU page table requires. */
static int check_kernel_ptr(const char *kernel, int arg, uint64_t ptr, uint64_t bytes)
{
    if (bytes == 0)
        return 0;
    sim_alloc_t *a = sim_alloc_find((const void *)(uintptr_t)ptr);
    if (a && bytes <= (uint64_t)(a->base + a->size - (uint8_t *)(uintptr_t)ptr))
        return 0;
    fprintf(stderr, "zesim: %s: argument %d (0x%llx, %llu bytes) is not inside one allocation\n",
            kernel, arg, (unsigned long long)ptr, (unsigned long long)bytes);
    return -1;
}

ze_result_t sim_run_builtin(int builtin, const char *name, const uint64_t args[3],
                            const uint32_t group[3], const uint32_t count[3])
{
    if (builtin < 0 || (size_t)builtin >= SIM_NBUILTINS)
        return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    uint64_t n = args[2];
    uint64_t launched_x = (uint64_t)group[0] * count[0];
    /* Work-items that differ only in y or z run the same get_global_id(0). */
    uint64_t reps = (uint64_t)group[1] * count[1] * group[2] * count[2];
    uint64_t m = n < launched_x ? n : launched_x;
    if (reps == 0 || m == 0)
        return ZE_RESULT_SUCCESS;
    if (m > (1ull << 46) ||
        check_kernel_ptr(name, 0, args[0], m * sim_builtins[builtin].src_elem) ||
        check_kernel_ptr(name, 1, args[1], m * sim_builtins[builtin].dst_elem))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    void *src = (void *)(uintptr_t)args[0];
    void *dst = (void *)(uintptr_t)args[1];
    for (uint64_t rep = 0; rep < reps; rep++) {
        switch (builtin) {
        case 0: {
            const float *s = src;
            uint16_t *d = dst;
            for (uint64_t i = 0; i < m; i++)
                d[i] = f32_to_bf16(s[i]);
            break;
        }
        case 1: {
            const uint16_t *s = src;
            float *d = dst;
            for (uint64_t i = 0; i < m; i++)
                d[i] += bf16_to_f32(s[i]);
            break;
        }
        case 2: {
            const float *s = src;
            float *d = dst;
            for (uint64_t i = 0; i < m; i++)
                d[i] += s[i];
            break;
        }
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* ------------------------------------------------------------------ SPIR-V */

static uint32_t bswap32(uint32_t v)
{
    return __builtin_bswap32(v);
}

static void module_release(sim_module_t *m)
{
    for (uint32_t i = 0; i < m->nentries; i++)
        free(m->entries[i].name);
    free(m->entries);
    free(m->names);
    m->entries = NULL;
    m->names = NULL;
    m->nentries = 0;
}

/* Parse entry point names and parameter counts; on failure, write why into log. */
static int parse_spirv(const uint8_t *bin, size_t size, sim_module_t *m, char *log, size_t loglen)
{
    if (size < 20 || size % 4) {
        snprintf(log, loglen, "SPIR-V binary of %zu bytes is too short or not a multiple of 4",
                 size);
        return -1;
    }
    size_t nwords = size / 4;
    uint32_t *w = malloc(size);
    if (!w) {
        snprintf(log, loglen, "out of host memory");
        return -1;
    }
    memcpy(w, bin, size);
    if (w[0] == SPIRV_MAGIC_SWAPPED) {
        for (size_t i = 0; i < nwords; i++)
            w[i] = bswap32(w[i]);
    } else if (w[0] != SPIRV_MAGIC) {
        snprintf(log, loglen, "not a SPIR-V module: magic number is 0x%08x, expected 0x%08x",
                 w[0], SPIRV_MAGIC);
        free(w);
        return -1;
    }
    uint32_t bound = w[3];
    if (bound == 0 || bound > (1u << 22)) {
        snprintf(log, loglen, "SPIR-V id bound %u is out of range", bound);
        free(w);
        return -1;
    }
    uint32_t *params = calloc(bound, sizeof(uint32_t));
    uint32_t cap = 0;
    int rc = -1;
    if (!params) {
        snprintf(log, loglen, "out of host memory");
        goto out;
    }
    uint32_t current_fn = 0;
    for (size_t i = 5; i < nwords;) {
        uint32_t wc = w[i] >> 16, op = w[i] & 0xffffu;
        if (wc == 0 || i + wc > nwords) {
            snprintf(log, loglen, "malformed SPIR-V instruction at word %zu", i);
            goto out;
        }
        if (op == OP_FUNCTION && wc >= 5) {
            current_fn = w[i + 2] < bound ? w[i + 2] : 0;
        } else if (op == OP_FUNCTION_PARAMETER && current_fn) {
            params[current_fn]++;
        } else if (op == OP_ENTRY_POINT && wc >= 4 && w[i + 1] == EXEC_MODEL_KERNEL) {
            const char *name = (const char *)&w[i + 3];
            size_t maxlen = (wc - 3) * 4;
            if (strnlen(name, maxlen) == maxlen) {
                snprintf(log, loglen, "unterminated OpEntryPoint name at word %zu", i);
                goto out;
            }
            if (m->nentries == cap) {
                cap = cap ? cap * 2 : 8;
                sim_entry_t *e = realloc(m->entries, cap * sizeof(*e));
                if (!e) {
                    snprintf(log, loglen, "out of host memory");
                    goto out;
                }
                m->entries = e;
            }
            m->entries[m->nentries].name = strdup(name);
            /* Temporarily hold the function id; replaced by its parameter count below. */
            m->entries[m->nentries].nargs = w[i + 2];
            m->nentries++;
        }
        i += wc;
    }
    m->names = calloc(m->nentries ? m->nentries : 1, sizeof(char *));
    if (!m->names) {
        snprintf(log, loglen, "out of host memory");
        goto out;
    }
    for (uint32_t k = 0; k < m->nentries; k++) {
        uint32_t fn = m->entries[k].nargs;
        m->entries[k].nargs = fn < bound ? params[fn] : 0;
        m->names[k] = m->entries[k].name;
    }
    rc = 0;
out:
    free(params);
    free(w);
    if (rc)
        module_release(m);
    return rc;
}

static sim_buildlog_t *buildlog_new(const char *text)
{
    sim_buildlog_t *b = sim_obj_new(MAGIC_BUILDLOG, sizeof(*b));
    if (b)
        b->text = strdup(text);
    return b;
}

ze_result_t ZE_APICALL sim_zeModuleCreate(ze_context_handle_t h, ze_device_handle_t dev,
                                          const ze_module_desc_t *desc, ze_module_handle_t *ph,
                                          ze_module_build_log_handle_t *phLog)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_CONTEXT);
    SIM_CHECK(dev, MAGIC_DEVICE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(ph);
    if (desc->inputSize && !desc->pInputModule)
        return sim_leave(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    char log[300] = "";
    sim_module_t *m = sim_obj_new(MAGIC_MODULE, sizeof(*m));
    if (!m)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    int failed;
    if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV) {
        snprintf(log, sizeof(log), "the l0mem simulator accepts SPIR-V only, not native binaries");
        failed = 1;
    } else {
        failed = parse_spirv(desc->pInputModule, desc->inputSize, m, log, sizeof(log)) != 0;
    }
    if (phLog)
        *phLog = (ze_module_build_log_handle_t)buildlog_new(log);
    if (failed) {
        sim_obj_free(m);
        return sim_leave(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE);
    }
    *ph = (ze_module_handle_t)m;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeModuleDestroy(ze_module_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_MODULE);
    module_release((sim_module_t *)h);
    sim_obj_free(h);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeModuleGetKernelNames(ze_module_handle_t h, uint32_t *pCount,
                                                  const char **pNames)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_MODULE);
    SIM_NOTNULL(pCount);
    sim_module_t *m = (sim_module_t *)h;
    if (*pCount == 0 || pNames == NULL) {
        *pCount = m->nentries;
        return sim_leave(ZE_RESULT_SUCCESS);
    }
    uint32_t n = *pCount < m->nentries ? *pCount : m->nentries;
    for (uint32_t i = 0; i < n; i++)
        pNames[i] = m->names[i];
    *pCount = n;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeModuleBuildLogDestroy(ze_module_build_log_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_BUILDLOG);
    free(((sim_buildlog_t *)h)->text);
    sim_obj_free(h);
    return sim_leave(r);
}

static ze_result_t copy_string(const char *s, size_t *pSize, char *out)
{
    size_t need = strlen(s) + 1;
    if (*pSize == 0 || out == NULL) {
        *pSize = need;
        return ZE_RESULT_SUCCESS;
    }
    size_t n = *pSize < need ? *pSize : need;
    memcpy(out, s, n - 1);
    out[n - 1] = '\0';
    *pSize = n;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL sim_zeModuleBuildLogGetString(ze_module_build_log_handle_t h, size_t *pSize,
                                                     char *log)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_BUILDLOG);
    SIM_NOTNULL(pSize);
    sim_buildlog_t *b = (sim_buildlog_t *)h;
    return sim_leave(copy_string(b->text ? b->text : "", pSize, log));
}

/* ------------------------------------------------------------------ kernels */

ze_result_t ZE_APICALL sim_zeKernelCreate(ze_module_handle_t h, const ze_kernel_desc_t *desc,
                                          ze_kernel_handle_t *ph)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_MODULE);
    SIM_NOTNULL(desc);
    SIM_NOTNULL(desc->pKernelName);
    SIM_NOTNULL(ph);
    sim_module_t *m = (sim_module_t *)h;
    sim_entry_t *e = NULL;
    for (uint32_t i = 0; i < m->nentries; i++)
        if (!strcmp(m->entries[i].name, desc->pKernelName))
            e = &m->entries[i];
    if (!e)
        return sim_leave(ZE_RESULT_ERROR_INVALID_KERNEL_NAME);
    int builtin = sim_builtin_index(e->name);
    if (builtin >= 0 && e->nargs != 3) {
        fprintf(stderr, "zesim: %s has %u parameters in the SPIR-V; l0mem's contract says 3\n",
                e->name, e->nargs);
        return sim_leave(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    }
    sim_kernel_t *k = sim_obj_new(MAGIC_KERNEL, sizeof(*k));
    if (!k)
        return sim_leave(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    k->module = m;
    k->name = strdup(e->name);
    k->builtin = builtin;
    k->nargs = e->nargs;
    k->group[0] = k->group[1] = k->group[2] = 1;
    *ph = (ze_kernel_handle_t)k;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeKernelDestroy(ze_kernel_handle_t h)
{
    ze_result_t r = sim_enter();
    if (r == ZE_RESULT_ERROR_UNINITIALIZED)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    free(((sim_kernel_t *)h)->name);
    sim_obj_free(h);
    return sim_leave(r);
}

ze_result_t ZE_APICALL sim_zeKernelSetGroupSize(ze_kernel_handle_t h, uint32_t x, uint32_t y,
                                                uint32_t z)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    if (!x || !y || !z || x > 1024 || y > 1024 || z > 64 || (uint64_t)x * y * z > 1024)
        return sim_leave(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION);
    sim_kernel_t *k = (sim_kernel_t *)h;
    k->group[0] = x;
    k->group[1] = y;
    k->group[2] = z;
    return sim_leave(ZE_RESULT_SUCCESS);
}

static uint32_t largest_divisor(uint32_t v, uint32_t limit)
{
    if (v == 0)
        return 1;
    for (uint32_t d = limit < v ? limit : v; d > 1; d--)
        if (v % d == 0)
            return d;
    return 1;
}

ze_result_t ZE_APICALL sim_zeKernelSuggestGroupSize(ze_kernel_handle_t h, uint32_t gx,
                                                    uint32_t gy, uint32_t gz, uint32_t *x,
                                                    uint32_t *y, uint32_t *z)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    SIM_NOTNULL(x);
    SIM_NOTNULL(y);
    SIM_NOTNULL(z);
    *x = largest_divisor(gx, 256);
    *y = largest_divisor(gy, 1024 / *x);
    uint32_t zl = 1024 / (*x * *y);
    *z = largest_divisor(gz, zl < 64 ? zl : 64);
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeKernelSetArgumentValue(ze_kernel_handle_t h, uint32_t index,
                                                    size_t size, const void *value)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    sim_kernel_t *k = (sim_kernel_t *)h;
    if (index >= k->nargs || index >= SIM_MAX_ARGS)
        return sim_leave(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX);
    /* l0mem's kernels take two pointers and a ulong: 8 bytes each. */
    if ((k->builtin >= 0 && size != 8) || size == 0 || size > SIM_MAX_ARG_SIZE)
        return sim_leave(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE);
    memset(k->args[index], 0, SIM_MAX_ARG_SIZE);
    if (value)
        memcpy(k->args[index], value, size);
    k->arg_size[index] = (uint32_t)size;
    k->arg_set |= 1ull << index;
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeKernelGetProperties(ze_kernel_handle_t h, ze_kernel_properties_t *p)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    SIM_NOTNULL(p);
    sim_kernel_t *k = (sim_kernel_t *)h;
    p->numKernelArgs = k->nargs;
    p->requiredGroupSizeX = p->requiredGroupSizeY = p->requiredGroupSizeZ = 0;
    p->requiredNumSubGroups = 0;
    p->requiredSubgroupSize = 0;
    p->maxSubgroupSize = 32;
    p->maxNumSubgroups = 32;
    p->localMemSize = 0;
    p->privateMemSize = 0;
    p->spillMemSize = 0;
    memset(&p->uuid, 0, sizeof(p->uuid));
    return sim_leave(ZE_RESULT_SUCCESS);
}

ze_result_t ZE_APICALL sim_zeKernelGetName(ze_kernel_handle_t h, size_t *pSize, char *name)
{
    ze_result_t r = sim_enter();
    if (r)
        return sim_leave(r);
    SIM_CHECK(h, MAGIC_KERNEL);
    SIM_NOTNULL(pSize);
    return sim_leave(copy_string(((sim_kernel_t *)h)->name, pSize, name));
}
