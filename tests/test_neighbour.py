"""The noisy neighbour (tests/support/neighbour.py): its schedule, its memory, its ends.

Memory is checked on the neighbour's own process and files, never on
system-wide signals (other tests run beside these). A reading counts only if
it was taken while the neighbour slept after a logged step: the step's
``until`` (CLOCK_MONOTONIC, shared by every process) is later than the end of
the reading, so no step was half done while it was read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.neighbour import (
    KINDS,
    MIB,
    PAGE,
    REPO_ROOT,
    Neighbour,
    Schedule,
    iter_steps,
    parse_range,
    parse_size,
    plan,
)

SMALL: dict[str, Any] = {
    "step": (16 * MIB, 32 * MIB),
    "period": (0.05, 0.1),
    "max_held": 64 * MIB,
    "floor": 0,  # a 64 MiB neighbour never skips a grow in these tests
}


# ---------------------------------------------------------------- the schedule (pure)


@pytest.mark.parametrize("kind", [*KINDS, "mixed"])
def test_the_same_seed_gives_the_same_schedule_and_another_seed_another(kind: str) -> None:
    args = (kind, (64 * MIB, 768 * MIB), (0.2, 2.5), 2 << 30)
    schedules = {}
    for seed in range(50):
        first = plan(*args, seed=seed, count=100)
        assert plan(*args, seed=seed, count=100) == first
        schedules[seed] = [(s.action, s.kind, s.size, s.sleep) for s, _ in first]
    distinct = {tuple(v) for v in schedules.values()}
    assert len(distinct) == len(schedules)


@pytest.mark.parametrize("kind", [*KINDS, "mixed"])
@pytest.mark.parametrize(
    ("step", "max_held"),
    [((64 * MIB, 768 * MIB), 2 << 30), ((16 * MIB, 32 * MIB), 64 * MIB), ((1, 3 * PAGE), 5 * PAGE)],
)
def test_the_schedule_stays_within_its_bounds(
    kind: str, step: tuple[int, int], max_held: int
) -> None:
    low = -(-step[0] // PAGE) * PAGE
    high = step[1] // PAGE * PAGE
    for seed in range(300):
        held = 0
        chunks: dict[int, int] = {}
        kinds_seen = set()
        for s, after in plan(kind, step, (0.2, 2.5), max_held, seed, count=60):
            kinds_seen.add(s.kind)
            assert low <= s.size <= high and s.size % PAGE == 0, s
            assert 0.2 <= s.sleep <= 2.5
            if s.action == "grow":
                assert s.chunk not in chunks
                chunks[s.chunk] = s.size
                held += s.size
            else:  # a shrink releases, whole, a chunk that is held
                assert chunks.pop(s.chunk) == s.size
                held -= s.size
            assert 0 <= held <= max_held
            assert sum(after.values()) == held and min(after.values()) >= 0
        if kind != "mixed":
            assert kinds_seen == {kind}
        else:
            assert kinds_seen <= set(KINDS)
    if kind == "mixed":
        every = {s.kind for seed in range(20) for s, _ in plan(kind, step, (0, 1), max_held, seed, 60)}
        assert every == set(KINDS)


def test_grow_when_empty_shrink_when_full_else_both() -> None:
    step = (16 * MIB, 32 * MIB)
    actions = {"grow": 0, "shrink": 0}
    for seed in range(100):
        held = 0
        for s, after in plan("anon", step, (0, 0), 64 * MIB, seed, count=40):
            if held == 0:
                assert s.action == "grow", (seed, s)
            elif 64 * MIB - held < step[0]:
                assert s.action == "shrink", (seed, s)
            else:
                actions[s.action] += 1
            held = after["anon"]
    assert min(actions.values()) > 0.35 * sum(actions.values())


def test_a_skipped_grow_changes_what_is_held_not_the_random_stream() -> None:
    def run(skip: Callable[[int], bool]) -> list[tuple[str, int, float]]:
        schedule = Schedule("mixed", (16 * MIB, 32 * MIB), (0.1, 0.2), 64 * MIB, seed=7)
        out: list[tuple[str, int, float]] = []
        for _ in range(100):
            s = schedule.next()
            applied = not (s.action == "grow" and skip(s.index))
            schedule.done(s, applied)
            assert 0 <= schedule.held <= 64 * MIB
            out.append((s.action, s.size, s.sleep))
        return out

    skipping = run(lambda i: i % 3 == 0)
    assert run(lambda i: i % 3 == 0) == skipping
    assert [sleep for *_, sleep in skipping] == [sleep for *_, sleep in run(lambda i: False)]


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("64M", 64 * MIB), ("1.5G", 3 << 29), ("2GiB", 2 << 30), ("16k", 16384)],
)
def test_sizes_take_binary_suffixes(text: str, value: int) -> None:
    assert parse_size(text) == value


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")
    with pytest.raises(ValueError, match="low end is above"):
        parse_range("768M-64M", parse_size)
    with pytest.raises(ValueError, match="below the smallest step"):
        Schedule("anon", (64 * MIB, 128 * MIB), (0.1, 0.2), 32 * MIB, seed=1)
    with pytest.raises(ValueError, match="unknown kind"):
        Schedule("quiet", (64 * MIB, 128 * MIB), (0.1, 0.2), 1 << 30, seed=1)
    with pytest.raises(ValueError, match="tmpfs"):
        Neighbour("pagecache", directory="/dev/shm", **SMALL)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.neighbour", "--step", "1G-2G", "--max-held", "512M"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "below the smallest step" in proc.stderr


# ---------------------------------------------------------------- a live neighbour


def _rss_anon(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise FileNotFoundError(f"process {pid} has no memory: it has ended")


def _files(directory: Path | None) -> dict[str, tuple[int, int]]:
    if directory is None:
        return {}
    return {
        p.name: (st.st_size, st.st_blocks * 512)
        for p in directory.iterdir()
        for st in [p.stat()]
    }


def _expected_files(steps: list[dict[str, Any]], kind: str) -> dict[str, int]:
    files: dict[str, int] = {}
    for e in steps:
        if e["kind"] != kind:
            continue
        if e["action"] == "grow":
            files[e["chunk"]] = e["bytes"]
        elif e["action"] == "shrink":
            del files[e["chunk"]]
    return files


def _ended(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _wait_for_steps(n: Neighbour, count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(list(iter_steps(n.events()))) < count:
        assert n.running(), n.stderr()
        assert time.monotonic() < deadline, "the neighbour made no steps"
        time.sleep(0.01)


@pytest.mark.parametrize("kind", [*KINDS, "mixed"])
def test_a_live_neighbour_holds_what_it_logged_where_it_should(kind: str) -> None:
    readings: list[dict[str, Any]] = []
    with Neighbour(kind, seed=11, seconds=1.5, **SMALL) as n:
        pid = n.pid
        disk, shm = n.disk_dir, n.shm_dir
        assert (disk is not None) == (kind in ("pagecache", "mixed"))
        assert (shm is not None) == (kind in ("shmem", "mixed"))
        while n.running():
            steps = list(iter_steps(n.events()))
            if not steps:
                time.sleep(0.002)
                continue
            try:
                anon = _rss_anon(pid)
                disk_files, shm_files = _files(disk), _files(shm)
            except FileNotFoundError:  # it ended (or a file went) while being read
                continue
            if time.monotonic() < steps[-1]["until"]:  # read while it slept after that step
                readings.append({"step": steps, "anon": anon, "disk": disk_files, "shm": shm_files})
            time.sleep(0.003)
        assert n.wait(timeout=30) == 0, n.stderr()
    events = n.events()
    steps = list(iter_steps(events))
    # The process made the decisions the pure schedule makes for its seed.
    planned = plan(kind, SMALL["step"], SMALL["period"], SMALL["max_held"], 11, len(steps))
    assert [(e["action"], e["kind"], e["bytes"], e["held"]) for e in steps] == [
        (s.action, s.kind, s.size, held) for s, held in planned
    ]
    assert len(readings) >= 3, f"only {len(readings)} reading(s) while it slept"
    anon_seen = set()
    differences = []
    for r in readings:
        last = r["step"][-1]
        held = last["held"]
        for name, directory in (("pagecache", "disk"), ("shmem", "shm")):
            want = _expected_files(r["step"], name)
            got = r[directory]
            assert {f: size for f, (size, _) in got.items()} == want, (name, last["i"])
            assert sum(want.values()) == held[name]
            if name == "shmem":  # every page allocated: tmpfs blocks are the pages
                assert all(blocks == size for size, blocks in got.values()), got
        differences.append(r["anon"] - held["anon"])
        anon_seen.add(held["anon"])
    # RssAnon is the interpreter's own plus exactly what it logged: a constant difference.
    assert min(differences) >= 0, differences
    assert max(differences) - min(differences) < 8 * MIB, [d // MIB for d in differences]
    if kind in ("anon", "mixed"):
        assert len(anon_seen) >= 2 and max(anon_seen) >= SMALL["step"][0], anon_seen
    else:
        assert anon_seen == {0}
    assert events[-1]["event"] == "end" and events[-1]["reason"] == "time"
    assert disk is None or not disk.exists()
    assert shm is None or not shm.exists()


def test_it_ends_by_itself_after_its_seconds() -> None:
    n = Neighbour("mixed", seed=3, seconds=1.0, **SMALL).start()
    try:
        disk, shm = n.disk_dir, n.shm_dir
        assert n.wait(timeout=30) == 0, n.stderr()
        assert disk is not None and shm is not None
        assert not disk.exists() and not shm.exists()
    finally:
        n.stop()
    events = n.events()
    end = events[-1]
    assert end["event"] == "end" and end["reason"] == "time"
    assert 1.0 <= end["t"] < 6.0  # its own clock: at its seconds, plus one step and the clean-up
    # No step began after its seconds (one begun just before may end after them, on a loaded machine).
    assert all(e["began"] < 1.0 <= end["t"] for e in iter_steps(events))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_ends_it_within_2_s_leaving_nothing(signum: int) -> None:
    n = Neighbour("mixed", seed=5, seconds=60.0, **SMALL).start()
    try:
        _wait_for_steps(n, 3)
        disk, shm = n.disk_dir, n.shm_dir
        assert disk is not None and shm is not None
        os.kill(n.pid, signum)
        assert n.wait(timeout=2.0) == 128 + signum, n.stderr()
        # what it removed itself, before stop() would
        assert not disk.exists() and not shm.exists()
    finally:
        n.stop()
    end = n.events()[-1]
    assert end["event"] == "end" and end["reason"] == signal.Signals(signum).name


PARENT = """
import json, sys, time
from tests.support.neighbour import MIB, Neighbour
n = Neighbour("mixed", step=(16 * MIB, 32 * MIB), period=(0.05, 0.1), max_held=64 * MIB,
              seed=9, seconds=60.0, floor=0).start()
