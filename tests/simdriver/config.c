/*
 * Configuration: ZESIM_<KEY> environment variables and a key=value file named
 * by ZESIM_CONFIG (the environment wins), read once at zeInit, changeable at
 * run time through zesim_set.
 */
#include "zesim.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

sim_config_t sim_cfg;

static const char *const sim_keys[] = {
    "devices",        "device_memory", "peers",          "mirror",
    "mirror_ratio",   "mirror_release", "sysman",        "dmabuf",
    "driver_version", "fail_oom_after", "fail_alloc_at", "device_lost_at",
    "defer_backing_mirror", "subdevices", "timestamp_not_ready", "fill_noop",
    "device_lost_on",
    "init_drivers",
    "free_delay_ms",
    "shared_state",
    "corrupt_offsets",
    "corrupt_rate",
    "corrupt_seed",
    "hang_copy_at",
    "link_gbps",
    "mirror_kind",
};
#define SIM_NKEYS (sizeof(sim_keys) / sizeof(sim_keys[0]))

static void sim_config_defaults(sim_config_t *c)
{
    memset(c, 0, sizeof(*c));
    c->devices = 2;
    c->device_memory = 8ull << 30;
    memset(c->peers, 1, sizeof(c->peers));
    c->mirror = MIRROR_NONE;
    c->mirror_ratio = 1.0;
    c->mirror_release = 1;
    c->sysman = 1;
    c->dmabuf = 1;
    c->defer_backing_mirror = 1;
    c->driver_version = 1;
    c->corrupt_seed = 1;
}

static char *sim_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int parse_u64(const char *v, uint64_t *out)
{
    if (*v == '\0' || *v == '-' || *v == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || *end != '\0')
        return -1;
    *out = x;
    return 0;
}

static int parse_bytes(const char *v, uint64_t *out)
{
    if (!isdigit((unsigned char)*v))
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end) {
        end++;
        if (strcasecmp(end, "") != 0 && strcasecmp(end, "B") != 0 && strcasecmp(end, "iB") != 0)
            return -1;
    }
    if (shift && x > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)x << shift;
    return 0;
}

/* A finite number from 0 to max; 0 on success, -1 otherwise (out untouched). */
static int parse_number(const char *v, double max, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno || !isfinite(d) || d < 0 || d > max)
        return -1;
    *out = d;
    return 0;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
        *out = 1;
    else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
             !strcasecmp(v, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

static int is_off(const char *v)
{
    return *v == '\0' || !strcasecmp(v, "off") || !strcasecmp(v, "none");
}

/* peers: "all", "none", or "i>j,k>l" (i can access j's memory). */
static int parse_peers(const char *v, uint32_t devices, uint8_t peers[SIM_MAX_DEVICES][SIM_MAX_DEVICES])
{
    if (!strcasecmp(v, "all")) {
        memset(peers, 1, SIM_MAX_DEVICES * SIM_MAX_DEVICES);
        return 0;
    }
    memset(peers, 0, SIM_MAX_DEVICES * SIM_MAX_DEVICES);
    if (!strcasecmp(v, "none"))
        return 0;
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || *end != '>' || errno)
            return -1;
        p = end + 1;
        long b = strtol(p, &end, 10);
        if (end == p || errno)
            return -1;
        if (a < 0 || b < 0 || (uint32_t)a >= devices || (uint32_t)b >= devices || a == b)
            return -1;
        peers[a][b] = 1;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return 0;
}

static int known_key(const char *key)
{
    for (size_t i = 0; i < SIM_NKEYS; i++)
        if (!strcmp(key, sim_keys[i]))
            return 1;
    return 0;
}

/*
 * Apply one key to cfg. Returns 0, or -1 with a one-line reason in err.
 * At run time (runtime != 0) the device count is fixed. Setting a fault key
 * restarts its counter.
 */
