"""A driver that hangs or crashes in zeInit never takes l0mem with it (l0mem._ze.guard).

The simulator hangs or aborts where ZESIM_HANG_IN / ZESIM_ABORT_IN say
(tests/simdriver/README.md). Every command that loads Level Zero in its own
process tries ``zeInit`` in a child first: a hang ends in bounded time with
l0mem's one line and exit 6, a crash likewise, and a stop signal while it
waits ends the command with 128 + N and leaves no child behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from l0mem._ze.guard import DriverLoadError, check_drivers_load, timeout_from_env
from tests.support import sim
from tests.support.cli import REPO_ROOT, run_l0mem

# Each command that loads Level Zero in its own process, with arguments that reach zeInit.
COMMANDS = {
    "info": [],
    "p2p": ["--verify-only"],
    "allreduce": ["--sizes", "4096"],
    "bench": ["kernels"],
}


def _env(**faults: str) -> dict[str, str]:
    env = sim.sim_env(devices=2)
    env.update({f"ZESIM_{k.upper()}": v for k, v in faults.items()})
    return env


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("where", ["load", "init"])
def test_a_driver_that_aborts_ends_the_command_with_its_line(command: str, where: str) -> None:
    proc = run_l0mem(command, COMMANDS[command], _env(abort_in=where), timeout=60)
    assert proc.returncode == 6, proc.stderr
    line = _one_line(proc.stderr)
    name = " ".join([command, *COMMANDS[command]]) if command == "bench" else command
    assert line.startswith(f"l0mem {name}: a Level Zero driver crashed in zeInit"), line
    assert "SIGABRT" in line and f"aborting in {where}" in line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_driver_that_hangs_in_zeinit_ends_the_command_in_bounded_time(command: str) -> None:
    started = time.monotonic()
    env = {**_env(hang_in="init"), "L0MEM_DRIVER_TIMEOUT": "1.5"}
    proc = run_l0mem(command, COMMANDS[command], env, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 6, proc.stderr
    line = _one_line(proc.stderr)
    assert "did not return from zeInit within 1.5 s" in line and "L0MEM_DRIVER_TIMEOUT" in line
    assert took < 15, took


def _children_with(token: str) -> list[int]:
    """Return the processes whose environment holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_while_a_driver_hangs_ends_info_and_its_child(signum: int, code: int) -> None:
    token = f"L0MEM_TEST_TOKEN={uuid.uuid4()}"
    env = {**_env(hang_in="init"), "COLUMNS": "160", token.split("=")[0]: token.split("=")[1]}
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "info"],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        # Wait until the child that tries zeInit exists: the stop comes while it hangs.
        # l0mem, the child it runs info in (l0mem.cli._supervise), and the one trying zeInit.
        while len(_children_with(token)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_children_with(token)) >= 3, "the zeInit child never started"
        time.sleep(0.3)
        stopped = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=10)
        assert time.monotonic() - stopped < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, stderr
    assert "l0mem info: interrupted by" in stderr
    time.sleep(0.2)
    assert _children_with(token) == [], "the hung child was left behind"


def test_the_timeout_setting_is_checked() -> None:
    assert timeout_from_env({}) == 60.0
    assert timeout_from_env({"L0MEM_DRIVER_TIMEOUT": " 2.5 "}) == 2.5
    for bad in ("0", "-1", "abc", "nan", "inf", "1e999"):
        with pytest.raises(ValueError, match="L0MEM_DRIVER_TIMEOUT"):
            timeout_from_env({"L0MEM_DRIVER_TIMEOUT": bad})
    proc = run_l0mem("info", [], {**_env(), "L0MEM_DRIVER_TIMEOUT": "soon"})
    assert proc.returncode == 2 and "L0MEM_DRIVER_TIMEOUT='soon'" in proc.stderr, proc.stderr


