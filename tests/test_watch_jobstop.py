"""Job control of ``run``'s workload: seeing its group stopped from the terminal (l0mem.watch.workload)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil

from l0mem.watch.workload import job_stopped, process_state


def _wait_state(pid: int, status: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = process_state(pid)
        if got is not None and got[0] == status:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never reached state {status}: {process_state(pid)}")


def test_a_stopped_first_process_is_seen_once() -> None:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert not job_stopped(proc.pid, [proc.pid])
        os.kill(proc.pid, signal.SIGSTOP)
        _wait_state(proc.pid, psutil.STATUS_STOPPED)
        assert job_stopped(proc.pid, [proc.pid])
        assert not job_stopped(proc.pid, [proc.pid])  # the stop was taken; no second report
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.poll() is None  # the exit status stays for Popen
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def test_the_state_survives_any_command_name(tmp_path: Path) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    odd = tmp_path / "a) b (c) d"
    odd.symlink_to(sleep)
    proc = subprocess.Popen([str(odd), "30"], start_new_session=True)
    try:
        _wait_state(proc.pid, psutil.STATUS_SLEEPING)
        assert process_state(proc.pid) == (psutil.STATUS_SLEEPING, proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert process_state(proc.pid) is None  # reaped: gone
