"""The simulator's mirror kinds: ``mirror_kind=anon`` mirrors live in a keeper process.

An anon mirror is private anonymous memory of a keeper process outside the
caller's process tree, so it shows system-wide as a neighbour's memory would
and in no component signal (Shmem) nor in the caller's RSS, as xe's TTM pages
do (tests/simdriver/README.md, "The host mirror"). Facts are judged per
process where possible (the keeper's own page counts, the caller's VmRSS and
memfds), which no other process on the machine moves; the one system-wide
question (Shmem stays, the memory the system can hand out falls) uses 512 MiB
and tolerant bounds, best of a few tries. The numbers come from the
simulator, not from hardware.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.simdriver import zeraw
from tests.support import sim

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")

# Run in the child before the test's code: the raw harness, the simulator's ground
# truth and readers of another process's memory as the kernel counts it.
PRELUDE = """
import json, os, signal, sys, time
from tests.simdriver import zeraw as zr
from tests.support.sim import SimControl
ze = zr.Ze()
sim = SimControl.from_env()
devs = ze.devices()
PAGE = os.sysconf("SC_PAGE_SIZE")

def out(**kw):
    print("RESULT " + json.dumps(kw), flush=True)

def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)

def anon_kib(pid):
    # Exact: smaps_rollup walks the page tables (RssAnon is a per-CPU batched counter).
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    raise KeyError("Anonymous")

def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])

def ancestors(pid):
    chain = []
    while pid > 1:
        pid = ppid(pid)
        chain.append(pid)
    return chain

def keeper_fds(pid):
    d = f"/proc/{pid}/fd"
    return sorted((fd, os.readlink(os.path.join(d, fd))) for fd in os.listdir(d))