print(json.dumps({"pid": n.pid, "disk": str(n.disk_dir), "shm": str(n.shm_dir),
                  "log": str(n.log_path)}), flush=True)
time.sleep(120)
"""


def test_it_dies_with_its_parent() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    info: dict[str, str] = {}
    try:
        assert parent.stdout is not None
        info = json.loads(parent.stdout.readline())
        log = Path(info["log"])
        deadline = time.monotonic() + 30
        while log.read_text().count('"event":"step"') < 3:
            assert time.monotonic() < deadline, "the neighbour made no steps"
            time.sleep(0.01)
        parent.kill()
        parent.wait(timeout=10)
        pid = int(info["pid"])
        deadline = time.monotonic() + 2.0
        while not _ended(pid):
            assert time.monotonic() < deadline, "the neighbour outlived its parent by 2 s"
            time.sleep(0.01)
        assert not Path(info["disk"]).exists() and not Path(info["shm"]).exists()
        end = json.loads(log.read_text().splitlines()[-1])
        assert end["event"] == "end" and end["reason"] == "SIGTERM"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if info:  # what the killed parent could not remove: its log, and ours if the test failed
            import shutil

            shutil.rmtree(Path(info["log"]).parent, ignore_errors=True)
            for key in ("disk", "shm"):
                shutil.rmtree(info[key], ignore_errors=True)
            if not _ended(int(info["pid"])):
                os.kill(int(info["pid"]), signal.SIGKILL)
