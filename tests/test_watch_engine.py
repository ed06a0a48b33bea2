"""The watch loop with recorded series: exit codes, the floor, stop signals, attach (no real memory read)."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from l0mem.watch.engine import MIN_INTERVAL, Watch
from l0mem.watch.loop import FloorError, run_workload, watch_pid
from l0mem.watch.sources import CommandError, NoSuchProcess, TreeReading, TreeSource
from l0mem.watch.windows import SETTLE_HORIZON

GIB = 1 << 30
MIB = 1 << 20


class _Snap:
    def __init__(self, values: Mapping[str, int]) -> None:
        self.values = dict(values)
        self.unavailable = {"drm": "l0mem's own", "meminfo.GPUActive": "old kernel"}


class _Prober:
    """The baseline a recorded host shows."""

    def __init__(self, available: int) -> None:
        self.available = available

    def snapshot(self) -> _Snap:
        return _Snap({"host.available": self.available, "proc.VmRSS": 1, "meminfo.Shmem": GIB})


class _Recorded:
    """A source replaying host readings: each sample loses ``step`` bytes more, from ``start``."""

    def __init__(
        self, start: int, step: int, pids: tuple[int, ...] = (), ready: Path | None = None
    ) -> None:
        self.start, self.step, self.n, self.pids = start, step, 0, pids
        self.ready = ready  # no loss before this file exists

    def __call__(self, pid: int) -> _Recorded:
        self.pids = self.pids or (pid,)
        return self

    def sample(self) -> TreeReading | None:
        if self.ready is None or self.ready.exists():
            self.n += 1
        values = {"host.available": self.start - self.n * self.step, "tree.VmRSS": 10 * MIB}
        return TreeReading(values, {"cgroup": "no cgroup v2"}, len(self.pids), self.pids)


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_workloads_exit_code_is_returned_and_every_sample_kept() -> None:
    watch = Watch(interval=0.02)
    rec = _Recorded(64 * GIB, 0)
    result = run_workload(
        watch,
        _py("import time; time.sleep(0.3); raise SystemExit(7)"),
        source_factory=rec,
        prober=_Prober(64 * GIB),
    )
    assert result.returncode == 7
    assert result.floor_stop is None and result.stop_signal is None
    assert len(result.series.samples) == rec.n >= 2
    # The baseline keeps the host's signals only, and why host signals are missing.
    assert set(result.series.baseline.values) == {"host.available", "meminfo.Shmem"}
    assert result.series.unavailable == {
        "meminfo.GPUActive": "old kernel",
        "cgroup": "no cgroup v2",
    }
    ts = [s.t for s in result.series.samples]
    assert ts == sorted(ts) and ts[0] >= 0


def test_a_command_that_does_not_exist_is_127_and_one_not_executable_126(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as err:
        run_workload(
            Watch(),
            ["/nonexistent/l0mem-none"],
            prober=_Prober(GIB),
            source_factory=_Recorded(GIB, 0),
        )
    assert err.value.code == 127 and "not found" in str(err.value)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(CommandError) as err:
        run_workload(Watch(), [str(script)], prober=_Prober(GIB), source_factory=_Recorded(GIB, 0))
    assert err.value.code == 126


def test_the_floor_stops_the_workload_before_it_is_crossed() -> None:
    floor = 60 * GIB
    watch = Watch(interval=0.05, floor=floor, grace=5.0)
    rec = _Recorded(64 * GIB, 256 * MIB)
    # A workload that would run far longer than the floor allows; SIGTERM ends it.
    result = run_workload(
        watch, _py("import time; time.sleep(60)"), source_factory=rec, prober=_Prober(64 * GIB)
    )
    assert result.floor_stop is not None
    assert result.returncode == -signal.SIGTERM
    assert not result.floor_stop.killed
    lowest = min(s.values["host.available"] for s in result.series.samples)
    assert lowest >= floor, "the floor was crossed"
    assert result.floor_stop.available - floor <= 2 * 256 * MIB
    assert "below the floor" in result.floor_stop.message


def test_a_workload_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    watch = Watch(interval=0.05, floor=63 * GIB, grace=0.3)
    ready = tmp_path / "ready"
    code = (
        "import pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    )
    # The host loses memory once the workload ignores SIGTERM.
    rec = _Recorded(64 * GIB, 256 * MIB, ready=ready)
    result = run_workload(watch, _py(code), source_factory=rec, prober=_Prober(64 * GIB))
    assert result.returncode == -signal.SIGKILL
    assert result.floor_stop is not None and result.floor_stop.killed


def test_the_floor_already_crossed_refuses_to_start() -> None:
    with pytest.raises(FloorError, match="already at or below the floor"):
        run_workload(
            Watch(floor=2 * GIB),
            ["/nonexistent/never-started"],
            prober=_Prober(GIB),
            source_factory=_Recorded(GIB, 0),
        )


def test_the_interval_shortens_near_the_floor() -> None:
    now = [0.0]
    watch = Watch(interval=0.5, floor=60 * GIB, clock=lambda: now[0])
    rec = _Recorded(64 * GIB, 0)
    watch.set_baseline({"host.available": 64 * GIB}, {})
    for _ in range(2):
        now[0] += 0.5
        watch.take(rec)
    assert watch.next_interval() == 0.5  # nothing lost yet
    # 1 GiB lost in 0.5 s with 3 GiB left: the floor is 1.5 s away; look 4 times before.
    rec.start, rec.step = 66 * GIB, 1 * GIB
    now[0] += 0.5
    watch.take(rec)
    assert watch.series.samples[-1].values["host.available"] == 63 * GIB
    assert watch.next_interval() == pytest.approx(1.5 / 4)
    assert not watch.floor_near()


class _Available:
    """A tree whose host has ``available`` bytes, read as often as asked."""

    def __init__(self, available: int) -> None:
        self.available = available

    def sample(self) -> TreeReading:
        return TreeReading({"meminfo.MemAvailable": self.available}, {}, 1, (1,))


def test_a_workload_that_grows_in_steps_is_stopped_between_them() -> None:
    # 32 MiB a step, two looks a step: the last two looks saw nothing, the next
    # step (or two, if the next look is late) takes the host to the floor.
    watch = Watch(interval=0.05, floor=64 * GIB - 100 * MIB)
    watch.set_baseline({}, {})
    host = _Available(64 * GIB)
    watch.take(host)
    host.available -= 32 * MIB
    for _ in range(2):
        watch.take(host)
    assert not watch.floor_near()  # 68 MiB of room, one step lost per look at most
    host.available -= 32 * MIB
    for _ in range(5):
        watch.take(host)
        assert watch.floor_near(), "a quiet look between steps is not a quiet workload"


def test_late_looks_make_the_floor_look_further_ahead() -> None:
    # A loaded machine: every look comes 180 ms after the 20 ms asked for, and the
    # workload has grown 32 MiB each time. It must stop before a step crosses.
    now = [0.0]
    floor = 64 * GIB - 90 * MIB
    watch = Watch(interval=0.05, floor=floor, clock=lambda: now[0])
    watch.set_baseline({}, {})
    host = _Available(64 * GIB)
    watch.take(host)
    while not watch.floor_near():
        now[0] += watch.next_interval() + 0.18
        host.available -= 32 * MIB
        assert host.available >= floor, "a step crossed the floor before the watch stopped it"
        watch.take(host)


@pytest.mark.parametrize("rate", [GIB, 4 * GIB])
def test_a_steady_workload_is_stopped_near_the_floor_not_far_above_it(rate: int) -> None:
    # The host loses `rate` bytes a second; the watch looks when next_interval says.
    now = [0.0]
    floor = 60 * GIB
    watch = Watch(interval=0.5, floor=floor, clock=lambda: now[0])
    watch.set_baseline({}, {})
    host = _Available(64 * GIB)
    watch.take(host)
    while not watch.floor_near():
        wait = watch.next_interval()
        now[0] += wait
        host.available -= int(rate * wait)
        watch.take(host)
    room = host.available - floor
    assert room >= 0, "the floor was crossed"
    # Near the floor the looks come every 20 ms: two of them at this rate, and a margin.
    assert room <= 4 * rate * MIN_INTERVAL, f"stopped {room / MIB:.0f} MiB above the floor"


def _stop_soon(watch: Watch, signum: int, after: float) -> threading.Timer:
    timer = threading.Timer(after, watch.request_stop, (signum,))
    timer.start()
    return timer


def test_the_interval_shortens_when_little_room_is_left() -> None:
    watch = Watch(interval=0.5, floor=10 * GIB)
    watch.set_baseline({}, {})

    watch.take(_Available(20 * GIB))
    assert watch.next_interval() == 0.5
    watch.take(_Available(11 * GIB))  # 1 GiB of room: half the interval, however slow the loss
    assert watch.next_interval() < 0.5
    watch.take(_Available(10 * GIB + (1 << 20)))
    assert watch.next_interval() == MIN_INTERVAL


def test_a_stop_is_forwarded_to_the_workloads_process_group() -> None:
    watch = Watch(interval=0.05)
    # The workload's child too must get it: both are in the workload's group.
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    _stop_soon(watch, signal.SIGTERM, 0.5)
    t0 = time.monotonic()
    result = run_workload(
        watch, _py(code), source_factory=_Recorded(64 * GIB, 0), prober=_Prober(64 * GIB)
    )
    assert time.monotonic() - t0 < 30
    assert result.stop_signal == signal.SIGTERM
    assert result.returncode == -signal.SIGTERM


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(_py("import time; time.sleep(0.6)"))
    yield proc
    proc.kill()
    proc.wait()


def test_watch_follows_a_pid_until_it_ends(sleeper: subprocess.Popen[bytes]) -> None:
    watch = Watch(interval=0.05)
    rec = _Recorded(64 * GIB, MIB)
    result = watch_pid(watch, sleeper.pid, source_factory=rec)
    assert result.returncode is None and result.stop_signal is None
    assert len(result.series.samples) >= 3
    # The baseline is the first reading at attach.
    assert result.series.baseline.values["host.available"] == 64 * GIB - MIB


def test_a_stop_ends_a_watch_and_leaves_the_process_alone() -> None:
    proc = subprocess.Popen(_py("import time; time.sleep(60)"))
    try:
        watch = Watch(interval=0.05)
        _stop_soon(watch, signal.SIGINT, 0.3)
        result = watch_pid(watch, proc.pid, source_factory=_Recorded(GIB, 0))
        assert result.stop_signal == signal.SIGINT
        assert proc.poll() is None, "watch must not touch the process it watches"
    finally:
        proc.kill()
        proc.wait()


def test_watching_a_pid_gone_is_no_such_process() -> None:
    class Gone:
        def sample(self) -> None:
            return None

    with pytest.raises(NoSuchProcess):
        watch_pid(Watch(), os.getpid(), source_factory=lambda pid: Gone())


def test_the_floor_is_kept_on_memavailable_when_both_are_read() -> None:
    watch = Watch(floor=10 * GIB)
    watch.set_baseline({}, {})

    class Both:
        def sample(self) -> TreeReading:
            # The per-CPU lists put host.available above the floor; MemAvailable is below it.
            values = {"meminfo.MemAvailable": 9 * GIB, "host.available": 11 * GIB}
            return TreeReading(values, {}, 1, (1,))

    watch.take(Both())
    assert watch.floor_near()


class _MovingTracer:
    """A tracer whose device memory moves during the first ``moving`` host readings."""

    def __init__(self, moving: int) -> None:
        self.allocated, self.moving = 0, moving

    def poll(self) -> object:
        if self.moving > 0:
            self.moving -= 1
            self.allocated += 64 * MIB
        allocated = self.allocated

        class Totals:
            def to_dict(self) -> dict[str, object]:
                device = {"index": 0, "allocated": allocated, "resident_on": {}}
                return {"devices": [device]}

        return Totals()


@pytest.mark.parametrize(("moving", "readings"), [(0, 1), (1, 1), (2, 2), (3, 3), (10, 3)])
def test_a_host_reading_is_taken_again_while_traced_device_memory_moves(
    moving: int, readings: int
) -> None:
    # A reading whose device memory changed under it pairs host memory with the
    # wrong device memory (a call half done): taken again, a bounded number of times.
    source = _Recorded(64 * GIB, MIB)
    tracer = _MovingTracer(moving)
    watch = Watch(interval=0.1, tracer=tracer)
    watch.take(source)
    assert source.n == readings
    (sample,) = watch.series.samples
    assert sample.values["trace.0.allocated"] == tracer.allocated


class _Steps:
    """A source whose device memory (DRM VRAM) changes at the reads ``changes`` names."""

    def __init__(self, changes: set[int], available: list[int] | None = None) -> None:
        self.changes, self.available, self.n, self.device = changes, available, 0, 0

    def sample(self) -> TreeReading | None:
        self.n += 1
        if self.n in self.changes:
            self.device += 64 * MIB
        host = 64 * GIB if self.available is None else self.available[self.n - 1]
        values = {"host.available": host, "drm.0000:03:00.0.vram0.total": self.device}
        return TreeReading(values, {}, 1, (1,))


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _look(watch: Watch, source: _Steps, clock: _Clock, reads: int, step: float) -> None:
    for _ in range(reads):
        clock.now += step
        watch.take(source)


def test_quick_looks_keep_the_reads_around_each_change_and_one_per_interval() -> None:
    clock, shown = _Clock(), []
    watch = Watch(interval=0.5, look=0.05, clock=clock, on_sample=lambda s, x: shown.append(x.t))
    watch.set_baseline({"host.available": 64 * GIB}, {})
    # A mirror filled over reads 37-39 before device memory moves at 40; a neighbour
    # takes 50 MiB at each of two reads more than a horizon after the last change.
    horizon = round(SETTLE_HORIZON / 0.05)
    far = 61 + horizon + 5
    reads = far + horizon + 20
    host, took = [], 0
    for read in range(1, reads + 1):
        took += 20 * MIB if read in (37, 38, 39) else 50 * MIB if read in (far, far + 1) else 0
        host.append(64 * GIB - took)
    source = _Steps({40, 60, 61}, host)
    _look(watch, source, clock, reads, 0.05)
    kept = [round(s.t / 0.05) for s in watch.series.samples]
    # Around each change: the two reads before it and the two after it (or up to the next change).
    for read in (40, 60, 61):
        assert {read - 2, read - 1, read, read + 1} <= set(kept), kept
    # The host moving into a change: every read of it, from the last still one.
    assert {36, 37, 38, 39} <= set(kept), kept
    # The neighbour, more than a horizon from any change: only the reads an interval apart.
    assert not {far - 1, far, far + 1} <= set(kept), kept
    # Between changes the kept reads are an interval (ten reads) apart; the reads of
    # the last horizon are not judged yet.
    near = {k for c in (40, 60, 61) for k in range(c - 4, c + 5)} | {36, 37}
    quiet = [k for k in kept if k not in near and k < reads - horizon]
    assert all(b - a >= 10 for a, b in itertools.pairwise(quiet[1:])), kept
    judged = reads - horizon
    assert len([k for k in kept if k < judged]) < judged // 3  # far fewer than the reads
    # The view is told once per interval, not once per read.
    assert all(b - a >= 0.5 - 0.025 - 1e-9 for a, b in itertools.pairwise(shown))
    assert abs(len(shown) - reads // 10) <= 1


def test_the_floor_reads_every_look_not_only_the_kept_ones() -> None:
    clock = _Clock()
    # A host that falls by 100 MiB a read: kept reads alone would show gaps of a second.
    falling = [64 * GIB - i * 100 * MIB for i in range(60)]
    watch = Watch(interval=1.0, look=0.05, floor=64 * GIB - 5 * GIB, clock=clock)
    watch.set_baseline({"host.available": 64 * GIB}, {})
    source = _Steps(set(), falling)
    near = []
    for _ in range(1, 56):
        _look(watch, source, clock, 1, 0.05)
        near.append(watch.floor_near())
    # Two looks of 100 MiB from the floor (read 51; it is crossed at read 53), not long before.
    first = near.index(True) + 1
    assert 47 <= first <= 51, first
    assert watch.next_interval() <= 0.05


def test_a_look_longer_than_the_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="look"):
        Watch(interval=0.5, look=1.0)


def test_a_tree_slow_to_read_is_read_less_often() -> None:
    class Slow(_Steps):
        def sample(self) -> TreeReading | None:
            time.sleep(0.03)  # a large tree: a read costs 30 ms
            return super().sample()

    watch = Watch(interval=0.5, look=0.05)
    watch.set_baseline({"host.available": 64 * GIB}, {})
    watch.take(Slow(set()))
    # At most a tenth of the time goes to reading: 30 ms a read, a read every 300 ms or more.
    assert 0.3 <= watch.next_interval() <= 0.5
    quick = Watch(interval=0.5, look=0.05)
    quick.set_baseline({"host.available": 64 * GIB}, {})
    quick.take(_Steps(set()))
    assert quick.next_interval() == pytest.approx(0.05)


class _Losing:
    """The real tree (the processes it follows), with a host that loses 4 MiB a look once the first ended."""

    def __init__(self, pid: int) -> None:
        self.tree, self.n, self.root = TreeSource(pid), 0, pid

    def adopt(self, pids: tuple[int, ...]) -> None:
        self.tree.adopt(pids)

    def sample(self) -> TreeReading | None:
        got = self.tree.sample()
        if got is None:
            return None
        self.n += not Path(f"/proc/{self.root}").exists()
        own = {k: v for k, v in got.values.items() if k.startswith("tree.")}
        values = {**own, "host.available": 64 * GIB - self.n * 4 * MIB}
        return TreeReading(values, got.unavailable, got.pids, got.pid_list)


def test_processes_that_outlive_the_first_are_followed_and_the_floor_kept_for_them(
    tmp_path: Path,
) -> None:
    # The first process starts a child and ends; the child goes on "allocating": the
    # host loses memory at every look until the floor is near. run follows the child,
    # stops it for the floor and says that it outlived the first process.
    child = tmp_path / "child.pid"
    code = (
        "import os, subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
        f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(0.2)"
    )
    watch = Watch(interval=0.02, floor=64 * GIB - 40 * MIB, grace=1.0)
    started = time.monotonic()

    result = run_workload(watch, _py(code), source_factory=_Losing, prober=_Prober(64 * GIB))
    assert result.returncode == 0
    assert result.outlived is not None and result.outlived.processes == 1
    assert result.floor_stop is not None  # the child was stopped for the floor, not left running
    pid = int(child.read_text())
    assert (
        not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    )
    assert time.monotonic() - started < 30


def test_a_workload_whose_children_end_with_it_has_nothing_outlived() -> None:
    result = run_workload(
        Watch(interval=0.02),
        _py("import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'])"),
        prober=_Prober(64 * GIB),
    )
    assert result.returncode == 0 and result.outlived is None


def test_processes_still_running_after_the_follow_are_named_and_left_alone(
    tmp_path: Path,
) -> None:
    # A daemon the workload leaves behind: run follows it for a while, then ends and
    # names it, without stopping it (it is no longer the workload's to wait for).
    child = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
        f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(0.3)"
    )
    started = time.monotonic()
    result = run_workload(Watch(interval=0.02), _py(code), prober=_Prober(64 * GIB), follow=0.5)
    pid = int(child.read_text())
    try:
        assert result.returncode == 0
        assert result.outlived is not None and result.outlived.left_running == (pid,)
        assert 0.4 <= result.outlived.seconds < 10
        assert time.monotonic() - started < 15
        assert Path(f"/proc/{pid}").exists()  # left alone
    finally:
        os.kill(pid, signal.SIGKILL)


def test_follow_all_waits_for_every_process_the_workload_left() -> None:
    # --follow all: the floor is kept while any of them lives, and none is left running.
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.5)'], start_new_session=True); "
        "time.sleep(0.3)"  # seen in the tree while its parent lives, as a real job's are
    )
    started = time.monotonic()
    result = run_workload(
        Watch(interval=0.02), _py(code), prober=_Prober(64 * GIB), follow=math.inf
    )
    assert result.returncode == 0
    assert result.outlived is not None and result.outlived.left_running == ()
    assert result.outlived.seconds >= 1.0
    assert time.monotonic() - started < 15


def _gone_or_not_ours(pid: int) -> bool:
    """Return whether ``pid`` has ended and left no zombie of this process's behind."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return not (stat[0] == "Z" and int(stat[1]) == os.getpid())


