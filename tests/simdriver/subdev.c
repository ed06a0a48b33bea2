/*
 * Sub-devices (the `subdevices` key): each root device reports N tiles, as
 * Intel's multi-tile GPUs do. Device memory is split evenly between them and
 * an allocation on the root device is spread evenly over its tiles, so a
 * root's live bytes are always the sum of its tiles'.
 */
#include "zesim.h"

sim_device_t sim_subdevices[SIM_MAX_DEVICES][SIM_MAX_SUBDEVICES];

void sim_subdevices_init(void)
{
    for (uint32_t i = 0; i < SIM_MAX_DEVICES; i++) {
        for (uint32_t k = 0; k < SIM_MAX_SUBDEVICES; k++) {
            sim_device_t *s = &sim_subdevices[i][k];
            s->magic = MAGIC_DEVICE;
            s->index = i;
            s->sub = (int)k;
            s->memmod.magic = MAGIC_MEMMOD;
            s->memmod.device = i;
            s->memmod.sub = (int)k;
        }
    }
}

/* Tile k's share of n bytes: n / N, plus one of the n % N leftover bytes for the first tiles. */
static uint64_t share(uint64_t n, uint32_t k)
{
    uint32_t parts = sim_cfg.subdevices;
    return n / parts + (k < n % parts ? 1 : 0);
}

uint64_t sim_device_capacity(const sim_device_t *d)
{
    if (d->sub < 0)
        return sim_cfg.device_memory;
    return share(sim_cfg.device_memory, (uint32_t)d->sub);
}

uint64_t sim_root_part(uint64_t size, uint32_t sub)
{
    return share(size, sub);
}

int sim_context_has(const sim_context_t *ctx, const sim_device_t *d)
{
    if (ctx->device_mask & (1u << d->index))
        return 1;
    return d->sub >= 0 && (ctx->sub_mask[d->index] & (1u << d->sub));
}

ze_device_handle_t sim_alloc_owner(const sim_alloc_t *a)
{
    if (a->device < 0)
        return NULL;
    if (a->sub >= 0)
        return (ze_device_handle_t)&sim_subdevices[a->device][a->sub];
    return (ze_device_handle_t)&sim_devices[a->device];
}

sim_device_t *sim_root_of(const sim_device_t *d)
{
    return &sim_devices[d->index];
}