static int apply_key(sim_config_t *c, const char *key, const char *value, int runtime, char *err,
                     size_t errlen)
{
    uint64_t u;
    int b;
    if (!known_key(key)) {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -1;
    }
    if (!strcmp(key, "devices")) {
        if (runtime) {
            snprintf(err, errlen, "devices cannot change after zeInit");
            return -1;
        }
        if (parse_u64(value, &u) || u > SIM_MAX_DEVICES) {
            snprintf(err, errlen, "devices=%s: expected 0..%d", value, SIM_MAX_DEVICES);
            return -1;
        }
        c->devices = (uint32_t)u;
    } else if (!strcmp(key, "device_memory")) {
        if (parse_bytes(value, &u) || u == 0) {
            snprintf(err, errlen, "device_memory=%s: expected bytes with optional K/M/G/T suffix",
                     value);
            return -1;
        }
        if (u < c->subdevices) {
            snprintf(err, errlen, "device_memory=%s: less than one byte per sub-device", value);
            return -1;
        }
        c->device_memory = u;
    } else if (!strcmp(key, "init_drivers")) {
        /* Read by zeGetGlobalProcAddrTable from the environment (sim_offers_init_drivers);
           checked here so that a bad value fails zeInit like any other. */
        if (runtime) {
            snprintf(err, errlen, "init_drivers cannot change after zeInit");
            return -1;
        }
        if (parse_bool(value, &b)) {
            snprintf(err, errlen, "init_drivers=%s: expected 1 or 0", value);
            return -1;
        }
    } else if (!strcmp(key, "subdevices")) {
        if (runtime) {
            snprintf(err, errlen, "subdevices cannot change after zeInit");
            return -1;
        }
        /* Intel's driver never reports a single sub-device: a one-tile card has none. */
        if (parse_u64(value, &u) || u == 1 || u > SIM_MAX_SUBDEVICES) {
            snprintf(err, errlen, "subdevices=%s: expected 0 or 2..%d", value, SIM_MAX_SUBDEVICES);
            return -1;
        }
        if (u > c->device_memory) {
            snprintf(err, errlen, "subdevices=%s: more sub-devices than bytes of device_memory",
                     value);
            return -1;
        }
        c->subdevices = (uint32_t)u;
    } else if (!strcmp(key, "peers")) {
        if (parse_peers(value, c->devices, c->peers)) {
            snprintf(err, errlen, "peers=%s: expected all, none or a list like 0>1,1>0", value);
            return -1;
        }
    } else if (!strcmp(key, "mirror")) {
        if (!strcasecmp(value, "none"))
            c->mirror = MIRROR_NONE;
        else if (!strcasecmp(value, "peer-resident"))
            c->mirror = MIRROR_PEER_RESIDENT;
        else if (!strcasecmp(value, "dmabuf"))
            c->mirror = MIRROR_DMABUF;
        else if (!strcasecmp(value, "all"))
            c->mirror = MIRROR_ALL;
        else {
            snprintf(err, errlen, "mirror=%s: expected none, peer-resident, dmabuf or all", value);
            return -1;
        }
    } else if (!strcmp(key, "mirror_kind")) {
        if (!strcasecmp(value, "memfd")) {
            c->mirror_kind = MIRROR_KIND_MEMFD;
        } else if (!strcasecmp(value, "anon")) {
            if (!SIM_KEEPER_SUPPORTED) {
                snprintf(err, errlen, "mirror_kind=anon: not supported on this architecture");
                return -1;
            }
            c->mirror_kind = MIRROR_KIND_ANON;
        } else {
            snprintf(err, errlen, "mirror_kind=%s: expected memfd or anon", value);
            return -1;
        }
    } else if (!strcmp(key, "mirror_ratio")) {
        if (parse_number(value, 64, &c->mirror_ratio)) {
            snprintf(err, errlen, "mirror_ratio=%s: expected a number from 0 to 64", value);
            return -1;
        }
    } else if (!strcmp(key, "link_gbps")) {
        if (parse_number(value, 1000, &c->link_gbps)) {
            snprintf(err, errlen, "link_gbps=%s: expected GB/s from 0 (off) to 1000", value);
            return -1;
        }
        sim_engines_reset();
    } else if (!strcmp(key, "mirror_release") || !strcmp(key, "sysman") ||
               !strcmp(key, "dmabuf") || !strcmp(key, "defer_backing_mirror") ||
               !strcmp(key, "timestamp_not_ready") || !strcmp(key, "fill_noop")) {
        if (parse_bool(value, &b)) {
            snprintf(err, errlen, "%s=%s: expected 1 or 0", key, value);
            return -1;
        }
        if (!strcmp(key, "mirror_release"))
            c->mirror_release = b;
        else if (!strcmp(key, "sysman"))
            c->sysman = b;
        else if (!strcmp(key, "dmabuf"))
            c->dmabuf = b;
        else if (!strcmp(key, "timestamp_not_ready"))
            c->timestamp_not_ready = b;
        else if (!strcmp(key, "fill_noop"))
            c->fill_noop = b;
        else
            c->defer_backing_mirror = b;
    } else if (!strcmp(key, "driver_version")) {
        if (parse_u64(value, &u) || u > UINT32_MAX) {
            snprintf(err, errlen, "driver_version=%s: expected an unsigned 32-bit number", value);
            return -1;
        }
        c->driver_version = (uint32_t)u;
    } else if (!strcmp(key, "free_delay_ms")) {
        if (parse_u64(value, &u) || u > SIM_MAX_FREE_DELAY_MS) {
            snprintf(err, errlen, "free_delay_ms=%s: expected 0..%d milliseconds", value,
                     SIM_MAX_FREE_DELAY_MS);
            return -1;
        }
        c->free_delay_ms = u;
    } else if (!strcmp(key, "fail_oom_after")) {
        if (is_off(value)) {
            c->oom_after_on = 0;
        } else if (parse_bytes(value, &u)) {
            snprintf(err, errlen, "fail_oom_after=%s: expected bytes or off", value);
            return -1;
        } else {
            c->oom_after_on = 1;
            c->fail_oom_after = u;
        }
        for (uint32_t i = 0; i < SIM_MAX_DEVICES; i++)
            sim_devices[i].oom_bytes = 0;
    } else if (!strcmp(key, "fail_alloc_at") || !strcmp(key, "device_lost_at")) {
        if (is_off(value))
            u = 0;
        else if (parse_u64(value, &u)) {
            snprintf(err, errlen, "%s=%s: expected a call number counting from 1, or off", key,
                     value);
            return -1;
        }
        if (!strcmp(key, "fail_alloc_at")) {
            c->fail_alloc_at = u;
            sim_alloc_calls = 0;
        } else {
            c->device_lost_at = u;
            sim_api_calls = 0;
            sim_lost = 0;
        }
    } else if (!strcmp(key, "corrupt_offsets")) {
        c->ncorrupt_offsets = 0;
        if (!is_off(value)) {
            char buf[512];
            if (strlen(value) >= sizeof(buf)) {
                snprintf(err, errlen, "corrupt_offsets: too long");
                return -1;
            }
            strcpy(buf, value);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                uint64_t off;
                if (c->ncorrupt_offsets == 16 || parse_u64(sim_trim(tok), &off)) {
                    snprintf(err, errlen, "corrupt_offsets=%s: expected up to 16 byte offsets "
                             "separated by commas, or off", value);
                    return -1;
                }
                c->corrupt_offsets[c->ncorrupt_offsets++] = off;
            }
        }
        sim_faults_reset();
    } else if (!strcmp(key, "corrupt_rate")) {
        double r = 0.0;
        if (!is_off(value) && parse_number(value, 1, &r)) {
            snprintf(err, errlen, "corrupt_rate=%s: expected a share of bytes from 0 to 1, or off",
                     value);
            return -1;
        }
        c->corrupt_rate = r;
        sim_faults_reset();
    } else if (!strcmp(key, "corrupt_seed")) {
        if (parse_u64(value, &u)) {
            snprintf(err, errlen, "corrupt_seed=%s: expected an unsigned number", value);
            return -1;
        }
        c->corrupt_seed = u;
        sim_faults_reset();
    } else if (!strcmp(key, "hang_copy_at")) {
        if (is_off(value))
            u = 0;
        else if (parse_u64(value, &u)) {
            snprintf(err, errlen, "hang_copy_at=%s: expected a count from 1, or off", value);
            return -1;
        }
        c->hang_copy_at = u;
        sim_faults_reset();
    } else if (!strcmp(key, "shared_state")) {
        /* Every process must count into the same file from its first allocation on. */
        if (runtime) {
            snprintf(err, errlen, "shared_state cannot change after zeInit");
            return -1;
        }
        size_t n = strlen(value);
        if (is_off(value)) {
            c->shared_state[0] = '\0';
        } else if (n == 0 || n >= sizeof(c->shared_state) || value[0] != '/') {
            snprintf(err, errlen, "shared_state=%s: expected an absolute path (under %zu bytes) or off",
                     value, sizeof(c->shared_state));
            return -1;
        } else {
            memcpy(c->shared_state, value, n + 1);
        }
    } else if (!strcmp(key, "device_lost_on")) {
        size_t n = strlen(value);
        int ok = n < sizeof(c->device_lost_on) && !strncmp(value, "ze", 2);
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)value[i]);
        if (is_off(value)) {
            c->device_lost_on[0] = '\0';
        } else if (!ok) {
            snprintf(err, errlen, "device_lost_on=%s: expected a Level Zero entry point such as "
                     "zeContextCreate, or off", value);
            return -1;
        } else {
            memcpy(c->device_lost_on, value, n + 1);
        }
        sim_lost = 0;
    }
    return 0;
}

