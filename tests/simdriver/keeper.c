/*
 * The mirror keeper: a process outside the caller's process tree that holds
 * the pages of mirror_kind=anon mirrors as its own private anonymous memory.
 *
 * On real hardware with the xe kernel driver a mirror is TTM pool pages: they
 * show in no /proc/meminfo component (no Shmem), only as a fall of MemFree and
 * MemAvailable. A memfd mirror always shows in Shmem; an anon mirror shows
 * system-wide exactly as a neighbouring process's anonymous memory does
 * (MemAvailable, MemFree, AnonPages, Committed_AS), and never in Shmem nor in
 * the RSS of the caller or of its descendants.
 *
 * Starting it (once per process, at the first anon mirror):
 *   caller        socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC); posix_spawn of
 *                 the dynamic loader running this very library (its ELF entry
 *                 point is _start below) with "--zesim-spawn", in a new session,
 *                 every signal at its default, the socket on fd 3; waitpid()s it
 *   intermediate  closes every fd but 3, posix_spawns the keeper ("--zesim-keep")
 *                 and exits at once, so the keeper is reparented away from the
 *                 caller's tree (to init or the nearest subreaper)
 *   keeper        closes every fd but 3, ignores terminal signals, writes a hello
 *                 with its pid, then serves requests one at a time until EOF.
 * posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK) + execve, no atfork handlers)
 * is safe in a multi-threaded caller, and exec gives the keeper a fresh address
 * space: a plain fork would leave it holding copy-on-write copies of the
 * caller's memory (every page the caller later writes would cost a second
 * page), which would spoil the very memory figures the anon kind exists for.
 *
 * Protocol on the stream socket: fixed-size binary messages, each written with
 * a single call. Requests: HOLD (id, bytes): map private anonymous memory and
 * write one byte per page so that every page is committed; DROP (slot, id):
 * unmap it. Every request gets an ack, and the caller (with sim_lock held)
 * waits for it: when the API call that made or released the mirror returns,
 * the pages exist or are gone. EOF (the caller exited or was killed; the
 * kernel closes its end) ends the keeper, which frees everything. A forked
 * child of the caller closes its copy of the socket at once (a pthread_atfork
 * handler; as a fallback, at its first keeper request, by pid), so the two
 * processes never interleave on it and a long-lived child does not keep the
 * keeper alive; the child starts its own keeper at its first anon mirror and
 * leaves the parent's mirrors alone. Sharing one driver between two processes
 * is not supported, as with real drivers.
 */
#include "zesim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEEPER_FD 3
#define KEEPER_SLOTS 65536u
#define KEEPER_SPAWN_ARG "--zesim-spawn"
#define KEEPER_KEEP_ARG "--zesim-keep"

enum keeper_op { KEEPER_HOLD = 1, KEEPER_DROP = 2 };

typedef struct keeper_req {
    uint32_t op;
    uint32_t slot; /* DROP: the slot HOLD answered */
    uint64_t id;   /* the allocation's id, checked by DROP */
    uint64_t bytes;
} keeper_req_t;

typedef struct keeper_ack {
    int32_t status; /* 0, or an errno value */
    uint32_t pad;
    uint64_t value; /* hello: the keeper's pid; HOLD: the slot */
} keeper_ack_t;

/* ------------------------------------------------------------ caller side */

static int keeper_sock = -1;
static pid_t keeper_pid;   /* 0: none */
static pid_t keeper_owner; /* the process that started it */
static uint32_t keeper_gen = 1; /* changes whenever a keeper ends, so stale mirrors never match */

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 0, or -1 on error or EOF. */
static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The program interpreter (dynamic loader) of the main program, from its PT_INTERP. */
static int find_interp(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    char *out = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_INTERP)
            continue;
        snprintf(out, PATH_MAX, "%s", (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
        break;
    }
    return 1; /* the first object is the main program: stop there */
}

