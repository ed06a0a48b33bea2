/*
 * Peer copies that go wrong, so that l0mem's copy checks have ground truth:
 * corruption (corrupt_offsets, corrupt_rate) and a hang (hang_copy_at).
 *
 * A peer copy is a copy between memory of two different root devices (a
 * device-to-device copy across cards): the route reported to corrupt data
 * and to hang. Copies to or from host memory and within one card are left
 * alone. A corrupted byte is the source byte XOR 0xA5, so it always differs;
 * a byte hit twice counts once. zesim_corrupted_bytes and zesim_peer_copies
 * give the ground truth.
 */
#include "zesim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t peer_copies;    /* peer copies executed since the fault keys were last set */
static uint64_t corrupted;      /* bytes corrupted since then */

void sim_faults_reset(void)
{
    peer_copies = 0;
    corrupted = 0;
}

static int is_peer(int src_device, int dst_device)
{
    return src_device >= 0 && dst_device >= 0 && src_device != dst_device;
}

int sim_copy_hangs(int src_device, int dst_device)
{
    if (!is_peer(src_device, dst_device))
        return 0;
    peer_copies++;
    return sim_cfg.hang_copy_at && peer_copies == sim_cfg.hang_copy_at;
}

static void flip(uint8_t *dst, const uint8_t *src, size_t i)
{
    if (dst[i] == src[i]) {
        dst[i] = src[i] ^ 0xA5;
        corrupted++;
    }
}

/* xorshift64*: a fixed sequence per (seed, copy), so a test can repeat a corruption. */
static uint64_t next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

void sim_copy_corrupt(int src_device, int dst_device, uint8_t *dst, const uint8_t *src, size_t size)
{
    if (!is_peer(src_device, dst_device) || size == 0)
        return;
    for (uint32_t k = 0; k < sim_cfg.ncorrupt_offsets; k++)
        if (sim_cfg.corrupt_offsets[k] < size)
            flip(dst, src, (size_t)sim_cfg.corrupt_offsets[k]);
    double rate = sim_cfg.corrupt_rate;
    if (rate <= 0.0)
        return;
    uint64_t state = (sim_cfg.corrupt_seed ^ (peer_copies * 0x9E3779B97F4A7C15ull)) | 1;
    /* Gaps between corrupted bytes are geometric: the cost is the bytes hit, not the size. */
    double scale = rate >= 1.0 ? 0.0 : 1.0 / log1p(-rate);
    for (size_t i = 0;;) {
        double u = ((double)(next(&state) >> 11) + 0.5) / 9007199254740992.0;
        double gap = rate >= 1.0 ? 0.0 : floor(log(u) * scale);
        if (gap >= (double)(size - i))
            return;
        i += (size_t)gap;
        flip(dst, src, i);
        if (++i >= size)
            return;
    }
}

SIM_EXPORT uint64_t zesim_corrupted_bytes(void)
{
    return sim_locked_read(&corrupted);
}

SIM_EXPORT uint64_t zesim_peer_copies(void)
{
    return sim_locked_read(&peer_copies);
}

/*
 * A driver that hangs or aborts in a chosen call, read from the environment
 * (not ZESIM_CONFIG: "load" comes before zeInit reads any configuration):
 * ZESIM_HANG_IN and ZESIM_ABORT_IN name one point each, "load" (the library's
 * constructor, when the loader opens it; abort only), "init" (zeInit),
 * "alloc" (zeMemAllocDevice), "free" (zeMemFree) or "copy"
 * (zeCommandListAppendMemoryCopy). A hang sleeps for ever
 * in the call, without sim_lock held, and only SIGKILL or a signal's default
 * action ends the process; an abort calls abort(). This is the ground truth
 * for l0mem's guard against drivers that never return or take the process
 * with them.
 */
static int named(const char *var, const char *point)
{
    const char *v = getenv(var);
    return v && !strcmp(v, point);
}

void sim_fault_point(const char *point)
{
    if (named("ZESIM_ABORT_IN", point)) {
        fprintf(stderr, "zesim: aborting in %s (ZESIM_ABORT_IN)\n", point);
        abort();
    }
    if (named("ZESIM_HANG_IN", point)) {
        for (;;)
            pause();
    }
}

__attribute__((constructor)) static void sim_on_load(void)
{
    sim_fault_point("load");
}