def test_a_healthy_driver_passes_and_a_missing_loader_is_left_to_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import l0mem._ze.guard as guard

    monkeypatch.setattr(guard, "_passed", set())
    monkeypatch.setitem(os.environ, "ZE_ENABLE_ALT_DRIVERS", str(sim.build()))
    check_drivers_load(timeout=30)
    monkeypatch.setitem(os.environ, "L0MEM_ZE_LOADER", "/nonexistent/libze_loader.so.1")
    check_drivers_load(timeout=30)  # the child could not load it: the caller's own load says so
    monkeypatch.delitem(os.environ, "L0MEM_ZE_LOADER")
    monkeypatch.setitem(os.environ, "ZESIM_ABORT_IN", "init")
    with pytest.raises(DriverLoadError, match="SIGABRT"):
        check_drivers_load(timeout=30)


def test_the_audits_discovery_of_a_hung_driver_ends_in_bounded_time() -> None:
    started = time.monotonic()
    env = {**_env(hang_in="init"), "L0MEM_DRIVER_TIMEOUT": "1.5"}
    proc = run_l0mem("audit", ["--setups", "l0"], env, timeout=60)
    assert proc.returncode == 6, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "device discovery (discover-l0) did not finish in time" in said, said
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("code", [0, 5])
def test_a_driver_that_ends_the_process_in_zeinit_is_a_crash(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # exit() inside zeInit, even exit(0): the child never says that zeInit returned.
    import l0mem._ze.guard as guard

    monkeypatch.setattr(guard, "_passed", set())
    monkeypatch.setattr(guard, "_CHILD", f"import os; os._exit({code})")
    with pytest.raises(DriverLoadError, match=f"ended with code {code} inside zeInit"):
        check_drivers_load(timeout=30)


def test_a_bad_timeout_setting_stops_the_audit_before_it_starts() -> None:
    proc = run_l0mem("audit", ["--setups", "l0"], {**_env(), "L0MEM_DRIVER_TIMEOUT": "-3"})
    assert proc.returncode == 2 and "L0MEM_DRIVER_TIMEOUT='-3'" in proc.stderr, proc.stderr


def test_when_every_discovery_fails_the_audit_still_writes_its_report(tmp_path: Path) -> None:
    # The exit table promises the report for a discovery that failed: no set-up ran,
    # the machine's fingerprint is there, and the line says why.
    out = tmp_path / "audit.json"
    # No SYCL device either (the CPU device the tests' SYCL runtime offers is left out).
    env = {
        **_env(hang_in="init"),
        "L0MEM_DRIVER_TIMEOUT": "1.5",
        "ONEAPI_DEVICE_SELECTOR": "opencl:fpga",
    }
    proc = run_l0mem("audit", ["--json", str(out)], env, timeout=60)
    assert proc.returncode == 6, proc.stderr
    assert "no device to audit" in proc.stderr and "did not finish in time" in proc.stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["runs"] == []
    assert "host" in data["fingerprint"]


def _stop_while_hung(
    command: str, where: str, signals: list[int], wait: float = 3.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Start ``command`` on a driver that hangs in ``where``, send ``signals``; return it and how long it took to end."""
    args = [*COMMANDS[command], "--backend", "l0"] if command != "info" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", command, *args],
        env=_env(hang_in=where),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(wait)
    assert proc.poll() is None, proc.communicate()
    sent = time.monotonic()
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(0.3)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, out, err
    ), time.monotonic() - sent


@pytest.mark.parametrize(
    ("command", "where", "signum"),
    [
        ("p2p", "alloc", signal.SIGINT),
        ("allreduce", "alloc", signal.SIGTERM),
        ("bench", "free", signal.SIGINT),
        ("p2p", "copy", signal.SIGTERM),
    ],
)
def test_a_driver_that_hangs_in_a_call_never_makes_a_command_unstoppable(
    command: str, where: str, signum: int
) -> None:
    from l0mem.cli._signals import UNWIND_S

    proc, took = _stop_while_hung(command, where, [signum])
    assert proc.returncode == 128 + signum, proc.stderr
    name = "bench kernels" if command == "bench" else command
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem")]
    assert len(lines) == 1 and lines[0].startswith(f"l0mem {name}: interrupted by "), proc.stderr
    assert "the driver was still in a call" in lines[0], lines[0]
    assert "no report was written" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    # It waited for the command to free its memory, then ended without the driver.
    assert UNWIND_S * 0.9 <= took < UNWIND_S + 5


def test_a_second_stop_ends_a_command_hung_in_the_driver_at_once() -> None:
    from l0mem.cli._signals import UNWIND_S

    proc, took = _stop_while_hung("p2p", "alloc", [signal.SIGINT, signal.SIGTERM])
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr
    assert "the driver was still in a call" in proc.stderr
    assert took < UNWIND_S / 2


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("p2p", "alloc"),
        ("allreduce", "alloc"),
        ("bench", "free"),
        ("p2p", "free"),
        ("p2p", "copy"),
        ("allreduce", "copy"),
    ],
)
def test_a_driver_that_aborts_in_a_later_call_ends_the_command_with_its_line(
    command: str, where: str
) -> None:
    # zeInit came back in the guard's child; the abort comes in the command's own call.
    args = [*COMMANDS[command], "--backend", "l0"]
    proc = run_l0mem(command, args, _env(abort_in=where), timeout=60)
    assert proc.returncode == 6, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem")]
    name = "bench kernels" if command == "bench" else command
    assert len(lines) == 1 and lines[0].startswith(
        f"l0mem {name}: the driver or runtime crashed"
    ), proc.stderr
    assert "SIGABRT" in lines[0] and "Traceback" not in proc.stderr


def _worker(pid: int, deadline: float) -> int:
    """Return the pid of the child ``pid`` runs its command in, once it exists."""
    import psutil

    while time.monotonic() < deadline:
        kids = psutil.Process(pid).children()
        if kids:
            return kids[0].pid
        time.sleep(0.05)
    raise AssertionError("the command's child never started")


def test_a_command_killed_by_sigkill_still_gets_its_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "p2p", "--verify-only", "--backend", "l0"],
        env=_env(hang_in="alloc"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        child = _worker(proc.pid, time.monotonic() + 30)
        time.sleep(2.0)
        os.kill(child, signal.SIGKILL)  # as the OOM killer does
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert "l0mem p2p: l0mem's process was killed by SIGKILL" in err


def test_ctrl_c_at_a_terminal_is_one_stop_not_two() -> None:
    # The terminal sends SIGINT to the whole foreground group, l0mem's child included: the
    # parent must not pass it on as well, or the child would take it for a second stop and
    # end at once instead of freeing its memory first (UNWIND_S while the driver hangs).
    import pty

    from l0mem.cli._signals import UNWIND_S

    cmd = [sys.executable, "-m", "l0mem", "p2p", "--verify-only", "--backend", "l0"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.chdir(REPO_ROOT)
        os.execve(cmd[0], cmd, _env(hang_in="alloc"))
    out = b""
    try:
        time.sleep(3.0)
        sent = time.monotonic()
        os.write(fd, b"\x03")  # Ctrl-C, as typed
        deadline = sent + UNWIND_S + 15
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        took = time.monotonic() - sent
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "the driver was still in a call" in text, text
    assert took >= UNWIND_S * 0.9, took


@pytest.mark.parametrize("how", ["parent", "group"])
@pytest.mark.parametrize("command", ["p2p", "allreduce"])
def test_a_command_stopped_and_continued_goes_on_to_its_end(command: str, how: str) -> None:
    # kill -STOP / -CONT of l0mem (how="parent"), or Ctrl-Z and fg (the whole group):
    # the wait for the child came back with no signal asked for, which l0mem passed on
    # and died of (exit 70, the child ended by SIGTERM).
    sizes = ["--sizes", "4KiB,16MiB", "--reps", "40", "--backend", "l0"]
    args = [sys.executable, "-m", "l0mem", command, "-q", *sizes]
    proc = subprocess.Popen(
        args, env=_env(), cwd=REPO_ROOT, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _worker(proc.pid, time.monotonic() + 30)
        for stop in (signal.SIGSTOP, signal.SIGTSTP):
            time.sleep(0.5)
            if how == "parent":
                os.kill(proc.pid, stop)
                time.sleep(0.3)
                os.kill(proc.pid, signal.SIGCONT)
            else:
                os.killpg(proc.pid, stop)
                time.sleep(0.3)
                os.killpg(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "interrupted" not in err, err
