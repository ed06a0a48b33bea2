"""Messages for odd requests and stops that come early: one clear line and the documented code.

A Ctrl-C while the command line loads or parses is a stop like any other
(128 + N with the signal named, never click's "Aborted!" with exit 1, nor a
doubled prefix); an empty command name is "command not found"; a kernel
thread is refused by name; as root a process that cannot be read is not
blamed on the user; a terminal too narrow for a table gets a table anyway.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from l0mem.probe import pids as pids_module
from tests.support import sim
from tests.support.cli import REPO_ROOT, run_l0mem

PF_KTHREAD = 0x00200000


@pytest.mark.parametrize("delay", [0.03, 0.06, 0.09, 0.12, 0.2, 0.3])
def test_a_stop_at_any_moment_of_the_start_is_130_with_one_line(delay: float) -> None:
    env = {**sim.sim_env(devices=2), "COLUMNS": "120"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "info"],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Aborted!" not in err and "l0mem l0mem" not in err, err
    if proc.returncode == -signal.SIGINT:
        return  # still in the interpreter's own start, before any l0mem code ran
    if proc.returncode == 0:
        return  # it had finished already
    assert proc.returncode == 130, (proc.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "interrupted by SIGINT" in lines[0], err
    assert lines[0].startswith(("l0mem info: ", "l0mem: ")), err


def test_an_empty_command_name_is_not_found() -> None:
    proc = run_l0mem("run", ["--", ""], dict(os.environ))
    assert proc.returncode == 127, proc.stderr
    assert proc.stderr.strip() == "l0mem run: '' (an empty command name): command not found"


def _kernel_thread() -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            flags = int(text[text.rfind(")") + 2 :].split()[6])
        except (OSError, ValueError, IndexError):
            continue
        if flags & PF_KTHREAD:
            return int(entry.name)
    return None


def test_a_kernel_thread_is_refused_by_name() -> None:
    pid = _kernel_thread()
    if pid is None:
        pytest.skip("no kernel thread is visible in this PID namespace")
    proc = run_l0mem("watch", ["--pid", str(pid), "--duration", "0.2"], dict(os.environ))
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith(f"l0mem watch: process {pid} (") and "is a kernel thread" in line, line


def test_root_is_not_told_to_run_as_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    monkeypatch.setattr(pids_module.os, "geteuid", lambda: 0)
    text = pids_module.access_message("/proc/42/fdinfo", 42, str(tmp_path))
    assert "run as root" not in text and "not even root" in text
    monkeypatch.setattr(pids_module.os, "geteuid", lambda: os.stat(tmp_path / "42").st_uid + 1)
    assert "run as that user or root" in pids_module.access_message("/proc/42/fdinfo", 42, str(tmp_path))


def test_a_terminal_too_narrow_still_gets_its_words() -> None:
    proc = run_l0mem("info", [], sim.sim_env(devices=2), columns=5)
    assert proc.returncode == 0, proc.stderr
    assert "loader" in proc.stdout and "initialized by" in proc.stdout, proc.stdout
