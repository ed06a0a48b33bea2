"""Sysman's device memory for run and watch, read by a child process (l0mem/watch/sysman.py).

The reader is tested against small stand-in children (what a child that
answers, answers late, gives up or dies looks like to the watcher) and end to
end: ``l0mem run`` on the simulated driver, whose Sysman counts every
process's memory when they share a state file (tests/simdriver/shared.c), as
a real device does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from l0mem.watch.sysman import SysmanReader, child_environment
from tests.support import sim
from tests.support.cli import REPO_ROOT, run_l0mem

MIB = 1 << 20
TAG = "l0mem.watch.sysman"


def _fake(body: str) -> list[str]:
    """Return the command of a stand-in child: the header, then ``body`` per request."""
    return [sys.executable, "-c", "import json, sys, time\n" + body]


ANSWERS = """
print(json.dumps({"devices": 2}), flush=True)
for line in sys.stdin:
    i = int(line)
    print(json.dumps({"id": i, "used": {"0": 1000 + i, "1": 7}}), flush=True)
"""


def _read_until_ready(reader: SysmanReader) -> tuple[dict[str, int], str | None]:
    reader.wait_ready(20)
    return reader.read()


def test_each_sample_gets_the_answer_to_its_own_request() -> None:
    reader = SysmanReader(dict(os.environ), command=_fake(ANSWERS))
    try:
        assert _read_until_ready(reader) == ({"sysman.0.used": 1000, "sysman.1.used": 7}, None)
        assert reader.read() == ({"sysman.0.used": 1001, "sysman.1.used": 7}, None)
    finally:
        reader.close()


def test_a_child_still_starting_is_unavailable_not_zero() -> None:
    reader = SysmanReader(dict(os.environ), command=_fake("time.sleep(30)"))
    try:
        values, why = reader.read()
        assert values == {} and why == "Sysman's reader is starting"
    finally:
        started = time.monotonic()
        reader.close()
        assert time.monotonic() - started < 10  # killed after the grace, not waited on


def test_a_late_answer_leaves_that_sample_without_sysman() -> None:
    late = """
print(json.dumps({"devices": 1}), flush=True)
for line in sys.stdin:
    time.sleep(1.0)
    print(json.dumps({"id": int(line), "used": {"0": 5}}), flush=True)
"""
    reader = SysmanReader(dict(os.environ), command=_fake(late))
    try:
        values, why = _read_until_ready(reader)
        assert values == {} and why is not None and "did not answer" in why
        time.sleep(1.5)
        # The answer came in the meantime: the next sample takes it, no request piles up.
        assert reader.read() == ({"sysman.0.used": 5}, None)
    finally:
        reader.close()


def test_a_child_that_gives_up_says_why() -> None:
    reader = SysmanReader(
        dict(os.environ),
        command=_fake('print(json.dumps({"unavailable": "no Level Zero loader"}), flush=True)'),
    )
    try:
        assert _read_until_ready(reader) == ({}, "Sysman: no Level Zero loader")
        assert reader.read() == ({}, "Sysman: no Level Zero loader")
    finally:
        reader.close()


def test_a_child_that_dies_makes_sysman_unavailable_without_raising() -> None:
    once = """
print(json.dumps({"devices": 1}), flush=True)
line = sys.stdin.readline()
print(json.dumps({"id": int(line), "used": {"0": 3}}), flush=True)
"""
    reader = SysmanReader(dict(os.environ), command=_fake(once))
    try:
        assert _read_until_ready(reader) == ({"sysman.0.used": 3}, None)
        time.sleep(0.3)
        assert reader.read() == ({}, "Sysman's reader ended")
        assert reader.read() == ({}, "Sysman's reader ended")
    finally:
        reader.close()


def test_a_child_that_cannot_start_is_one_reason() -> None:
    reader = SysmanReader(dict(os.environ), command=["/nonexistent/l0mem-sysman"])
    values, why = reader.read()
    assert values == {} and why is not None and why.startswith("Sysman's reader could not start")
    reader.close()


def test_the_child_gets_the_workloads_driver_settings_and_never_the_tracer() -> None:
    base = {"PATH": "/bin", "ZE_AFFINITY_MASK": "0,1", "ZESIM_MIRROR": "none", "HOME": "/h"}
    workload = {
        "ZE_AFFINITY_MASK": "1",
        "ZE_ENABLE_ALT_DRIVERS": "/x/" + "a" * 600 + ".so",  # in full, not cut as a report does
        "L0MEM_TRACE_DIR": "/tmp/t",
        "OTHER": "not a driver setting",
    }
    env = child_environment(base, workload)
    assert env["ZE_AFFINITY_MASK"] == "1"
    assert env["ZE_ENABLE_ALT_DRIVERS"] == workload["ZE_ENABLE_ALT_DRIVERS"]
    assert "ZESIM_MIRROR" not in env  # the workload's driver settings replace l0mem's own
    assert "L0MEM_TRACE_DIR" not in env and "OTHER" not in env
    assert env["PATH"] == "/bin" and env["ZES_ENABLE_SYSMAN"] == "1"
    assert child_environment({"L0MEM_TRACE_DRIVERS": "x", "A": "1"}) == {
        "A": "1",
        "ZES_ENABLE_SYSMAN": "1",
    }


# ------------------------------------------------------------------ end to end

HOLDER = r"""
import os, sys, time
from l0mem.core import drivers

