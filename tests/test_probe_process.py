"""What l0mem asks psutil about one process: its environment (probe) and its state (watch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from l0mem.probe import read_environ
from l0mem.watch.loop import _alive
from l0mem.watch.workload import process_state


def _zombie() -> subprocess.Popen[bytes]:
    """Return a child that has exited and is not reaped yet."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while process_state(proc.pid) != (psutil.STATUS_ZOMBIE, os.getpgid(proc.pid)):
        assert time.monotonic() < deadline, f"child {proc.pid} never became a zombie"
        time.sleep(0.01)
    return proc


def test_environment_of_a_running_child_and_of_one_that_ended() -> None:
    env = {**os.environ, "L0MEM_PROBE_MARK": "a=b c"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        got = read_environ(proc.pid)
        assert got is not None
        assert got["L0MEM_PROBE_MARK"] == "a=b c"  # only the first '=' splits
        assert got.get("PATH") == os.environ.get("PATH")
    finally:
        proc.kill()
        proc.wait()
    assert read_environ(proc.pid) is None  # reaped: nothing to read


def test_a_zombie_has_no_environment_and_is_not_alive() -> None:
    proc = _zombie()
    try:
        assert not read_environ(proc.pid)  # None or empty: the caller falls back to {}
        assert not _alive(proc.pid)
    finally:
        proc.wait()
    assert process_state(proc.pid) is None
    assert not _alive(proc.pid)


def test_a_running_and_a_stopped_child_are_told_apart() -> None:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert _alive(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while process_state(proc.pid) != (psutil.STATUS_STOPPED, proc.pid):
            assert time.monotonic() < deadline, process_state(proc.pid)
            time.sleep(0.01)
        assert _alive(proc.pid)  # stopped is not ended
    finally:
        proc.kill()
        proc.wait()


def test_sampling_benchmark_times_both_walks_among_a_crowd(tmp_path) -> None:
    import benchmarks.bench_sampling as bench

    out = tmp_path / "sampling.json"
    assert bench.main(["--processes", "3", "--samples", "2", "--crowd", "5", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [r["processes"] for r in data["runs"]] == [3, 3]
    walks = data["walks"]
    assert walks["machine_processes"] >= 3 + 5  # the crowd runs beside the tree
    assert walks["l0mem_walk_s"] > 0 and walks["psutil_walk_s"] > 0
    assert bench.main(["--crowd", "-1"]) == 2