/* Else the loaded object whose base is AT_BASE, the interpreter the kernel mapped. */
static int find_at_base(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    char *out = data;
    if (info->dlpi_addr == (ElfW(Addr))getauxval(AT_BASE) && info->dlpi_name && info->dlpi_name[0]) {
        snprintf(out, PATH_MAX, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void keeper_forget(void)
{
    if (keeper_sock >= 0)
        close(keeper_sock);
    keeper_sock = -1;
    keeper_pid = 0;
    keeper_owner = 0;
    keeper_gen++;
}

/* The keeper stopped answering: its pages are gone with it. */
static void keeper_lost(const char *why)
{
    uint32_t gen = keeper_gen;
    fprintf(stderr, "zesim: mirror keeper %d lost (%s): its mirrors are gone\n", (int)keeper_pid, why);
    keeper_forget();
    sim_anon_mirrors_lost(gen);
}

/* In a forked child (glibc runs this in the child only; close() is async-signal-safe). */
static void keeper_atfork_child(void)
{
    keeper_forget();
}

static int keeper_start(void)
{
    static char lib[PATH_MAX], interp[PATH_MAX];
    static int atfork;
    if (!atfork && pthread_atfork(NULL, NULL, keeper_atfork_child) == 0)
        atfork = 1;
    Dl_info info;
    const char *why = NULL;
    if (!dladdr((void *)&keeper_start, &info) || !info.dli_fname || !realpath(info.dli_fname, lib)) {
        why = "cannot find the simulator's own path";
        goto fail;
    }
    interp[0] = '\0';
    dl_iterate_phdr(find_interp, interp);
    if (!interp[0])
        dl_iterate_phdr(find_at_base, interp);
    if (!interp[0]) {
        why = "cannot find the dynamic loader";
        goto fail;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        why = strerror(errno);
        goto fail;
    }
    /* Above KEEPER_FD, so that the dup2 to it always clears FD_CLOEXEC. */
    int theirs = fcntl(sv[1], F_DUPFD_CLOEXEC, KEEPER_FD + 1);
    close(sv[1]);
    if (theirs < 0) {
        close(sv[0]);
        why = strerror(errno);
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, theirs, KEEPER_FD);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    char *argv[] = {interp, lib, KEEPER_SPAWN_ARG, interp, NULL};
    char *envp[] = {NULL};
    pid_t mid;
    int rc = posix_spawn(&mid, interp, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(theirs);
    if (rc) {
        close(sv[0]);
        why = strerror(rc);
        goto fail;
    }
    int status = 0;
    while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
        ;
    /* ECHILD (reaped elsewhere, or SIGCHLD ignored) is fine: the hello decides. */
    keeper_ack_t hello;
    if (read_full(sv[0], &hello, sizeof(hello)) || hello.status || !hello.value) {
        close(sv[0]);
        why = "it did not start";
        goto fail;
    }
    keeper_sock = sv[0];
    keeper_pid = (pid_t)hello.value;
    keeper_owner = getpid();
    return 0;
fail:
    fprintf(stderr, "zesim: mirror keeper: %s\n", why);
    return -1;
}

/* A forked child never uses its parent's keeper: the parent's mirrors stay the parent's. */
static void keeper_check_owner(void)
{
    if (keeper_sock >= 0 && keeper_owner != getpid())
        keeper_forget();
}

ze_result_t sim_keeper_hold(uint64_t id, uint64_t bytes, uint32_t *gen, uint32_t *slot)
{
    keeper_check_owner();
    if (keeper_sock < 0 && keeper_start())
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    keeper_req_t q = {.op = KEEPER_HOLD, .id = id, .bytes = bytes};
    keeper_ack_t a;
    if (write_full(keeper_sock, &q, sizeof(q)) || read_full(keeper_sock, &a, sizeof(a))) {
        keeper_lost("no answer to a hold");
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (a.status)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    *gen = keeper_gen;
    *slot = (uint32_t)a.value;
    return ZE_RESULT_SUCCESS;
}

void sim_keeper_drop(uint32_t gen, uint32_t slot, uint64_t id)
{
    keeper_check_owner();
    if (keeper_sock < 0 || gen != keeper_gen)
        return; /* held by a keeper that is gone, or by the parent's */
    keeper_req_t q = {.op = KEEPER_DROP, .slot = slot, .id = id};
    keeper_ack_t a;
    if (write_full(keeper_sock, &q, sizeof(q)) || read_full(keeper_sock, &a, sizeof(a)))
        keeper_lost("no answer to a drop");
    else if (a.status)
        fprintf(stderr, "zesim: mirror keeper: drop of slot %u refused (%s)\n", slot, strerror(a.status));
}

SIM_EXPORT int32_t zesim_mirror_keeper_pid(void)
{
    pthread_mutex_lock(&sim_lock);
    int32_t pid = keeper_sock >= 0 && keeper_owner == getpid() ? (int32_t)keeper_pid : 0;
    pthread_mutex_unlock(&sim_lock);
    return pid;
}

/* ------------------------------------------------------------ keeper side */

/*
 * Runs in a fresh process (the library executed by the dynamic loader), so
 * libc is usable; nothing here allocates with malloc.
 */

static void close_fds_except(int keep)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 0u, (unsigned)keep - 1, 0u) == 0 &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) == 0)
        return;
#endif
    struct rlimit rl;
    long limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                     ? (long)rl.rlim_cur
                     : 65536;
    for (long fd = 0; fd < limit; fd++)
        if (fd != keep)
            close((int)fd);
}

typedef struct keeper_slot {
    uint8_t *addr; /* NULL: free */
    uint64_t len;
    uint64_t id;   /* HOLD: the allocation id; free: the next free slot + 1 (0: none) */
} keeper_slot_t;

static int send_ack(int32_t status, uint64_t value)
{
    keeper_ack_t a = {.status = status, .value = value};
    return write_full(KEEPER_FD, &a, sizeof(a));
}

static __attribute__((noreturn)) void keeper_serve(void)
{
    close_fds_except(KEEPER_FD);
    if (chdir("/")) {
        /* keeps its starting directory busy; harmless */
    }
    prctl(PR_SET_NAME, "zesim-keeper", 0, 0, 0);
    /* In a session of its own it gets no terminal signals; ignore them anyway, so that it
     * lives until its owner frees or exits (EOF), never longer. */
    static const int ignored[] = {SIGINT, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        signal(ignored[i], SIG_IGN);
    size_t table_len = KEEPER_SLOTS * sizeof(keeper_slot_t);
    keeper_slot_t *table = mmap(NULL, table_len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) {
        send_ack(ENOMEM, 0);
        _exit(1);
    }
    madvise(table, table_len, MADV_NOHUGEPAGE); /* pages of the table only as used */
    uint32_t fresh = 0;   /* slots from here on were never used */
    uint32_t free_head = 0; /* freed slot + 1, 0: none */
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    if (send_ack(0, (uint64_t)getpid()))
        _exit(0);
    for (;;) {
        keeper_req_t q;
        if (read_full(KEEPER_FD, &q, sizeof(q)))
            _exit(0); /* EOF: the owner is gone; exiting frees every mirror */
        if (q.op == KEEPER_HOLD) {
            uint32_t slot;
            if (free_head)
                slot = free_head - 1;
            else if (fresh < KEEPER_SLOTS)
                slot = fresh;
            else {
                send_ack(ENOSPC, 0);
                continue;
            }
            uint8_t *p = q.bytes ? mmap(NULL, q.bytes, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                 : MAP_FAILED;
            if (p == MAP_FAILED) {
                send_ack(ENOMEM, 0);
                continue;
            }
            /* One written byte per page commits every page (a read would map the zero page). */
            for (uint64_t off = 0; off < q.bytes; off += ps)
                ((volatile uint8_t *)p)[off] = 1;
            if (free_head)
                free_head = (uint32_t)table[slot].id;
            else
                fresh++;
            table[slot] = (keeper_slot_t){.addr = p, .len = q.bytes, .id = q.id};
            send_ack(0, slot);
        } else if (q.op == KEEPER_DROP) {
            if (q.slot >= fresh || !table[q.slot].addr || table[q.slot].id != q.id) {
                send_ack(EINVAL, 0);
                continue;
            }
            munmap(table[q.slot].addr, table[q.slot].len);
            table[q.slot] = (keeper_slot_t){.addr = NULL, .len = 0, .id = free_head};
            free_head = q.slot + 1;
            send_ack(0, 0);
        } else {
            send_ack(EINVAL, 0);
        }
    }
}

/* The intermediate: start the keeper in this new session, then exit so it is reparented. */
static __attribute__((noreturn)) void keeper_spawn(char *lib, char *interp)
{
    close_fds_except(KEEPER_FD);
    char *argv[] = {interp, lib, KEEPER_KEEP_ARG, NULL};
    char *envp[] = {NULL};
    pid_t pid;
    _exit(posix_spawn(&pid, interp, NULL, NULL, argv, envp) ? 1 : 0);
}

/* Called from _start with the initial stack: argc, then argv (the library's path first). */
__attribute__((used, noreturn)) void sim_keeper_entry(long *sp)
{
    int argc = (int)sp[0];
    char **argv = (char **)(sp + 1);
    if (argc == 2 && !strcmp(argv[1], KEEPER_KEEP_ARG))
        keeper_serve();
    if (argc == 3 && !strcmp(argv[1], KEEPER_SPAWN_ARG))
        keeper_spawn(argv[0], argv[2]);
    static const char msg[] = "libze_sim.so is l0mem's simulated Level Zero driver, not a program\n";
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(2);
    _exit(2);
}

/*
 * The library's ELF entry point (the linker takes the _start symbol), reached only when the
 * dynamic loader runs the library as a program: the keeper and its intermediate.
 */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl _start\n"
        ".hidden _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "    xorl %ebp, %ebp\n"
        "    movq %rsp, %rdi\n"
        "    andq $-16, %rsp\n"
        "    call sim_keeper_entry\n"
        "    hlt\n"
        ".size _start, .-_start\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl _start\n"
        ".hidden _start\n"
        ".type _start, %function\n"
        "_start:\n"
        "    mov x29, #0\n"
        "    mov x30, #0\n"
        "    mov x0, sp\n"
        "    bl sim_keeper_entry\n"
        "    brk #0\n"
        ".size _start, .-_start\n");
#endif