/* Checks across keys, on the final values. Returns 0, or -1 with a reason in err. */
static int check_combination(const sim_config_t *c, char *err, size_t errlen)
{
    /* The exported fd is the mirror itself and carries its pages: anonymous memory cannot. */
    if (c->mirror == MIRROR_DMABUF && c->mirror_kind == MIRROR_KIND_ANON) {
        snprintf(err, errlen, "mirror=dmabuf requires mirror_kind=memfd (an exported fd "
                 "carries the mirror's pages)");
        return -1;
    }
    return 0;
}

static void lower_key(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

/* Collected raw values: the file first, then the environment over it. */
typedef struct sim_raw {
    char *value[SIM_NKEYS];
    char where[SIM_NKEYS][96];
} sim_raw_t;

static int raw_put(sim_raw_t *raw, const char *key, const char *value, const char *where,
                   char *err, size_t errlen)
{
    for (size_t i = 0; i < SIM_NKEYS; i++) {
        if (strcmp(key, sim_keys[i]) != 0)
            continue;
        free(raw->value[i]);
        raw->value[i] = strdup(value);
        snprintf(raw->where[i], sizeof(raw->where[i]), "%s", where);
        return 0;
    }
    snprintf(err, errlen, "%s: unknown key '%s'", where, key);
    return -1;
}

static int load_file(sim_raw_t *raw, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "ZESIM_CONFIG=%s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *s = sim_trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char where[96];
        snprintf(where, sizeof(where), "%.80s:%d", path, lineno);
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: expected key=value", where);
            rc = -1;
            break;
        }
        *eq = '\0';
        char key[64];
        lower_key(key, sim_trim(s), sizeof(key));
        if (!strcmp(key, "init_drivers")) {
            /* The loader asks for the tables before zeInit reads this file. */
            snprintf(err, errlen, "%s: init_drivers is read from ZESIM_INIT_DRIVERS only", where);
            rc = -1;
            break;
        }
        if (raw_put(raw, key, sim_trim(eq + 1), where, err, errlen)) {
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

extern char **environ;

/* Read ZESIM_CONFIG then ZESIM_* into sim_cfg. Returns 0, or -1 after one stderr line. */
int sim_config_load(void)
{
    sim_config_t c;
    sim_raw_t raw;
    char err[400];
    int rc = -1;
    memset(&raw, 0, sizeof(raw));
    sim_config_defaults(&c);
    const char *path = getenv("ZESIM_CONFIG");
    if (path && *path && load_file(&raw, path, err, sizeof(err)))
        goto out;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "ZESIM_", 6) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char key[64];
        char where[96];
        size_t klen = (size_t)(eq - (*e + 6));
        if (klen >= sizeof(key))
            klen = sizeof(key) - 1;
        memcpy(key, *e + 6, klen);
        key[klen] = '\0';
        snprintf(where, sizeof(where), "ZESIM_%s", key);
        lower_key(key, key, sizeof(key));
        if (!strcmp(key, "config"))
            continue;
        if (!strcmp(key, "hang_in") || !strcmp(key, "abort_in")) {
            /* Read by sim_fault_point (faults.c), not here; only the value is checked. */
            const char *v = eq + 1;
            if (strcmp(v, "init") && strcmp(v, "alloc") && strcmp(v, "free") && strcmp(v, "copy") &&
                (strcmp(v, "load") || !strcmp(key, "hang_in"))) {
                snprintf(err, sizeof(err), "%s=%s: expected %s", where, v,
                         strcmp(key, "hang_in") ? "load, init, alloc, free or copy"
                                                : "init, alloc, free or copy");
                goto out;
            }
            continue;
        }
        if (raw_put(&raw, key, eq + 1, where, err, sizeof(err)))
            goto out;
    }
    /*
     * Key order puts devices before peers and device_memory before subdevices, so each
     * is checked against the final value of the other.
     */
    for (size_t i = 0; i < SIM_NKEYS; i++) {
        char sub[300];
        if (raw.value[i] && apply_key(&c, sim_keys[i], raw.value[i], 0, sub, sizeof(sub))) {
            snprintf(err, sizeof(err), "%s: %s", raw.where[i], sub);
            goto out;
        }
    }
    if (check_combination(&c, err, sizeof(err)))
        goto out;
    sim_cfg = c;
    sim_alloc_calls = 0;
    sim_api_calls = 0;
    sim_lost = 0;
    for (uint32_t i = 0; i < SIM_MAX_DEVICES; i++)
        sim_devices[i].oom_bytes = 0;
    rc = 0;
out:
    for (size_t i = 0; i < SIM_NKEYS; i++)
        free(raw.value[i]);
    if (rc)
        fprintf(stderr, "zesim: bad configuration: %s\n", err);
    return rc;
}

int sim_config_set(const char *key, const char *value, int runtime, char *err, size_t errlen)
{
    char k[64];
    lower_key(k, key, sizeof(k));
    sim_config_t c = sim_cfg;
    if (apply_key(&c, k, value, runtime, err, errlen) || check_combination(&c, err, errlen))
        return -1;
    sim_cfg = c;
    return 0;
}

int sim_offers_init_drivers(void)
{
    const char *v = getenv("ZESIM_INIT_DRIVERS");
    int b = 0;
    return v && !parse_bool(v, &b) && b;
}
