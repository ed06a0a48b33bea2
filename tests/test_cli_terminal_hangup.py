"""A terminal closed under a command: the report is written and the exit code is SIGHUP's (129).

The command runs on a pseudo-terminal it leads as a session leader (a login
shell's window); the test closes the terminal's master side while the
command works, as closing the window does. The kernel sends SIGHUP and every
later write to the terminal fails with EIO: the live view and progress bars
as they stop, the summary and the line naming the signal. None of that may
cost the report or turn the exit code into 1.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support import sim
from tests.support.cli import REPO_ROOT
from tests.support.own_memory import host_env

HANG_S = 60.0
HANGUP = 128 + signal.SIGHUP


def _hang_up(argv: list[str], env: Mapping[str, str], shown: bytes, after: float) -> int:
    """Run l0mem ``argv`` on a new terminal; close it ``after`` s once ``shown`` was printed.

    Return the exit code.
    """
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader with the terminal, in the foreground
        try:
            os.chdir(REPO_ROOT)
            child_env = {**env, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "120"}
            os.execve(sys.executable, [sys.executable, "-m", "l0mem", *argv], child_env)
        finally:
            os._exit(127)
    output = b""
    try:
        start = time.monotonic()
        seen: float | None = None
        while seen is None or time.monotonic() < seen + after:
            assert time.monotonic() < start + HANG_S, f"never showed {shown!r}: {output!r}"
            assert os.waitpid(pid, os.WNOHANG) == (0, 0), f"ended early: {output!r}"
            if select.select([master], [], [], 0.1)[0]:
                output += os.read(master, 65536)
            if seen is None and shown in output:
                seen = time.monotonic()
    finally:
        os.close(master)  # the window closes
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("still running after its terminal closed")


@pytest.mark.parametrize("quiet", [False, True], ids=["live", "quiet"])
def test_run_keeps_its_report_when_the_terminal_closes(tmp_path: Path, quiet: bool) -> None:
    report = tmp_path / "r.json"
    args = ["run", *(["-q"] if quiet else []), "--json", str(report), "--"]
    args += ["sh", "-c", "echo ready; sleep 30"]
    code = _hang_up(args, host_env(os.environ), b"ready", 1.0 if quiet else 1.5)
    assert code == HANGUP
    assert report.stat().st_size > 0


@pytest.mark.parametrize("quiet", [False, True], ids=["bars", "quiet"])
def test_audit_keeps_its_report_when_the_terminal_closes(tmp_path: Path, quiet: bool) -> None:
    report = tmp_path / "a.json"
    args = ["audit", *(["-q"] if quiet else []), "--setups", "l0", "--size", "128MiB"]
    args += ["--steps", "8", "--settle", "0.5", "--json", str(report)]
    env = host_env(sim.sim_env(devices=2, mirror="peer-resident"))
    # The bars show the set-up as it starts; quiet, nothing is shown: give the audit time to start.
    code = _hang_up(args, env, b"" if quiet else b"l0", 2.0)
    assert code == HANGUP
    assert report.stat().st_size > 0


# Commands that call the driver run in a child l0mem forks (l0mem.cli._supervise);
# a closed terminal's SIGHUP goes to the session leader alone, here the parent.
DRIVER_COMMANDS = {
    "p2p": ["p2p", "--backend", "l0", "--sizes", "4KiB,64MiB", "--reps", "400"],
    "allreduce": ["allreduce", "--backend", "l0", "--sizes", "4KiB,64MiB", "--reps", "400"],
    "bench": ["bench", "kernels", "--backend", "l0", "--elements", "4194304", "--reps", "4000"],
}


@pytest.mark.parametrize("command", sorted(DRIVER_COMMANDS))
def test_a_command_in_a_child_keeps_its_report_when_the_terminal_closes(
    tmp_path: Path, command: str
) -> None:
    report = tmp_path / "r.json"
    args = [*DRIVER_COMMANDS[command], "--json", str(report)]
    code = _hang_up(args, host_env(sim.sim_env(devices=2)), b"", 2.0)
    assert code == HANGUP  # it ran on to its end before (exit 0), or for ever
    data = json.loads(report.read_text())
    assert data["complete"] is False, data  # what was measured, said to be a part


def test_watch_keeps_its_report_when_the_terminal_closes(tmp_path: Path) -> None:
    report = tmp_path / "w.json"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        args = ["watch", "--pid", str(sleeper.pid), "--json", str(report)]
        code = _hang_up(args, host_env(os.environ), b"", 1.5)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert code == HANGUP
    assert json.loads(report.read_text())["samples"]
