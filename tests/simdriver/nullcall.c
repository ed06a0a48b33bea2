/*
 * Opt-in guard for calls through an empty DDI slot (see README, "The SYCL
 * runtime on the simulator").
 *
 * The SYCL runtime's Level Zero adapter links a static copy of the loader's
 * API layer that fetches its dispatch tables from loader 1.8. Loader 1.8
 * fills only the API 1.4 slots, so functions added after 1.4 (for example
 * zeDeviceGetRootDevice) have NULL slots. That layer returns
 * ZE_RESULT_ERROR_UNSUPPORTED_FEATURE for the first such call but caches the
 * NULL pointer and jumps to it on every later call. This guard turns exactly
 * that fault (an instruction fetch at address 0) into a return of
 * ZE_RESULT_ERROR_UNSUPPORTED_FEATURE to the caller, which is what the first
 * call already returned. Any other SIGSEGV is handed back to the previous
 * disposition. Nothing installs it but an explicit zesim_guard_null_ddi_calls().
 */
#include "zesim.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>

static struct sigaction sim_prev_segv;
static atomic_int sim_guard_installed;
static atomic_uint_fast64_t sim_null_calls;

#if defined(__x86_64__)
static void sim_segv(int sig, siginfo_t *info, void *ctx)
{
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    if (g[REG_RIP] == 0 && info->si_addr == NULL) {
        /* A call or tail jump to NULL: the return address is on top of the stack. */
        g[REG_RIP] = *(greg_t *)g[REG_RSP];
        g[REG_RSP] += 8;
        g[REG_RAX] = ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
        atomic_fetch_add(&sim_null_calls, 1);
        return;
    }
    /* Not ours: the faulting instruction runs again under the previous disposition. */
    (void)sig;
    sigaction(SIGSEGV, &sim_prev_segv, NULL);
}
#endif

SIM_EXPORT int zesim_guard_null_ddi_calls(void)
{
#if defined(__x86_64__)
    int expected = 0;
    if (!atomic_compare_exchange_strong(&sim_guard_installed, &expected, 1))
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = sim_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &sim_prev_segv) != 0) {
        atomic_store(&sim_guard_installed, 0);
        return -1;
    }
    return 0;
#else
    return -1;
#endif
}

SIM_EXPORT uint64_t zesim_null_ddi_calls(void)
{
    return atomic_load(&sim_null_calls);
}