driver = drivers()[0]
dev0, dev1 = driver.devices()[:2]
mode = sys.argv[1]
with driver.create_context([dev0, dev1]) as ctx:
    time.sleep(0.6)
    buf = ctx.allocate_device(dev0, 48 << 20)
    if mode == "kill-reader":
        # What a crash of Sysman's reader looks like to l0mem: the reader is
        # the other child of this workload's parent (l0mem).
        parent = os.getppid()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
                ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if b"l0mem.watch.sysman" in cmd and ppid == parent:
                os.kill(int(pid), 9)
    time.sleep(1.2)
    buf.close()
    time.sleep(0.4)
sys.exit(int(sys.argv[2]))
"""


def _env(tmp_path: Path, **config: object) -> dict[str, str]:
    env = sim.sim_env(devices=2, shared_state=str(tmp_path / "devices.state"), **config)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _run(tmp_path: Path, env: dict[str, str], *args: str, mode: str = "hold", code: int = 0) -> Any:
    holder = tmp_path / "holder.py"
    holder.write_text(HOLDER)
    report = tmp_path / "run.json"
    proc = run_l0mem(
        "run",
        [
            "--quiet",
            "--interval",
            "0.1",
            "--json",
            str(report),
            *args,
            "--",
            sys.executable,
            str(holder),
            mode,
            str(code),
        ],
        env,
    )
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def _processes_with(word: bytes, env: bytes = b"") -> list[int]:
    """Return the pids whose command line holds ``word`` and whose environment holds ``env``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes() if env else b""
        except OSError:
            continue
        if word in cmd and env in environ:
            found.append(int(pid))
    return found


def _readers_of(state: str) -> list[int]:
    """Return the pids of Sysman readers started with the simulator state file ``state``."""
    return _processes_with(TAG.encode(), f"ZESIM_SHARED_STATE={state}".encode())