def expected(size, ratio):
    return -(-int(size * ratio) // PAGE) * PAGE
"""


def env(**config: object) -> dict[str, str]:
    """Return a simulator environment: two devices, peer-resident anon mirrors unless `config` says otherwise."""
    settings: dict[str, object] = {"devices": 2, "mirror": "peer-resident", "mirror_kind": "anon"}
    settings.update(config)
    return sim.sim_env(**settings)


def run(code: str, **config: object) -> dict[str, Any]:
    """Run PRELUDE plus `code` in a fresh interpreter under env(**config); return what it passed to out()."""
    return sim.run_result(PRELUDE + textwrap.dedent(code), env(**config), 120.0)


def popen(code: str, **config: object) -> subprocess.Popen[str]:
    """Start PRELUDE plus `code` under env(**config) with its stdout and stderr on pipes."""
    e = env(**config)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(sim.REPO_ROOT), e.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def gone(pid: int) -> bool:
    """Return whether process `pid` has exited (a zombie holds no memory and counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_gone(pid: int, timeout: float) -> float | None:
    """Return the seconds until `pid` is gone, or None if it is still running after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if gone(pid):
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def first_result(line: str) -> dict[str, Any]:
    assert line.startswith("RESULT "), line
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    return result


# ------------------------------------------------------- where the pages are

HELD_BY_KEEPER = """
size, ratio = {size}, {ratio}
want = expected(size, ratio) // 1024
# Memory of the caller's own: a keeper that were a plain fork would carry it.
ballast = bytearray(b"x" * (64 << 20))
# Descriptors a keeper must not hold: an inheritable pipe and a memfd.
rpipe, wpipe = os.pipe()
os.set_inheritable(wpipe, True)
mfd = os.memfd_create("not-the-keepers", 0)
ctx = ze.context()
d = ze.alloc_device(ctx, devs[0], size)
ze.make_resident(ctx, devs[0], d, size)  # the owner itself: no mirror, no keeper
before = dict(keeper=sim.mirror_keeper_pid(), bytes=sim.mirror_bytes())
rss0 = zr.rss_kib()
ze.make_resident(ctx, devs[1], d, size)
k = sim.mirror_keeper_pid()
held = dict(bytes=sim.mirror_bytes(), anon=anon_kib(k), rss_anon=status_kib(k, "RssAnon"),
            caller_rss=zr.rss_kib() - rss0, caller_memfd=zr.memfd_kib())
ze.evict(ctx, devs[1], d, size)
base = dict(bytes=sim.mirror_bytes(), anon=anon_kib(k), rss_anon=status_kib(k, "RssAnon"))
ze.make_resident(ctx, devs[1], d, size)
again = dict(bytes=sim.mirror_bytes(), anon=anon_kib(k), keeper=sim.mirror_keeper_pid())
out(want=want, before=before, held=held, base=base, again=again, keeper=k, me=os.getpid(),
    ancestors=ancestors(k), sid=[os.getsid(k), os.getsid(0)], fds=keeper_fds(k),
    comm=open(f"/proc/{{k}}/comm").read().strip())
"""


@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_anon_mirror_is_the_keepers_anonymous_memory_outside_the_callers_tree(
    ratio: float,
) -> None:
    size = 96 * MIB + 3 * PAGE + 1  # not a whole number of pages, even halved
    r = run(HELD_BY_KEEPER.format(size=size, ratio=ratio), mirror_ratio=ratio)
    want = r["want"]
    assert want * 1024 == -(-int(size * ratio) // PAGE) * PAGE
    assert r["before"] == {"keeper": 0, "bytes": 0}  # no anon mirror yet, no keeper
    held, base, again = r["held"], r["base"], r["again"]
    assert held["bytes"] == want * 1024 and base["bytes"] == 0 and again["bytes"] == want * 1024
    # The keeper's anonymous pages are the mirror, to the page (the rest is its own
    # few pages: a fresh process, not a copy of the caller and its 64 MiB).
    assert held["anon"] - base["anon"] == want
    assert again["anon"] - base["anon"] == want
    assert base["anon"] < 2 * 1024
    # RssAnon says the same, within its per-CPU counter batching (a few hundred KiB
    # per CPU the keeper ran on).
    assert abs(held["rss_anon"] - base["rss_anon"] - want) <= 4 * 1024
    assert again["keeper"] == r["keeper"]  # one keeper for the process's mirrors
    # Not the caller's: neither its RSS nor a memfd of its own.
    assert held["caller_rss"] < 4 * 1024
    assert held["caller_memfd"] == 0
    # Outside the caller's tree and session, holding nothing of the caller's but its socket.
    assert r["me"] not in r["ancestors"]
    assert r["sid"][0] != r["sid"][1]
    assert len(r["fds"]) == 1 and r["fds"][0][1].startswith("socket:"), r["fds"]
    assert r["comm"] == "zesim-keeper"


def test_anon_mirror_shows_system_wide_but_not_in_shmem() -> None:
    # The only system-wide question: large sizes and tolerant bounds, best of a few tries,
    # since other processes move these figures both ways.
    size = 512 * MIB
    r = run(
        """
        size = 512 << 20
        ctx = ze.context()
        tries = []
        for _ in range(3):
            d = ze.alloc_device(ctx, devs[0], size)
            s0 = zr.quiet_kib(lambda: zr.meminfo_kib("Shmem"), rising_noise=True)
            a0 = zr.quiet_kib(zr.available_kib, rising_noise=False)
            c0 = zr.meminfo_kib("Committed_AS")
            n0 = zr.quiet_kib(lambda: zr.meminfo_kib("AnonPages"), rising_noise=True)
            ze.make_resident(ctx, devs[1], d, size)
            s1 = zr.quiet_kib(lambda: zr.meminfo_kib("Shmem"), rising_noise=True)
            a1 = zr.quiet_kib(zr.available_kib, rising_noise=False)
            c1 = zr.meminfo_kib("Committed_AS")
            n1 = zr.quiet_kib(lambda: zr.meminfo_kib("AnonPages"), rising_noise=False)
            tries.append(dict(shmem=s1 - s0, available=a0 - a1, committed=c1 - c0, anon=n1 - n0))
            ze.free(ctx, d)
        out(tries=tries, left=sim.mirror_bytes())
        """
    )
    kib = size // 1024

    def shows(t: dict[str, int]) -> bool:
        rose = min(t["available"], t["committed"], t["anon"])
        return t["shmem"] < kib // 4 and rose > kib // 2

    assert any(shows(t) for t in r["tries"]), r["tries"]
    assert r["left"] == 0


# ------------------------------------------------------------- releasing


def test_free_and_evict_release_the_keepers_pages() -> None:
    size = 64 * MIB
    r = run(
        f"""
        size = {size}
        ctx = ze.context()
        a = ze.alloc_device(ctx, devs[0], size)
        b = ze.alloc_device(ctx, devs[1], size)
        ze.make_resident(ctx, devs[1], a, size)
        k = sim.mirror_keeper_pid()
        steps = [("one", anon_kib(k), sim.mirror_bytes())]
        ze.make_resident(ctx, devs[0], b, size)
        steps.append(("two", anon_kib(k), sim.mirror_bytes()))
        ze.evict(ctx, devs[0], b, size)
        steps.append(("evicted", anon_kib(k), sim.mirror_bytes()))
        ze.free(ctx, a)
        steps.append(("freed", anon_kib(k), sim.mirror_bytes()))
        ze.free(ctx, b)
        steps.append(("both", anon_kib(k), sim.mirror_bytes()))
        other = ze.context()
        c = ze.alloc_device(other, devs[0], size)
        ze.make_resident(other, devs[1], c, size)
        steps.append(("other", anon_kib(k), sim.mirror_bytes()))
        ze.check("zeContextDestroy", ze.lib.zeContextDestroy(other))
        steps.append(("destroyed", anon_kib(k), sim.mirror_bytes()))
        out(steps=steps, keeper=sim.mirror_keeper_pid() == k)
        """
    )
    kib = size // 1024
    names = [s[0] for s in r["steps"]]
    anon = {s[0]: s[1] for s in r["steps"]}
    held = {s[0]: s[2] for s in r["steps"]}
    assert names == ["one", "two", "evicted", "freed", "both", "other", "destroyed"]
    assert held == {
        "one": size,
        "two": 2 * size,
        "evicted": size,
        "freed": 0,
        "both": 0,
        "other": size,
        "destroyed": 0,
    }
    base = anon["freed"]
    assert anon["both"] == base  # freeing an allocation whose mirror was evicted drops nothing
    assert anon["one"] - base == kib
    assert anon["two"] - base == 2 * kib
    assert anon["evicted"] - base == kib
    assert anon["other"] - base == kib
    assert anon["destroyed"] == base  # destroying a context frees its allocations' mirrors
    assert r["keeper"]  # the keeper stays for the process's next mirror


def test_mirror_all_mirrors_at_allocation_and_release_0_keeps_until_exit() -> None:
    size = 64 * MIB
    proc = popen(
        f"""
        size = {size}
        ctx = ze.context()
        steps = []
        for _ in range(3):
            d = ze.alloc_device(ctx, devs[0], size)
            k = sim.mirror_keeper_pid()
            steps.append(anon_kib(k))
            ze.free(ctx, d)
            steps.append(anon_kib(k))
        out(keeper=k, steps=steps, held=sim.mirror_bytes(), used=sim.device_used(0))
        time.sleep(1)
        """,
        mirror="all",
        mirror_release=0,
    )
    try:
        assert proc.stdout is not None
        r = first_result(proc.stdout.readline())
        k = r["keeper"]
        held_while_owner_lives = not gone(k)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    kib = size // 1024
    steps = r["steps"]
    # Each allocation took its mirror at once, and freeing it left the pages in the keeper.
    assert kib <= steps[0] < kib + 2 * 1024
    assert [b - a for a, b in itertools.pairwise(steps)] == [0, kib, 0, kib, 0]
    assert r["held"] == 3 * size and r["used"] == 0
    assert held_while_owner_lives
    assert proc.returncode == 0
    assert wait_gone(k, 2.0) is not None  # kept until the owner went, not longer


def test_threads_share_one_keeper_and_every_mirror_is_released() -> None:
    r = run(
        """
        import threading
        ctx = ze.context()
        seen, errors = set(), []
        def work():
            try:
                for _ in range(20):
                    d = ze.alloc_device(ctx, devs[0], 1 << 20)  # mirror=all: mirrored here
                    seen.add(sim.mirror_keeper_pid())
                    ze.free(ctx, d)
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        k = sim.mirror_keeper_pid()
        out(seen=sorted(seen), keeper=k, errors=errors, held=sim.mirror_bytes(), anon=anon_kib(k))
        """,
        mirror="all",
    )
    assert r["errors"] == []
    assert r["seen"] == [r["keeper"]] and r["keeper"] > 0
    assert r["held"] == 0 and r["anon"] < 2 * 1024


# -------------------------------------------------------- the keeper's life


@pytest.mark.parametrize("end", ["exit", "sigkill"])
def test_keeper_exits_soon_after_its_owner(end: str) -> None:
    proc = popen(
        f"""
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], 32 << 20)
        ze.make_resident(ctx, devs[1], d, 32 << 20)
        out(keeper=sim.mirror_keeper_pid())
        time.sleep({0.5 if end == "exit" else 60})
        """,
    )
    try:
        assert proc.stdout is not None
        k = first_result(proc.stdout.readline())["keeper"]
        assert k > 0 and not gone(k)
        if end == "sigkill":
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == (0 if end == "exit" else -signal.SIGKILL)
    assert wait_gone(k, 2.0) is not None


def test_keeper_ignores_terminal_signals_until_its_owner_frees() -> None:
    size = 32 * MIB
    r = run(
        f"""
        size = {size}
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], size)
        ze.make_resident(ctx, devs[1], d, size)
        k = sim.mirror_keeper_pid()
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGQUIT):
            os.kill(k, sig)
        time.sleep(0.2)
        with open(f"/proc/{{k}}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        held = anon_kib(k)
        ze.evict(ctx, devs[1], d, size)
        out(state=state, held=held, left=anon_kib(k), keeper=sim.mirror_keeper_pid() == k)
        """
    )
    assert r["state"] in ("S", "R"), r  # neither stopped nor ended
    assert r["held"] - r["left"] == size // 1024
    assert r["keeper"]


def test_parent_reading_the_owners_output_sees_eof_while_the_keeper_lives() -> None:
    # The owner closes its stdout and stderr and lives on: if the keeper held a copy
    # of either pipe, the reader would see no EOF until the owner and keeper ended.
    proc = popen(
        """
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], 16 << 20)
        ze.make_resident(ctx, devs[1], d, 16 << 20)
        out(keeper=sim.mirror_keeper_pid())
        os.close(1)
        os.close(2)
        time.sleep(8)
        os._exit(0)
        """,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        k = first_result(proc.stdout.readline())["keeper"]
        start = time.monotonic()
        rest = proc.stdout.read() + proc.stderr.read()  # EOF only once no writer is left
        waited = time.monotonic() - start
        owner_alive, keeper_alive = proc.poll() is None, not gone(k)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert rest == ""
    assert owner_alive and keeper_alive and waited < 5.0


def test_subprocess_run_with_captured_output_returns_at_the_owners_exit() -> None:
    start = time.monotonic()
    proc = sim.run_python_env(
        PRELUDE
        + textwrap.dedent(
            """
            ctx = ze.context()
            d = ze.alloc_device(ctx, devs[0], 16 << 20)
            ze.make_resident(ctx, devs[1], d, 16 << 20)
            out(keeper=sim.mirror_keeper_pid())
            """
        ),
        env(),
        60.0,
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 30.0
    k = first_result(proc.stdout.splitlines()[-1])["keeper"]
    assert wait_gone(k, 2.0) is not None


def test_forked_child_leaves_its_parents_keeper_alone() -> None:
    # Sharing a driver with a forked child is unsupported; the child must still never
    # release the parent's pages or talk on the parent's socket.
    size = 32 * MIB
    r = run(
        f"""
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        size = {size}
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], size)
        ze.make_resident(ctx, devs[1], d, size)
        k = sim.mirror_keeper_pid()
        held = anon_kib(k)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            ze.free(ctx, d)  # the parent's mirror: not the child's to drop
            e = ze.alloc_device(ctx, devs[0], size)
            ze.make_resident(ctx, devs[1], e, size)  # the child's own keeper
            mine = sim.mirror_keeper_pid()
            os.write(w, json.dumps([mine, anon_kib(mine)]).encode())
            os._exit(0)
        os.close(w)
        child_keeper, child_anon = json.loads(os.read(r, 4096))
        os.waitpid(pid, 0)
        after = anon_kib(k)
        out(keeper=k, held=held, after=after, child_keeper=child_keeper, child_anon=child_anon,
            mine=sim.mirror_keeper_pid(), bytes=sim.mirror_bytes())
        """
    )
    kib = size // 1024
    assert r["child_keeper"] not in (0, r["keeper"])
    assert r["child_anon"] >= kib
    assert r["after"] == r["held"]  # the parent's mirror is still there
    assert r["mine"] == r["keeper"] and r["bytes"] == size
    assert wait_gone(r["child_keeper"], 2.0) is not None


def test_a_forked_child_living_on_does_not_keep_the_keeper_alive() -> None:
    # The child inherits the socket but closes its copy at once: the keeper sees its
    # owner go although a process that had the socket still lives.
    proc = popen(
        """
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], 16 << 20)
        ze.make_resident(ctx, devs[1], d, 16 << 20)
        k = sim.mirror_keeper_pid()
        pid = os.fork()
        if pid == 0:
            os.close(1)
            os.close(2)
            time.sleep(30)
            os._exit(0)
        out(keeper=k, child=pid)
        """,
    )
    child = 0
    try:
        assert proc.stdout is not None
        r = first_result(proc.stdout.readline())
        child = r["child"]
        proc.communicate(timeout=60)
        child_alive = not gone(child)
        waited = wait_gone(r["keeper"], 2.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        if child:
            os.kill(child, signal.SIGKILL)
    assert proc.returncode == 0
    assert child_alive
    assert waited is not None


# ---------------------------------------------------- kinds and configuration


def test_memfd_kind_is_the_default_and_unchanged() -> None:
    size = 32 * MIB
    code = f"""
        size = {size}
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], size)
        kib0 = zr.memfd_kib()
        ze.make_resident(ctx, devs[1], d, size)
        out(memfd=zr.memfd_kib() - kib0, keeper=sim.mirror_keeper_pid(), held=sim.mirror_bytes())
        """
    for config in ({"mirror_kind": "memfd"}, {}):
        e = sim.sim_env(devices=2, mirror="peer-resident", **config)
        assert ("ZESIM_MIRROR_KIND" in e) == bool(config)
        proc = sim.run_python_env(PRELUDE + textwrap.dedent(code), e, 60.0)
        assert proc.returncode == 0, proc.stderr
        r = first_result(proc.stdout.splitlines()[-1])
        assert r == {"memfd": size // 1024, "keeper": 0, "held": size}, config


def test_mirror_kind_changes_at_run_time_for_new_mirrors_only() -> None:
    size = 32 * MIB
    r = run(
        f"""
        size = {size}
        ctx = ze.context()
        a = ze.alloc_device(ctx, devs[0], size)  # mirror=all: mirrored now, as a memfd
        sim.set("mirror_kind", "anon")
        b = ze.alloc_device(ctx, devs[0], size)  # an anon mirror
        x = ze.alloc_device(ctx, devs[0], size, export=True)  # exported: a memfd all the same
        k = sim.mirror_keeper_pid()
        props, dev, fd = ze.alloc_properties(ctx, x, export_fd=True)
        blocks = os.fstat(fd).st_blocks * 512
        os.close(fd)
        both = dict(memfd=zr.memfd_kib(), anon=anon_kib(k), bytes=sim.mirror_bytes())
        ze.free(ctx, a)
        ze.free(ctx, x)
        one = dict(memfd=zr.memfd_kib(), anon=anon_kib(k), bytes=sim.mirror_bytes())
        ze.free(ctx, b)
        none = dict(memfd=zr.memfd_kib(), anon=anon_kib(k), bytes=sim.mirror_bytes())
        out(both=both, one=one, none=none, blocks=blocks)
        """,
        mirror="all",
        mirror_kind="memfd",
    )
    kib = size // 1024
    both, one, none = r["both"], r["one"], r["none"]
    assert both["memfd"] == 2 * kib and one["memfd"] == 0 and none["memfd"] == 0
    assert both["bytes"] == 3 * size and one["bytes"] == size and none["bytes"] == 0
    assert both["anon"] == one["anon"] and one["anon"] - none["anon"] == kib
    assert r["blocks"] == size


def test_mirror_kind_is_read_from_a_config_file_and_the_environment_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "sim.conf"
    cfg.write_text("mirror = all\nmirror_kind = anon\n")
    code = """
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], 8 << 20)
        out(keeper=sim.mirror_keeper_pid(), memfd=zr.memfd_kib(), held=sim.mirror_bytes())
        """
    results = []
    for override in ({}, {"mirror_kind": "memfd"}):
        e = sim.sim_env(config=str(cfg), **override)
        proc = sim.run_python_env(PRELUDE + textwrap.dedent(code), e, 60.0)
        assert proc.returncode == 0, proc.stderr
        results.append(first_result(proc.stdout.splitlines()[-1]))
    assert results[0]["keeper"] > 0 and results[0]["memfd"] == 0
    assert results[1] == {"keeper": 0, "memfd": 8 * 1024, "held": 8 * MIB}
    assert results[0]["held"] == 8 * MIB


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"mirror_kind": "foo"}, "mirror_kind=foo: expected memfd or anon"),
        ({"mirror_kind": ""}, "mirror_kind=: expected memfd or anon"),
        ({"mirror": "dmabuf", "mirror_kind": "anon"}, "mirror=dmabuf requires mirror_kind=memfd"),
    ],
)
def test_bad_mirror_kind_fails_zeinit_with_one_line(config: dict[str, str], needle: str) -> None:
    code = "import ctypes\nprint(hex(ctypes.CDLL('libze_loader.so.1').zeInit(0) & 0xffffffff))\n"
    proc = sim.run_python_env(code, sim.sim_env(**config), 60.0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == hex(zeraw.INVALID_ARGUMENT)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zesim: bad configuration:"), proc.stderr
    assert needle in lines[0]


def test_bad_mirror_kind_is_refused_at_run_time() -> None:
    r = run(
        """
        refused = []
        for key, value in [("mirror_kind", "foo"), ("mirror_kind", "anon"), ("mirror", "dmabuf")]:
            if key == "mirror":
                sim.set("mirror", "all")
                sim.set("mirror_kind", "anon")
            try:
                sim.set(key, value)
            except ValueError:
                refused.append(f"{key}={value}")
        out(refused=refused)
        """,
        mirror="dmabuf",
        mirror_kind="memfd",
    )
    # mirror_kind=anon is refused while mirror=dmabuf, mirror=dmabuf once the kind is anon.
    assert r["refused"] == ["mirror_kind=foo", "mirror_kind=anon", "mirror=dmabuf"], r
    assert r["_stderr"].count("zesim: zesim_set:") == 3
