"""Process-tree sampling: real process trees, and DRM attribution on a fake /proc.

The fake trees mimic /proc/<pid>/{status,stat,cgroup,task/<tid>/children,
fd/<n>,fdinfo/<n>} with fdinfo samples recorded under tests/data/fdinfo/ in the
formats of the kernel's drm-usage-stats document (xe with KiB/MiB units and a
multi-tile device, i915 with the current and the legacy keys).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from l0mem.probe import ProbeAccessError, ProcessGone, TreeProber, process_tree
from l0mem.probe.signals import describe
from tests.support.users import as_other_user

DATA = Path(__file__).parent / "data" / "fdinfo"
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
XE, XE2, I915 = "drm.0000:03:00.0", "drm.0000:83:00.0", "drm.0000:4d:00.0"
CGROUP = "user.slice/job.scope"


class FakeProc:
    """A directory tree that looks like /proc to the probe."""

    def __init__(self, root: Path) -> None:
        self.proc = root / "proc"
        self.sys = root / "sys"
        self.proc.mkdir(parents=True)
        (self.proc / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
        cg = self.sys / "fs" / "cgroup" / CGROUP
        cg.mkdir(parents=True)
        (cg / "memory.current").write_text("123456789\n")
        (cg / "memory.stat").write_text("anon 1\ngpu_active 8192\ngpu_reclaim 0\n")

    def process(
        self, pid: int, ppid: int, children: tuple[int, ...] = (), *, rss_kb: int = 0, **kb: int
    ) -> Path:
        """Add process ``pid`` with its status, stat, cgroup and children files."""
        d = self.proc / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True)
        (d / "task" / str(pid) / "children").write_text("".join(f"{c} " for c in children))
        lines = [f"Name:\tp{pid}", "State:\tS (sleeping)", f"PPid:\t{ppid}"]
        lines += [f"VmRSS:\t{rss_kb} kB"] + [f"{k}:\t{v} kB" for k, v in kb.items()]
        (d / "status").write_text("\n".join(lines) + "\n")
        # a name with a space and a parenthesis, as comm may have
        (d / "stat").write_text(
            f"{pid} (a b) c) S {ppid} " + " ".join(["0"] * 17) + f" {pid}00 0\n"
        )
        (d / "cgroup").write_text(f"0::/{CGROUP}\n")
        (d / "fd").mkdir()
        (d / "fdinfo").mkdir()
        return d

    def fd(self, pid: int, fd: int, target: str, sample: str) -> None:
        """Give ``pid`` an fd ``fd`` linking to ``target`` whose fdinfo is ``sample``."""
        d = self.proc / str(pid)
        os.symlink(target, d / "fd" / str(fd))
        shutil.copyfile(DATA / sample, d / "fdinfo" / str(fd))

    def prober(self) -> TreeProber:
        return TreeProber(100, proc_root=str(self.proc), sys_root=str(self.sys), page_size=4096)


def drm_tree(root: Path) -> FakeProc:
    """100 -> (101 -> 103, 102); 104 listed as a child of 100 but already gone."""
    fake = FakeProc(root)
    fake.process(100, 1, (101, 102, 104), rss_kb=1000, RssAnon=600, VmPin=64, VmLck=8, VmSwap=512)
    fake.process(101, 100, (103,), rss_kb=200, RssAnon=100, VmPin=0, VmLck=4, VmSwap=32)
    fake.process(102, 100, rss_kb=30, RssAnon=10, VmPin=0, VmLck=0)
    fake.process(103, 101, rss_kb=4, RssAnon=4, VmPin=0, VmLck=0)
    fake.fd(100, 0, "/dev/pts/0", "pts.txt")
    fake.fd(100, 3, "/dev/dri/renderD128", "xe_03_client41.txt")
    fake.fd(100, 4, "/dev/dri/renderD128", "xe_03_client41.txt")  # dup of fd 3
    fake.fd(100, 5, "/dev/dri/renderD129", "xe_83_multitile_client7.txt")
    fake.fd(101, 3, "/dev/dri/renderD128", "xe_03_client41.txt")  # inherited from 100
    fake.fd(101, 6, "/dev/dri/card0", "xe_03_client42.txt")  # second client, same device
    fake.fd(102, 3, "/dev/dri/renderD130", "i915_4d_client19.txt")
    fake.fd(102, 4, "/dev/dri/renderD130", "i915_4d_legacy_client21.txt")
    fake.fd(103, 5, "/dev/dri/renderD129", "xe_83_multitile_client7.txt")  # inherited via 101
    # a DRM-looking fdinfo behind a link that is not a DRM device is not a DRM file
    fake.fd(103, 9, "/memfd:decoy (deleted)", "xe_03_client42.txt")
    return fake


def test_tree_order_is_parents_first(tmp_path):
    fake = drm_tree(tmp_path)
    assert process_tree(100, proc_root=str(fake.proc)) == (100, 101, 103, 102, 104)
    assert process_tree(101, proc_root=str(fake.proc)) == (101, 103)
    with pytest.raises(ProcessGone):
        process_tree(99, proc_root=str(fake.proc))


def test_without_children_files_the_parent_pids_are_scanned(tmp_path):
    fake = drm_tree(tmp_path)
    for pid in (100, 101, 102, 103):
        os.remove(fake.proc / str(pid) / "task" / str(pid) / "children")
    fake.process(200, 1)  # not ours
    fake.process(201, 102)
    (fake.proc / "self").mkdir()  # non-numeric entries are skipped
    assert process_tree(100, proc_root=str(fake.proc)) == (100, 101, 103, 102, 201)
    assert 201 in fake.prober().sample().pids


def test_drm_counted_once_per_client_and_attributed_to_first_holder(tmp_path):
    sample = drm_tree(tmp_path).prober().sample()
    v = sample.snapshot.values
    assert sample.pids == (100, 101, 103, 102)  # 104 was gone: skipped quietly
    assert not any(key.startswith("process.") for key in sample.snapshot.unavailable)
    # xe device 03: client 41 (three fds in two processes) once, plus client 42
    assert v[f"{XE}.gtt.total"] == 2048 * KiB + 1048576 * KiB
    assert v[f"{XE}.gtt.resident"] == 2048 * KiB + 1048576 * KiB
    assert v[f"{XE}.vram0.total"] == 1536 * MiB + 256 * MiB
    assert v[f"{XE}.vram0.resident"] == 1536 * MiB + 128 * MiB
    assert v[f"{XE}.vram0.shared"] == 64 * MiB
    assert v[f"{XE}.system.total"] == 12 * KiB
    # multi-tile xe device 83: client 7 held by 100 and inherited by 103, once
    assert v[f"{XE2}.vram0.total"] == 3072 * MiB
    assert v[f"{XE2}.vram1.total"] == 3072 * MiB
    assert v[f"{XE2}.vram1.resident"] == 2048 * MiB
    assert v[f"{XE2}.gtt.total"] == 8192 * KiB
    # i915: current keys of client 19 and legacy drm-memory-* (resident) of client 21
    assert v[f"{I915}.local0.total"] == 512 * MiB
    assert v[f"{I915}.local0.resident"] == 512 * MiB + 256 * MiB
    assert v[f"{I915}.system0.resident"] == 16384 * KiB + 4096 * KiB
    assert v[f"{I915}.system0.total"] == 20480 * KiB
    # no engine time or cycles turned into memory
    assert not any("cycles" in name or "engine" in name for name in v)

    by = sample.by_process
    assert by[100][f"{XE}.vram0.total"] == 1536 * MiB
    assert by[100][f"{XE2}.vram1.total"] == 3072 * MiB
    assert by[101][f"{XE}.vram0.total"] == 256 * MiB
    assert not any(name.startswith("drm.") for name in by[103])
    assert by[102][f"{I915}.local0.resident"] == 768 * MiB
    # nothing counts twice: the per-process parts add up to the totals exactly
    for name, total in v.items():
        if name.startswith(("drm.", "tree.")):
            assert sum(p.get(name, 0) for p in by.values()) == total, name


def test_tree_status_sums_include_pinned_and_locked(tmp_path):
    sample = drm_tree(tmp_path).prober().sample()
    v = sample.snapshot.values
    assert v["tree.VmRSS"] == (1000 + 200 + 30 + 4) * KiB
    assert v["tree.RssAnon"] == (600 + 100 + 10 + 4) * KiB
    assert v["tree.VmPin"] == 64 * KiB
    assert v["tree.VmLck"] == 12 * KiB
    assert v["tree.VmSwap"] == (512 + 32) * KiB  # swapped out: not in VmRSS
    assert "tree.RssFile" not in v and "not reported" in sample.snapshot.unavailable["tree.RssFile"]
    assert sample.by_process[101]["tree.VmLck"] == 4 * KiB
    assert v["cgroup.memory.current"] == 123456789
    assert v["cgroup.gpu_active"] == 8192
    assert v["meminfo.MemAvailable"] == 500 * KiB


def test_zombie_is_not_measured_and_an_ended_tree_is_gone(tmp_path):
    fake = drm_tree(tmp_path)
    prober = fake.prober()
    # a zombie has no memory lines left; its child (reparented in life) stays followed
    (fake.proc / "101" / "status").write_text("Name:\tp101\nState:\tZ (zombie)\nPPid:\t100\n")
    sample = prober.sample()
    assert 101 not in sample.pids and 103 in sample.pids
    assert sample.snapshot.values["tree.VmRSS"] == (1000 + 30 + 4) * KiB
    # a process whose leader thread exited shows Z but keeps its memory: measured
    status = fake.proc / "102" / "status"
    status.write_text(status.read_text().replace("S (sleeping)", "Z (zombie)"))
    assert 102 in prober.sample().pids
    for pid in (100, 101, 102, 103):
        shutil.rmtree(fake.proc / str(pid))
    with pytest.raises(ProcessGone):
        prober.sample()


def test_idle_single_threaded_process_is_not_read_again_except_its_drm(tmp_path):
    fake = drm_tree(tmp_path)
    for pid in (100, 101, 102, 103):
        status = fake.proc / str(pid) / "status"
        status.write_text(status.read_text() + "Threads:\t1\n")
        (fake.proc / str(pid) / "schedstat").write_text(f"{pid}000 0 5\n")
    prober = fake.prober()
    first = prober.sample().snapshot.values
    assert first["tree.VmRSS"] == (1000 + 200 + 30 + 4) * KiB
    # 101 was not scheduled: its status is not read again, its fdinfo is
    status = fake.proc / "101" / "status"
    status.write_text(status.read_text().replace("VmRSS:\t200 kB", "VmRSS:\t900 kB"))
    shutil.copyfile(DATA / "xe_03_client41.txt", fake.proc / "101" / "fdinfo" / "6")
    second = prober.sample()
    assert second.snapshot.values["tree.VmRSS"] == first["tree.VmRSS"]
    assert f"{XE}.vram0.total" not in second.by_process[101]  # 6 is now client 41, counted at 100
    assert second.snapshot.values[f"{XE}.vram0.total"] == 1536 * MiB
    # 101 ran: read afresh
    (fake.proc / "101" / "schedstat").write_text("101000 0 6\n")
    third = prober.sample().snapshot.values
    assert third["tree.VmRSS"] == (1000 + 900 + 30 + 4) * KiB
    # a kernel with sched_info off says "0 0 0": every process is read afresh
    status.write_text(status.read_text().replace("VmRSS:\t900 kB", "VmRSS:\t50 kB"))
    (fake.proc / "101" / "schedstat").write_text("0 0 0\n")
    assert prober.sample().snapshot.values["tree.VmRSS"] == (1000 + 50 + 30 + 4) * KiB


def test_drm_opened_later_and_a_tree_without_drm(tmp_path):
    fake = FakeProc(tmp_path)
    fake.process(100, 1, rss_kb=10)
    prober = fake.prober()
    before = prober.sample().snapshot
    assert "no process of the tree has a DRM device file open" in before.unavailable["drm"]
    assert not any(name.startswith("drm.") for name in before.values)
    fake.fd(100, 3, "/dev/dri/renderD128", "xe_03_client42.txt")
    after = prober.sample().snapshot
    assert after.values[f"{XE}.gtt.total"] == 1048576 * KiB
    assert "drm" not in after.unavailable


def test_tree_signals_are_host_side_and_rising():
    for name in ("tree.VmRSS", "tree.VmPin", "tree.VmLck", "tree.RssShmem"):
        info = describe(name)
        assert (info.side, info.sense, info.source) == ("host", 1, "tree")


# --- permission ---------------------------------------------------------------------


def access_error(root: int, proc_root: str = "/proc") -> str:
    """Return the ProbeAccessError text of probing ``root``, or a note that there was none."""
    try:
        TreeProber(root, proc_root=proc_root)
    except ProbeAccessError as e:
        return json.dumps({"error": str(e)})
    return json.dumps({"error": None})


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A scratch directory that an unprivileged fork can also enter."""
    d = Path(tempfile.mkdtemp(prefix="l0mem-tree-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        for sub in d.rglob("*"):
            if sub.is_dir() and not sub.is_symlink():
                os.chmod(sub, 0o755)
        shutil.rmtree(d)


def test_unreadable_fdinfo_of_the_root_is_one_clear_line(shared_dir):
    fake = drm_tree(shared_dir)
    os.chmod(fake.proc / "100" / "fdinfo", 0)
    error = json.loads(as_other_user(lambda: access_error(100, str(fake.proc))))["error"]
    assert error is not None
    assert error.startswith(f"cannot read {fake.proc}/100/fdinfo: permission denied (")
    assert error.endswith("root)") and "\n" not in error


def test_unreadable_fdinfo_of_a_descendant_is_reported_unavailable(shared_dir):
    fake = drm_tree(shared_dir)
    os.chmod(fake.proc / "101" / "fd", 0)

    def probe() -> str:
        snap = fake.prober().sample().snapshot
        return json.dumps({"values": dict(snap.values), "unavailable": dict(snap.unavailable)})

    got = json.loads(as_other_user(probe))
    assert "permission denied" in got["unavailable"]["process.101"]
    assert "DRM files are not counted" in got["unavailable"]["process.101"]
    # 101's status still counts; its client 42 is missing, client 41 counted at 100
    assert got["values"]["tree.VmRSS"] == (1000 + 200 + 30 + 4) * KiB
    assert got["values"][f"{XE}.vram0.total"] == 1536 * MiB


def test_process_of_another_user_is_one_clear_line():
    if os.geteuid() != 0:
        if os.stat("/proc/1").st_uid == os.geteuid():
            pytest.skip("pid 1 belongs to this user: no process of another user to probe")
        error = json.loads(access_error(1))["error"]
        assert error is not None and error.startswith("cannot read /proc/1/fd")
    else:
        with subprocess.Popen(["sleep", "60"]) as child:
            try:
                error = json.loads(as_other_user(lambda: access_error(child.pid)))["error"]
            finally:
                child.kill()
        assert error == (
            f"cannot read /proc/{child.pid}/fd: permission denied "
            "(process of another user; run as that user or root)"
        )


# --- real processes ------------------------------------------------------------------

PARENT = """
import subprocess, sys
kids = []
for line in sys.stdin:
    if line.strip() == "spawn":
        kids.append(subprocess.Popen(["sleep", "60"]))
        print(kids[-1].pid, flush=True)
    elif line.strip() == "exit":
        break
"""


@pytest.fixture
def parent() -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """A Python process that starts a ``sleep`` child on each ``spawn`` line it reads."""
    kids: list[int] = []
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc, kids
    finally:
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        proc.kill()
        proc.wait()


def spawn(proc: subprocess.Popen[str], kids: list[int]) -> int:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("spawn\n")
    proc.stdin.flush()
    kids.append(int(proc.stdout.readline()))
    return kids[-1]


def test_children_started_later_are_found_at_the_next_sample(parent):
    proc, kids = parent
    prober = TreeProber(proc.pid)
    first = prober.sample()
    assert first.pids == (proc.pid,)
    assert first.snapshot.values["tree.VmRSS"] > 0
    a, b = spawn(proc, kids), spawn(proc, kids)
    second = prober.sample()
    assert second.pids == (proc.pid, a, b)
    assert process_tree(proc.pid) == (proc.pid, a, b)
    assert second.snapshot.values["tree.VmRSS"] == sum(
        p["tree.VmRSS"] for p in second.by_process.values()
    )
    assert set(second.by_process) == {proc.pid, a, b}


def test_orphans_stay_in_the_tree_until_they_end(parent):
    proc, kids = parent
    prober = TreeProber(proc.pid)
    child = spawn(proc, kids)
    assert prober.sample().pids == (proc.pid, child)
    assert proc.stdin is not None
    proc.stdin.write("exit\n")
    proc.stdin.flush()
    proc.wait()  # reaped: the root is gone, its child reparented
    assert prober.sample().pids == (child,)
    # the orphan is no child of ours to wait for: a pidfd says when it has ended
    ended = os.pidfd_open(child)
    try:
        os.kill(child, 9)
        assert select.select([ended], [], [], 60)[0] == [ended]
    finally:
        os.close(ended)
    with pytest.raises(ProcessGone):
        prober.sample()


def test_process_that_exits_mid_sample_is_skipped_quietly():
    child = subprocess.Popen(["sleep", "60"])
    try:
        prober = TreeProber(os.getpid())
        listed = prober._children

        def children_then_exit(
            pid: int, threads: int | None, scan: dict[int, list[int]] | None
        ) -> list[int]:
            kids = listed(pid, threads, scan)
            if pid == os.getpid():
                assert child.pid in kids
                child.kill()
                child.wait()  # reaped: gone before its files are read
            return kids

        prober._children = children_then_exit  # type: ignore[method-assign]
        sample = prober.sample()
    finally:
        child.kill()
        child.wait()
    assert os.getpid() in sample.pids and child.pid not in sample.pids
    assert f"process.{child.pid}" not in sample.snapshot.unavailable


def test_root_that_does_not_exist_is_gone():
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(ProcessGone, match=str(gone.pid)):
        TreeProber(gone.pid)
    with pytest.raises(ValueError, match="positive integer"):
        TreeProber(0)


def _start_time(pid: int) -> int | None:
    """Return the start time (clock ticks after boot) of process ``pid``, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def _still_running(pid: int, started: int | None) -> bool:
    """Return whether the process ``pid`` that started at ``started`` runs and is no zombie."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in text and _start_time(pid) == started


def test_sampling_benchmark_reports_and_kills_its_tree(tmp_path):
    import benchmarks.bench_sampling as bench

    out = tmp_path / "sampling.json"
    assert bench.main(["--processes", "15", "--samples", "2", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["processes"], r["drm_devices"]) for r in runs] == [(15, 0), (15, 2)]
    with bench.sleeping_tree(4) as root:
        pids = process_tree(root)
        assert len(pids) == 4
        started = {pid: _start_time(pid) for pid in pids}
    # Killed: gone, or a zombie waiting for init, or the pid already reused. A
    # SIGKILL is delivered asynchronously, so a busy machine gets a few seconds.
    deadline = time.monotonic() + 10
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _still_running(pid, started[pid])]
        time.sleep(0.05)
    assert alive == [], [Path(f"/proc/{pid}/status").read_text() for pid in alive]
    assert bench.main(["--processes", "0"]) == 2