def test_run_reads_the_devices_memory_through_sysman(tmp_path: Path) -> None:
    env = _env(tmp_path)
    proc, data = _run(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    used = [s["values"].get("sysman.0.used") for s in data["samples"]]
    assert data["baseline"]["values"]["sysman.0.used"] == 0
    assert max(u for u in used if u is not None) == 48 * MIB  # the simulator's count, exact
    assert used[-1] == 0
    assert all(s["values"].get("sysman.1.used") == 0 for s in data["samples"])
    assert data["summary"]["device_source"] == "sysman"
    assert data["options"]["sysman"] is True
    assert _readers_of(env["ZESIM_SHARED_STATE"]) == []  # ended with the run
    # Sysman's devices are the simulator's: the numbers are labelled so, untraced too.
    assert data["simulated"] is True


def test_the_reader_names_the_devices_the_child_read(tmp_path: Path) -> None:
    named = _fake(
        'print(json.dumps({"devices": 2, "names": ["l0mem simulated GPU 0", "x"]}), flush=True)\n'
        "for line in sys.stdin:\n"
        '    print(json.dumps({"id": int(line), "used": {"0": 1}}), flush=True)\n'
    )
    reader = SysmanReader(dict(os.environ), command=named)
    try:
        _read_until_ready(reader)
        assert reader.names == ("l0mem simulated GPU 0", "x")
    finally:
        reader.close()
    bare = SysmanReader(dict(os.environ), command=_fake(ANSWERS))  # an older child: no names
    try:
        _read_until_ready(bare)
        assert bare.names == ()
    finally:
        bare.close()


def test_without_sysman_the_signal_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    proc, data = _run(tmp_path, _env(tmp_path, sysman=0))
    assert proc.returncode == 0, proc.stderr
    assert not any(k.startswith("sysman.") for s in data["samples"] for k in s["values"])
    assert "Sysman" in data["unavailable"]["sysman"]
    assert data["summary"]["device_source"] is None
    proc, data = _run(tmp_path, _env(tmp_path), "--no-sysman")
    assert proc.returncode == 0, proc.stderr
    assert data["unavailable"]["sysman"] == "not read (--no-sysman)"
    assert data["options"]["sysman"] is False


def test_a_reader_killed_mid_run_leaves_the_run_and_its_exit_code_whole(tmp_path: Path) -> None:
    proc, data = _run(tmp_path, _env(tmp_path), mode="kill-reader", code=7)
    assert proc.returncode == 7, proc.stderr
    values = [s["values"] for s in data["samples"]]
    assert any("sysman.0.used" in v for v in values)  # read before the kill
    assert "sysman.0.used" not in values[-1]  # never a 0 made up after it
    assert len(values) >= 10


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL])
def test_no_reader_outlives_l0mem(tmp_path: Path, signum: int) -> None:
    env = _env(tmp_path)
    holder = tmp_path / "holder.py"
    holder.write_text(HOLDER.replace("time.sleep(1.2)", "time.sleep(30)"))
    l0mem = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "l0mem",
            "run",
            "--quiet",
            "--",
            sys.executable,
            str(holder),
            "hold",
            "0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not _readers_of(env["ZESIM_SHARED_STATE"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _readers_of(env["ZESIM_SHARED_STATE"]), "the reader never started"
        time.sleep(0.5)
        os.kill(l0mem.pid, signum)
        l0mem.wait(30)
        deadline = time.monotonic() + 10
        while _readers_of(env["ZESIM_SHARED_STATE"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _readers_of(env["ZESIM_SHARED_STATE"]) == []
    finally:
        l0mem.kill()
        l0mem.wait(30)
        for pid in _processes_with(str(holder).encode()):  # a SIGKILLed l0mem forwards nothing
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("command", ["run", "watch"])
def test_a_driver_hung_in_zeinit_is_named_while_it_is_awaited(tmp_path: Path, command: str) -> None:
    # Sysman's reader hangs in zeInit: the command says what it waits for after a
    # moment (it sat silent for the whole wait), then goes on without the count.
    env = {**_env(tmp_path), "ZESIM_HANG_IN": "init"}
    report = tmp_path / "report.json"
    # watch reads the driver settings from the watched process: it has the hang too.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(90)"], env=env)
    target = (
        ["--", sys.executable, "-c", "pass"]
        if command == "run"
        else ["--duration", "0.5", "--pid", str(sleeper.pid)]
    )
    try:
        started = time.monotonic()
        proc = run_l0mem(command, ["--interval", "0.1", "--json", str(report), *target], env, 90)
        took = time.monotonic() - started
        quiet = run_l0mem(command, ["--quiet", *target], env, 90)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0, proc.stderr
    waits = [ln for ln in proc.stderr.splitlines() if "has not loaded the Level Zero driver" in ln]
    assert len(waits) == 1, proc.stderr
    assert waits[0].startswith(f"l0mem {command}: Sysman's reader"), waits[0]
    assert "--no-sysman" in waits[0] and "without its device memory count" in waits[0]
    data = json.loads(report.read_text())
    assert "sysman" in data["unavailable"], data["unavailable"]
    assert took < 40, took
    assert quiet.returncode == 0, quiet.stderr
    assert "has not loaded" not in quiet.stderr, quiet.stderr


@pytest.mark.parametrize(("command", "signum"), [("run", signal.SIGINT), ("watch", signal.SIGTERM)])
def test_a_stop_while_the_driver_hangs_in_zeinit_ends_at_once_and_starts_nothing(
    tmp_path: Path, command: str, signum: int
) -> None:
    env = {**_env(tmp_path), "ZESIM_HANG_IN": "init", "COLUMNS": "160"}
    report = tmp_path / "report.json"
    started = tmp_path / "started"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(90)"], env=env)
    target = (
        ["--", sys.executable, "-c", f"open({str(started)!r}, 'w').close()"]
        if command == "run"
        else ["--pid", str(sleeper.pid)]
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", command, "--json", str(report), *target],
        env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the wait is named after a second: it is under way
        assert "has not loaded the Level Zero driver" in line, line
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        sleeper.kill()
        sleeper.wait()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert took < 3, took  # it waited the whole 10 s before
    assert not started.exists()  # the workload was never started
    data = json.loads(report.read_text())
    assert data["stop_signal"] == signal.Signals(signum).name, data["stop_signal"]