# The first look sees the shell alone; it starts the job and ends between two looks.
_LEAVES_A_JOB = "sleep 0.2; sleep {s} & echo $! > {f}; exit 0"
# The job's parent ends at once, in a session of its own, while the first process runs on.
_DOUBLE_FORK = "sleep 0.2; setsid sh -c 'sleep {s} & echo $! > {f}'; sleep 0.4"


@pytest.mark.parametrize("script", [_LEAVES_A_JOB, _DOUBLE_FORK], ids=["job", "setsid"])
def test_an_orphan_no_look_saw_is_followed_named_and_reaped(tmp_path: Path, script: str) -> None:
    # run is a child subreaper: the orphan is reparented to l0mem, not to init, and
    # found at the next look although no look saw it while its parent lived.
    child = tmp_path / "child.pid"
    command = ["sh", "-c", script.format(s=1.5, f=child)]
    result = run_workload(Watch(interval=0.5), command, prober=_Prober(64 * GIB), follow=math.inf)
    pid = int(child.read_text())
    assert result.returncode == 0
    assert result.outlived is not None and result.outlived.processes == 1
    assert result.outlived.left_running == ()
    assert result.outlived.seconds >= 0.8  # followed until it ended
    assert _gone_or_not_ours(pid)  # reaped: no zombie left behind


def test_the_floor_is_kept_for_an_orphan_no_look_saw(tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    command = ["sh", "-c", _LEAVES_A_JOB.format(s=60, f=child)]
    watch = Watch(interval=0.5, floor=64 * GIB - 40 * MIB, grace=1.0)

    started = time.monotonic()
    result = run_workload(watch, command, source_factory=_Losing, prober=_Prober(64 * GIB))
    pid = int(child.read_text())
    try:
        assert result.outlived is not None and result.outlived.processes == 1
        assert result.floor_stop is not None  # stopped for the floor, not left running
        assert _gone_or_not_ours(pid)
        assert time.monotonic() - started < 30
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_watching_a_zombie_says_it_exited_unreaped() -> None:
    from l0mem.watch.sources import TreeSource

    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        with pytest.raises(NoSuchProcess, match=r"has exited \(a zombie its parent has not reaped\)"):
            watch_pid(Watch(), child, source_factory=TreeSource)
    finally:
        os.waitpid(child, 0)
    with pytest.raises(NoSuchProcess, match=f"^no process {child}$"):
        watch_pid(Watch(), child, source_factory=TreeSource)
