"""Signals in any order, and a parent that dies: ``run`` and ``watch`` keep what they measured.

A seeded fuzz sends ``l0mem run`` (and ``watch``) sequences of stop signals
(INT, TERM, HUP), job control (TSTP, TTOU, CONT) and a harmless one (WINCH),
at random gaps, then SIGCONT and SIGTERM so that every case ends. Whatever
the order: l0mem ends in bounded time with 128 + the number of a stop signal
it was sent, says "interrupted by" that signal, writes a whole report that
names it, and prints no traceback; its workload is gone. A parent that is
killed while ``run`` works takes nothing with it: the run finishes and
writes its report.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import sim

REPO = Path(__file__).resolve().parent.parent
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
OTHERS = (signal.SIGTSTP, signal.SIGTTOU, signal.SIGCONT, signal.SIGWINCH)
CASES = 10


def _sequence(seed: int) -> list[tuple[signal.Signals, float]]:
    """Return a seeded list of (signal, gap before the next) of two to five signals."""
    rng = random.Random(seed)
    return [
        (rng.choice(STOPS + OTHERS), rng.choice([0.0, 0.005, 0.02, 0.1, 0.3]))
        for _ in range(rng.randrange(2, 6))
    ]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _send_in_order(command: list[str], tmp_path: Path, seed: int) -> None:
    report = tmp_path / "r.json"
    pidfile = tmp_path / "workload.pid"
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", command[0], "--quiet", "--interval", "0.05",
         "--json", str(report), *command[1:]],
        cwd=REPO, env={**os.environ, **sim.sim_env(), "PIDFILE": str(pidfile)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    sent = _sequence(seed)
    for sig, gap in sent:
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        time.sleep(gap)
    # Every case ends: a stopped l0mem is continued, then asked to stop.
    for sig in (signal.SIGCONT, signal.SIGTERM):
        if proc.poll() is None:
            proc.send_signal(sig)
            sent.append((sig, 0.0))
    _, err = proc.communicate(timeout=60)
    stops = {s for s, _ in sent if s in STOPS}
    assert proc.returncode - 128 in stops, (sent, proc.returncode, err)
    name = signal.Signals(proc.returncode - 128).name
    assert f"interrupted by {name}" in err, (sent, err)
    assert "Traceback" not in err, err
    data = json.loads(report.read_text())
    assert data["stop_signal"] == name and data["samples"], sent
    if pidfile.exists():
        workload = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while _alive(workload) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(workload), (sent, "the workload outlived l0mem")


_JOB = 'echo $$ > "$PIDFILE"; exec sleep 30'


@pytest.mark.parametrize("seed", range(CASES))
def test_run_keeps_what_it_measured_whatever_the_signals_order(tmp_path: Path, seed: int) -> None:
    _send_in_order(["run", "--", "sh", "-c", _JOB], tmp_path, seed)


@pytest.mark.parametrize("seed", range(100, 100 + CASES // 2))
def test_watch_keeps_what_it_measured_whatever_the_signals_order(tmp_path: Path, seed: int) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        _send_in_order(["watch", "--pid", str(sleeper.pid)], tmp_path, seed)
        assert sleeper.poll() is None  # a watched process is not l0mem's to stop
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_parent_that_dies_takes_nothing_with_it(tmp_path: Path) -> None:
    """The shell that started ``run`` is killed; the run goes on to its end and writes its report."""
    report = tmp_path / "r.json"
    script = (
        f"{sys.executable} -m l0mem run --quiet --interval 0.05 --json {report} "
        "-- sleep 2 & echo $! > started; wait"
    )
    parent = subprocess.Popen(
        ["sh", "-c", script], cwd=tmp_path, env={**os.environ, **sim.sim_env(),
        "PYTHONPATH": str(REPO)}, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    run_pid = int((tmp_path / "started").read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60
    while _alive(run_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(run_pid)
    data = json.loads(report.read_text())
    assert data["exit"]["returncode"] == 0 and data["stop_signal"] is None
    assert data["samples"] and data["summary"]["verdict"]
