/*
 * Environment variables a real Level Zero driver reads at zeInit, honoured
 * so that the audit's workarounds can be tested against ground truth:
 *
 *   ZE_AFFINITY_MASK                       which root devices zeDeviceGet reports
 *   NEOReadDebugKeys=1 plus
 *     ForceZeDeviceCanAccessPerReturnValue  overrides zeDeviceCanAccessPeer (-1: no override)
 *     EnableDeferBacking                    0: no deferred backing (see defer_backing_mirror)
 *
 * These are not ZESIM_* keys: a bad value never fails zeInit (a real driver
 * does not either); it is ignored after one stderr line.
 */
#include "zesim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sim_drv_env_t sim_drv_env;

/* Strict decimal integer, surrounding blanks allowed. Returns 0, or -1 if v is not one. */
static int parse_int(const char *v, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || errno)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

/* A NEO debug key as an integer; `unset` when absent or malformed (after one stderr line). */
static long neo_key(const char *name, long unset)
{
    const char *v = getenv(name);
    long x;
    if (!v)
        return unset;
    if (parse_int(v, &x)) {
        fprintf(stderr, "zesim: %s=%s: not an integer, ignored\n", name, v);
        return unset;
    }
    return x;
}

static void append(char *buf, size_t len, const char *text)
{
    size_t used = strlen(buf);
    if (used + 1 < len)
        snprintf(buf + used, len - used, "%s", text);
}

/*
 * Mark the devices ZE_AFFINITY_MASK lists as visible. Unset or blank: all.
 * The spec reports the listed devices renumbered from 0, in the driver's own
 * order, "not affected by the order of devices in the affinity mask": here
 * that is ascending configured index. Entries naming no configured device,
 * sub-device entries ("0.1": not modelled, even with the subdevices key) and
 * malformed ones are ignored, reported in one stderr line.
 */
static void load_affinity_mask(void)
{
    const char *mask = getenv("ZE_AFFINITY_MASK");
    int all = 1;
    if (mask)
        for (const char *p = mask; *p; p++)
            if (!isspace((unsigned char)*p) && *p != ',')
                all = 0;
    for (uint32_t i = 0; i < SIM_MAX_DEVICES; i++)
        sim_devices[i].visible = all && i < sim_cfg.devices;
    if (all)
        return;
    char ignored[256] = "";
    char *copy = strdup(mask);
    if (!copy) {
        fprintf(stderr, "zesim: ZE_AFFINITY_MASK: out of memory, no device is visible\n");
        return;
    }
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        size_t n = strlen(tok);
        while (n > 0 && isspace((unsigned char)tok[n - 1]))
            tok[--n] = '\0';
        if (n == 0)
            continue;
        long idx;
        int digits = 1;
        for (const char *c = tok; *c; c++)
            digits = digits && isdigit((unsigned char)*c);
        if (digits && !parse_int(tok, &idx) && idx >= 0 && (uint64_t)idx < sim_cfg.devices) {
            sim_devices[idx].visible = 1;
            continue;
        }
        append(ignored, sizeof(ignored), *ignored ? ", " : "");
        append(ignored, sizeof(ignored), tok);
    }
    free(copy);
    if (*ignored)
        fprintf(stderr,
                "zesim: ZE_AFFINITY_MASK=%s: ignored %s: not a device index below %u (the "
                "simulator %s)\n",
                mask, ignored, sim_cfg.devices,
                sim_cfg.subdevices ? "does not select sub-devices by mask"
                                   : "has no sub-devices");
}

void sim_drv_env_load(void)
{
    sim_drv_env_t e = {.read_debug_keys = 0, .force_can_access = -1, .defer_backing = 1};
    load_affinity_mask();
    /* As in Intel's driver, debug keys are read only when NEOReadDebugKeys is set non-zero. */
    e.read_debug_keys = neo_key("NEOReadDebugKeys", 0) != 0;
    if (e.read_debug_keys) {
        e.force_can_access = neo_key("ForceZeDeviceCanAccessPerReturnValue", -1);
        if (e.force_can_access != -1)
            e.force_can_access = e.force_can_access != 0;
        e.defer_backing = neo_key("EnableDeferBacking", -1) != 0;
    }
    sim_drv_env = e;
}

uint32_t sim_visible_devices(ze_device_handle_t *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < sim_cfg.devices; i++) {
        if (!sim_devices[i].visible)
            continue;
        if (out && n < max)
            out[n] = (ze_device_handle_t)&sim_devices[i];
        n++;
    }
    return n;
}

int sim_device_usable(const sim_device_t *d)
{
    if (d->sub >= 0)
        return (uint32_t)d->sub < sim_cfg.subdevices && sim_device_usable(sim_root_of(d));
    return d->index < sim_cfg.devices && d->visible;
}

int sim_can_access(uint32_t a, uint32_t b)
{
    /* Intel's driver applies the override before anything else, so it holds for a == b too. */
    if (sim_drv_env.force_can_access != -1)
        return (int)sim_drv_env.force_can_access;
    return a == b || sim_cfg.peers[a][b];
}

int sim_mirrors_enabled(void)
{
    if (sim_cfg.mirror == MIRROR_NONE)
        return 0;
    return !(sim_cfg.defer_backing_mirror && !sim_drv_env.defer_backing);
}
