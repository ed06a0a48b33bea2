/*
 * Device-wide memory usage across processes (the shared_state key).
 *
 * A real device's memory is shared by every process that uses it, and Sysman
 * reports the device's, not the caller's, usage. The simulator keeps its
 * counts per process, so a watcher in another process (l0mem run/watch read
 * Sysman from a child of their own) would see nothing. With shared_state=PATH
 * every simulator process counts its device allocations into a slot of that
 * file (mapped shared), and zesMemoryGetState sums the slots of the processes
 * still alive: a process that ends, however it ends, no longer counts, as a
 * device frees a dead process's memory. Processes agree on devices by their
 * configured index. A forked child counts into its parent's slot.
 */
#include "zesim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARED_SLOTS 64
#define SHARED_MAGIC 0x7a6573696d736831ull /* "zesimsh1" */

typedef struct {
    int32_t pid; /* 0: free */
    int32_t pad;
    uint64_t used[SIM_MAX_DEVICES][1 + SIM_MAX_SUBDEVICES]; /* [0]: root, [1 + k]: tile k */
} shared_slot_t;

typedef struct {
    uint64_t magic;
    shared_slot_t slot[SHARED_SLOTS];
} shared_file_t;

static shared_file_t *shared;
static shared_slot_t *own;

static int alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int sim_shared_open(void)
{
    const char *path = sim_cfg.shared_state;
    if (!path[0] || shared)
        return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(shared_file_t))) {
        fprintf(stderr, "zesim: bad configuration: shared_state=%s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *m = mmap(NULL, sizeof(shared_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "zesim: bad configuration: shared_state=%s: %s\n", path, strerror(errno));
        return -1;
    }
    shared = m;
    uint64_t zero = 0;
    __atomic_compare_exchange_n(&shared->magic, &zero, SHARED_MAGIC, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    int32_t me = (int32_t)getpid();
    for (int i = 0; i < SHARED_SLOTS && !own; i++) {
        shared_slot_t *s = &shared->slot[i];
        int32_t was = __atomic_load_n(&s->pid, __ATOMIC_SEQ_CST);
        if (was && alive(was))
            continue;
        if (__atomic_compare_exchange_n(&s->pid, &was, -me, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            /* Claimed (negative pid: not counted while zeroed), then published. */
            memset(s->used, 0, sizeof(s->used));
            __atomic_store_n(&s->pid, me, __ATOMIC_SEQ_CST);
            own = s;
        }
    }
    if (!own) {
        fprintf(stderr, "zesim: bad configuration: shared_state=%s: all %d slots are in use\n",
                path, SHARED_SLOTS);
        munmap(m, sizeof(shared_file_t));
        shared = NULL;
        return -1;
    }
    return 0;
}

static void add(uint64_t *counter, uint64_t n, int sign)
{
    if (sign > 0)
        __atomic_add_fetch(counter, n, __ATOMIC_SEQ_CST);
    else
        __atomic_sub_fetch(counter, n, __ATOMIC_SEQ_CST);
}

void sim_shared_charge(uint32_t device, int sub, uint64_t size, int sign)
{
    if (!own || device >= SIM_MAX_DEVICES)
        return;
    add(&own->used[device][0], size, sign);
    if (sub >= 0) {
        add(&own->used[device][1 + sub], size, sign);
        return;
    }
    for (uint32_t k = 0; k < sim_cfg.subdevices; k++)
        add(&own->used[device][1 + k], sim_root_part(size, k), sign);
}

int sim_shared_used(uint32_t device, int sub, uint64_t *out)
{
    if (!shared || device >= SIM_MAX_DEVICES)
        return 0;
    uint64_t total = 0;
    for (int i = 0; i < SHARED_SLOTS; i++) {
        shared_slot_t *s = &shared->slot[i];
        if (alive(__atomic_load_n(&s->pid, __ATOMIC_SEQ_CST)))
            total += __atomic_load_n(&s->used[device][sub < 0 ? 0 : 1 + sub], __ATOMIC_SEQ_CST);
    }
    *out = total;
    return 1;
}
