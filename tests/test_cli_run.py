"""``l0mem run`` and ``l0mem watch`` end to end, with workloads on the simulated driver.

The workload (:data:`WORKLOAD`) allocates through ``l0mem.core`` on device 0
and makes each allocation resident on device 1, the step that mirrors under
``mirror=peer-resident``; it writes the simulator's ground truth (mirror
bytes, device bytes) to a file the test compares with. Host signals are
system-wide: the tests whose question is l0mem's sampling and analysis run
on the quiet host of the watched tree (tests/support/child_site/host_model.py,
mode ``watch``), where only the workload moves memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import sim
from tests.support.child_site.host_model import START_VAR
from tests.support.cli import REPO_ROOT, one_line, run_l0mem
from tests.support.own_memory import host_env
from tests.support.users import as_other_user

MIB = 1 << 20
GIB = 1 << 30

WORKLOAD = r"""
import json, os, sys, time
from l0mem.core import drivers
from tests.support.sim import SimControl

out, steps, step, pause, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
hold = float(os.environ.get("WORKLOAD_HOLD", "0"))
# Under --trace the loader loads the tracer, which forwards to the simulator.
ctl = SimControl(os.environ.get("L0MEM_TRACE_DRIVERS") or os.environ["ZE_ENABLE_ALT_DRIVERS"].split(",")[0])
driver = drivers()[0]
dev0, dev1 = driver.devices()[:2]
truth = []

def save(truth):
    # Whole or not at all: the floor's SIGTERM may come in the middle.
    with open(out + ".tmp", "w") as f:
        json.dump(truth, f)
    os.replace(out + ".tmp", out)

gate = os.environ.get("WORKLOAD_GATE")
while gate and not os.path.exists(gate):  # held until a watcher has its baseline
    time.sleep(0.01)
with driver.create_context([dev0, dev1]) as ctx:
    time.sleep(2 * pause)  # samples before any device memory
    bufs = []
    for i in range(steps):
        buf = ctx.allocate_device(dev0, step)
        ctx.make_resident(dev1, buf)
        bufs.append(buf)
        truth.append({"mirror": ctl.mirror_bytes(), "device": ctl.device_used(0)})
        save(truth)
        time.sleep(pause)
    time.sleep(hold)
    for buf in bufs:
        buf.close()
    time.sleep(2 * pause)
    truth.append({"mirror": ctl.mirror_bytes(), "device": ctl.device_used(0)})
save(truth)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workload") / "workload.py"
    path.write_text(WORKLOAD)
    return path


# Sysman on a real device counts every process's memory; the simulator does that
# across the processes that share this file (l0mem's Sysman reader is one of them).
SIM_STATE = os.path.join(tempfile.gettempdir(), f"l0mem-test-devices-{os.getpid()}.state")


def _env(host: str | None = "watch", **config: object) -> dict[str, str]:
    config.setdefault("shared_state", SIM_STATE)
    env = sim.sim_env(devices=2, **config)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return host_env(env, host) if host else env


def _workload_args(
    workload: Path,
    truth: Path,
    steps: int = 6,
    step: int = 32 * MIB,
    pause: float = 0.15,
    code: int = 0,
) -> list[str]:
    return [sys.executable, str(workload), str(truth), str(steps), str(step), str(pause), str(code)]


def _run(
    args: Sequence[str], env: Mapping[str, str], workload_args: Sequence[str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_l0mem("run", [*args, "--", *workload_args], env, timeout=timeout)


def test_the_workloads_exit_code_passes_through(workload: Path, tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    args = _workload_args(workload, truth, steps=1, pause=0.05, code=5)
    proc = _run(["--quiet", "--interval", "0.05"], _env(), args)
    assert proc.returncode == 5, proc.stderr
    assert json.loads(truth.read_text())[-1]["device"] == 0


@pytest.mark.parametrize("flag", ["--json", "--csv"])
def test_a_report_on_stdout_is_l0mems_alone_and_the_workloads_lines_go_to_stderr(flag: str) -> None:
    # What the workload prints is not in its command line (which the report holds).
    job = [sys.executable, "-c", "import sys; print('out' * 3); print('err' * 3, file=sys.stderr)"]
    proc = run_l0mem(
        "run", ["--quiet", "--interval", "0.05", flag, "-", "--", *job], dict(os.environ)
    )
    assert proc.returncode == 0, proc.stderr
    assert "outoutout" not in proc.stdout
    assert "outoutout" in proc.stderr and "errerrerr" in proc.stderr
    if flag == "--json":
        assert json.loads(proc.stdout)["command"] == job
    else:
        assert proc.stdout.splitlines()[0].startswith("t,pids,host_cost,")


def test_without_a_report_on_stdout_the_workload_keeps_it() -> None:
    job = [sys.executable, "-c", "print('workload out')"]
    proc = run_l0mem("run", ["--quiet", "--interval", "0.05", "--", *job], dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "workload out\n"


def test_a_command_not_found_is_127_in_one_line() -> None:
    proc = run_l0mem("run", ["--", "/nonexistent/l0mem-no-such-command"], dict(os.environ))
    assert proc.returncode == 127
    assert "not found" in one_line(proc, "run")


def _report(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert data["schema"].startswith("l0mem.watch/1.")
    return data


def test_the_host_cost_is_the_mirror_the_simulator_held(workload: Path, tmp_path: Path) -> None:
    truth_path, report = tmp_path / "truth.json", tmp_path / "run.json"
    args = _workload_args(workload, truth_path)
    env = _env(mirror="peer-resident")
    plot = tmp_path / "run.png"
    proc = _run(
        [
            "--quiet",
            "--interval",
            "0.05",
            "--json",
            str(report),
            "--csv",
            str(tmp_path / "run.csv"),
            "--plot",
            str(plot),
        ],
        env,
        args,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(truth_path.read_text())
    data = _report(report)
    peak_mirror = max(t["mirror"] for t in truth)
    assert peak_mirror == 6 * 32 * MIB
    # On the quiet host Shmem moves by the mirror alone: its peak is the simulator's.
    summary = data["summary"]
    assert summary["peaks"]["shmem_growth"]["bytes"] == peak_mirror
    # The host cost is the mirror plus the tree's own anonymous memory.
    rss = max(s["values"].get("tree.RssAnon", 0) for s in data["samples"])
    cost = summary["peaks"]["host_cost"]["bytes"]
    assert peak_mirror <= cost <= peak_mirror + rss
    # VmRSS never saw the mirror: the simulator's mirror pages are never mapped.
    assert summary["peaks"]["tree_vmrss_growth"]["bytes"] < peak_mirror
    assert data["exit"] == {"returncode": 0, "killed_by": None}
    # Untraced, Sysman's device names still say whose numbers these are: the simulator's
    # (the report, the answer and the plot said nothing of it).
    assert data["simulated"] is True and "SIMULATOR" in proc.stderr
    assert data["environment"]["ZESIM_MIRROR"] == "peer-resident"
    csv_lines = (tmp_path / "run.csv").read_text().splitlines()
    assert csv_lines[0].startswith("t,pids,host_cost,device_memory,")
    assert len(csv_lines) == 2 + len(data["samples"])
    assert plot.read_bytes().startswith(b"\x89PNG")
    # No DRM file on the simulator: device memory is Sysman's device-wide count,
    # read by l0mem's child process, which saw exactly what the workload held.
    assert "drm" in data["unavailable"] and "sysman" not in data["unavailable"]
    assert summary["device_source"] == "sysman"
    assert summary["peaks"]["device_memory"]["bytes"] == max(t["device"] for t in truth)
    used = [s["values"].get("sysman.0.used") for s in data["samples"]]
    assert data["baseline"]["values"]["sysman.0.used"] == 0
    assert max(u for u in used if u is not None) == 6 * 32 * MIB
    assert used[-1] == 0  # freed before the end, and seen so
    assert summary["verdict"] == "mirror"


def test_the_host_floor_stops_a_workload_that_grows_past_it(workload: Path, tmp_path: Path) -> None:
    report = tmp_path / "floor.json"
    # The quiet host starts at 64 GiB available and only the workload moves it:
    # its mirror, 32 MiB a step, 20 steps (640 MiB), crosses a floor 160 MiB below.
    env = {**_env(mirror="peer-resident"), START_VAR: str(64 * GIB)}
    floor = 64 * GIB - 160 * MIB
    args = _workload_args(workload, tmp_path / "truth.json", steps=20, pause=0.1)
    proc = _run(
        [
            "--quiet",
            "--interval",
            "0.05",
            "--grace",
            "3",
            "--host-floor",
            str(floor),
            "--json",
            str(report),
        ],
        env,
        args,
    )
    assert proc.returncode == 3, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem run: ")]
    assert len(line) == 1 and "below the floor" in line[0], proc.stderr
    data = _report(report)
    assert data["floor_stop"]["signal"] == "SIGTERM"
    assert data["exit"]["killed_by"] == "SIGTERM"
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert len(truth) < 20, "the workload ran to its end"
    # Stopped before the floor was crossed: the quiet host is the workload's own memory.
    lowest = min(s["values"]["meminfo.MemAvailable"] for s in data["samples"])
    assert lowest >= floor
    assert truth[-1]["mirror"] >= 64 * MIB  # it had grown toward the floor


def test_watch_follows_a_running_workload(workload: Path, tmp_path: Path) -> None:
    truth_path = tmp_path / "truth.json"
    env = _env(mirror="peer-resident")
    child = subprocess.Popen(
        _workload_args(workload, truth_path, steps=4, pause=0.2),
        env={**env, "ZESIM_MIRROR_RATIO": "0.5"},
        cwd=REPO_ROOT,
    )
    try:
        proc = run_l0mem(
            "watch", ["--pid", str(child.pid), "--interval", "0.05", "--json", "-"], env
        )
    finally:
        child.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert child.returncode == 0
    # The report on stdout: the summary goes to stderr.
    data = json.loads(proc.stdout)
    assert data["schema"].startswith("l0mem.watch/1.")
    assert data["mode"] == "watch" and data["pid"] == child.pid
    # The watched process's own environment, not l0mem's.
    assert data["environment"]["ZESIM_MIRROR_RATIO"] == "0.5"
    assert len(data["samples"]) >= 5
    # Not a terminal: one line per sample on stderr.
    assert sum(ln.startswith("l0mem watch: t=") for ln in proc.stderr.splitlines()) >= 5
    assert "verdict: " in proc.stderr


def test_watching_another_users_process_is_one_clear_line() -> None:
    # A process of root watched by nobody (as root: from a fork that became nobody).
    target = subprocess.Popen(["sleep", "60"])

    def watch() -> str:
        from click.testing import CliRunner

        from l0mem.cli import cli

        result = CliRunner().invoke(cli, ["watch", "--pid", str(target.pid)])
        return json.dumps({"code": result.exit_code, "stderr": result.stderr})

    try:
        if os.geteuid() != 0:
            got = json.loads(_watch_pid_1())  # the sleep is ours: pid 1 is root's
        else:
            # nobody may not read the interpreter's own files: every module the
            # command needs is imported here first, by watching as root.
            from click.testing import CliRunner

            from l0mem.cli import cli

            warm = ["watch", "--pid", str(target.pid), "--duration", "0.2", "--quiet"]
            assert CliRunner().invoke(cli, warm).exit_code == 0
            got = json.loads(as_other_user(watch))
    finally:
        target.kill()
        target.wait()
    assert got["code"] == 3, got
    lines = got["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l0mem watch: "), got
    assert "permission denied" in lines[0] and "/proc/" in lines[0], got


def _watch_pid_1() -> str:
    """Return what ``l0mem watch --pid 1`` says to a user who is not root."""
    proc = run_l0mem("watch", ["--pid", "1"], dict(os.environ))
    return json.dumps({"code": proc.returncode, "stderr": proc.stderr})


def test_a_process_that_cannot_be_read_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # As root every process can be read: the probe's refusal is made here.
    from click.testing import CliRunner

    import l0mem.probe
    from l0mem.cli import cli

    class Refused:
        def __init__(self, root: int, **kwargs: object) -> None:
            raise l0mem.probe.ProbeAccessError(
                f"cannot read /proc/{root}/fd: permission denied (x)"
            )

    monkeypatch.setattr(l0mem.probe, "TreeProber", Refused)
    result = CliRunner().invoke(cli, ["watch", "--pid", "1"])
    assert result.exit_code == 3, result.output
    assert result.stderr.strip() == "l0mem watch: cannot read /proc/1/fd: permission denied (x)"


def test_a_stop_signal_is_forwarded_and_the_samples_are_kept(
    workload: Path, tmp_path: Path
) -> None:
    report = tmp_path / "stopped.json"
    env = _env(mirror="peer-resident")
    env["WORKLOAD_HOLD"] = "60"
    args = _workload_args(workload, tmp_path / "truth.json", steps=2, pause=0.05)
    l0mem = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "l0mem",
            "run",
            "--quiet",
            "--interval",
            "0.05",
            "--json",
            str(report),
            "--",
            *args,
        ],
        env=env,
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "truth.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    l0mem.send_signal(signal.SIGTERM)
    _, stderr = l0mem.communicate(timeout=60)
    assert l0mem.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted by SIGTERM" in stderr
    data = _report(report)
    assert data["stop_signal"] == "SIGTERM"
    assert data["exit"]["killed_by"] == "SIGTERM"
    assert len(data["samples"]) >= 3


@pytest.mark.parametrize(
    ("first", "second", "gap"),
    [
        (signal.SIGINT, signal.SIGTERM, 0.0),
        (signal.SIGINT, signal.SIGINT, 0.05),
        (signal.SIGTERM, signal.SIGINT, 0.1),
        (signal.SIGTERM, signal.SIGHUP, 0.3),
    ],
)
def test_a_second_stop_signal_keeps_every_output(
    workload: Path, tmp_path: Path, first: int, second: int, gap: float
) -> None:
    # A double Ctrl-C, or ``timeout`` forwarding what it got: the first stops the
    # workload, the second comes while it ends or while the files are written.
    outputs = {"--json": tmp_path / "r.json", "--csv": tmp_path / "r.csv"}
    env = {**_env(mirror="peer-resident"), "WORKLOAD_HOLD": "60"}
    args = _workload_args(workload, tmp_path / "truth.json", steps=2, pause=0.05)
    l0mem = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "run", "--quiet", "--interval", "0.05",
         *[str(x) for pair in outputs.items() for x in pair], "--", *args],
        env=env, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "truth.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    l0mem.send_signal(first)
    time.sleep(gap)
    l0mem.send_signal(second)
    _, stderr = l0mem.communicate(timeout=60)
    # The code is the first signal handled (two sent at once may be handled in
    # either order), and the line and the report name the same one.
    assert l0mem.returncode in (128 + first, 128 + second), stderr
    name = signal.Signals(l0mem.returncode - 128).name
    assert f"interrupted by {name}" in stderr
    data = _report(outputs["--json"])
    assert data["stop_signal"] == name
    assert len(data["samples"]) >= 3
    assert len(outputs["--csv"].read_text().splitlines()) == 2 + len(data["samples"])
    assert "verdict: " in stderr  # the summary was shown too


@pytest.mark.parametrize(
    ("mirror", "ratio"),
    [("none", 1.0), ("peer-resident", 1.0), ("peer-resident", 0.5), ("dmabuf", 1.0), ("all", 1.5)],
)
def test_traced_verdict_and_slope_match_the_simulators_ground_truth(
    workload: Path, tmp_path: Path, mirror: str, ratio: float
) -> None:
    from l0mem.estimate import DEFAULT_CONFIG, classify

    truth_path, report = tmp_path / "truth.json", tmp_path / "run.json"
    # 512 MiB of device memory (at most 768 MiB of mirror): a sample can fall
    # inside a step (allocated, not yet resident, the mirror half made), so the
    # span must be wide enough for the fit to be sure.
    step, steps = 64 * MIB, 8
    args = _workload_args(workload, truth_path, steps=steps, step=step, pause=0.1)
    env = _env(mirror=mirror, mirror_ratio=ratio)
    proc = _run(["--quiet", "--trace", "--interval", "0.04", "--json", str(report)], env, args)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(truth_path.read_text())
    data = _report(report)
    summary = data["summary"]
    # The ground truth: the simulator's mirror per device byte at each step.
    held = truth[:-1]
    want = held[-1]["mirror"] / held[-1]["device"]
    # dmabuf mirrors only memory exported as a dma-buf, which this workload never does.
    assert want == (0.0 if mirror in ("none", "dmabuf") else ratio)
    assert summary["device_source"] == "trace"
    assert summary["peaks"]["device_memory"]["bytes"] == held[-1]["device"] == steps * step
    assert summary["verdict"] == classify(want, DEFAULT_CONFIG), summary["reason"]
    slope, err = summary["slope_mib_per_gib"], summary["uncertainty_mib_per_gib"]
    assert abs(slope - 1024 * want) <= max(err, 16), summary["reason"]
    # The trace counted exactly what was allocated and made resident on device 1.
    traced = {d["index"]: d for d in data["trace"]["devices"]}
    assert traced[0]["allocated_peak"] == steps * step
    assert traced[0]["resident_on_peak"] == {"1": steps * step}
    if want:
        # The simulator's mirror pages are never mapped: VmRSS misses them.
        assert summary["vmrss_would_miss"] is True
    # The answer says what to try when the host pays: here the residency on the peer.
    said = " ".join(proc.stderr.split())
    if summary["verdict"] in ("mirror", "partial"):
        assert (
            "what to do: the workload made 512 MiB resident on a peer: --no-peer-residency" in said
        )
    else:
        assert "what to do" not in said


def test_run_trace_inside_run_trace_changes_neither_result(workload: Path, tmp_path: Path) -> None:
    truth_path, outer, inner = (
        tmp_path / "truth.json",
        tmp_path / "outer.json",
        tmp_path / "inner.json",
    )
    step, steps = 32 * MIB, 4
    args = _workload_args(workload, truth_path, steps=steps, step=step, pause=0.1)
    opts = ["--quiet", "--trace", "--interval", "0.04"]
    nested = [sys.executable, "-m", "l0mem", "run", *opts, "--json", str(inner), "--", *args]
    proc = _run([*opts, "--json", str(outer)], _env(mirror="peer-resident"), nested)
    assert proc.returncode == 0, proc.stderr
    for report in (outer, inner):
        data = _report(report)
        traced = {d["index"]: d for d in data["trace"]["devices"]}
        assert traced[0]["allocated_peak"] == steps * step, report
        assert traced[0]["resident_on_peak"] == {"1": steps * step}, report
        # Each run's Sysman reader reaches the driver, not a tracer with nothing behind it.
        assert data["unavailable"].get("sysman") is None, (report, data["unavailable"])
        assert max(s["values"].get("sysman.0.used", 0) for s in data["samples"]) > 0, report


def _watch_from_the_start(
    args: Sequence[str], env: Mapping[str, str], report: Path, gate: Path
) -> subprocess.CompletedProcess[str]:
    """Watch the workload ``args`` starts, held until the watch has taken its first sample."""
    child = subprocess.Popen(args, env={**env, "WORKLOAD_GATE": str(gate)}, cwd=REPO_ROOT)
    try:
        watch = subprocess.Popen(
            [sys.executable, "-m", "l0mem", "watch", "--pid", str(child.pid), "--json", str(report)],
            env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert watch.stderr is not None
        lines = []
        for line in watch.stderr:
            lines.append(line)
            if line.startswith("l0mem watch: t="):
                gate.touch()
                break
        out, err = watch.communicate(timeout=120)
        return subprocess.CompletedProcess(watch.args, watch.returncode, out, "".join(lines) + err)
    finally:
        gate.touch()
        child.wait(timeout=60)


@pytest.mark.parametrize("command", ["run", "watch"])
@pytest.mark.parametrize(("mirror", "ratio"), [("all", 1.0), ("all", 0.5), ("peer-resident", 2.0)])
def test_untraced_verdict_and_slope_wherever_the_mirror_is_made(
    workload: Path, tmp_path: Path, command: str, mirror: str, ratio: float
) -> None:
    # Untraced, device memory is Sysman's count: under ``all`` the simulator fills
    # the mirror inside the allocation call, before the count moves; under
    # ``peer-resident`` in the residency call after it. Either way each step's
    # window must hold the whole mirror.
    from l0mem.estimate import classify

    truth_path, report = tmp_path / "truth.json", tmp_path / "report.json"
    env = _env(mirror=mirror, mirror_ratio=ratio)
    args = _workload_args(workload, truth_path, steps=8, step=64 * MIB, pause=0.15)
    if command == "run":
        proc = _run(["--quiet", "--json", str(report)], env, args)
    else:
        proc = _watch_from_the_start(args, env, report, tmp_path / "gate")
    assert proc.returncode == 0, proc.stderr
    summary = _report(report)["summary"]
    assert summary["device_source"] == "sysman"
    assert summary["verdict"] == classify(ratio), summary["reason"]
    assert abs(summary["slope_mib_per_gib"] - 1024 * ratio) <= 0.05 * 1024 * ratio


def test_no_peer_residency_removes_the_peer_resident_mirror(workload: Path, tmp_path: Path) -> None:
    truth_path, report = tmp_path / "truth.json", tmp_path / "run.json"
    args = _workload_args(workload, truth_path, steps=4, step=32 * MIB, pause=0.1)
    env = _env(mirror="peer-resident")
    # Not -q: the summary's trace lines say what was skipped.
    proc = _run(["--no-peer-residency", "--interval", "0.04", "--json", str(report)], env, args)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(truth_path.read_text())
    assert max(t["mirror"] for t in truth) == 0
    data = _report(report)
    assert data["options"]["no_peer_residency"] is True
    assert data["trace"]["skipped_calls"] == 4
    assert data["trace"]["skipped_bytes"] == 4 * 32 * MIB
    assert data["summary"]["verdict"] == "clean", data["summary"]["reason"]
    assert "skipped 4 zeContextMakeMemoryResident" in proc.stderr
    # The tracer saw the simulator's devices: labelled, never a hardware result.
    assert data["simulated"] is True and "SIMULATOR" in proc.stderr
    assert data["environment"]["ZESIM_MIRROR"] == "peer-resident"
    assert data["environment"]["ZE_ENABLE_ALT_DRIVERS"].endswith("libl0mem_trace.so")


SIM_LABEL = "SIMULATOR (l0mem's simulated driver: not a hardware result) "


@pytest.mark.parametrize("columns", [80, 120])
def test_the_answer_comes_first_and_nothing_is_cut_at_80_or_120_columns(
    workload: Path, tmp_path: Path, columns: int
) -> None:
    from l0mem.units import format_bytes

    report = tmp_path / "run.json"
    args = _workload_args(workload, tmp_path / "truth.json", pause=0.1)
    env = _env(mirror="peer-resident")
    runs = {
        q: run_l0mem("run", [*q, "--interval", "0.05", *more, "--", *args], env, columns=columns)
        for q, more in ((("-v",), ("--json", str(report))), (("-q",), ()))
    }
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr
    summary = _report(report)["summary"]
    full, alone = runs[("-v",)].stderr, runs[("-q",)].stderr
    full = "\n".join(ln for ln in full.splitlines() if not ln.startswith("l0mem run: t="))
    # The answer first, at most five lines; -q is the answer alone.
    # (Labelled first where the devices are the simulator's, as here.)
    first = full.splitlines()[0].removeprefix(SIM_LABEL)
    assert first.startswith(f"verdict: {summary['verdict']}, "), full
    assert 1 <= len(alone.splitlines()) <= 5
    assert alone.splitlines()[0].removeprefix(SIM_LABEL).startswith("verdict: "), alone
    assert "peaks" not in alone and "peaks" in full
    # Every verdict, number and reason of the report is whole on one line of the text.
    lines = full.splitlines()
    wanted = [summary["verdict"], summary["reason"]]
    if summary["verdict"] != "inconclusive":  # a busy CI host can leave the run undecided
        wanted.append(f"{summary['slope_mib_per_gib']:.0f} +/- ")
    wanted += [format_bytes(p["bytes"]) for p in summary["peaks"].values() if p.get("bytes")]
    for value in wanted:
        assert any(value in line for line in lines), (value, full)
    assert "…" not in full
    # A table is laid out to the width or stacked; a longer line is a sentence for the terminal to wrap.
    assert all(len(ln) <= columns for ln in lines if ln[:1] in set("┏┃┡│└")), full


@pytest.mark.parametrize(
    ("script", "code", "said"),
    [
        ("sleep 0.3; exit 3", 3, "the workload exited with 3; l0mem exits with 3"),
        (
            "sleep 0.3; kill -SEGV $$",
            139,
            "the workload was killed by SIGSEGV; l0mem exits with 139",
        ),
    ],
)
def test_the_workloads_own_exit_code_is_named_when_passed_on(
    script: str, code: int, said: str
) -> None:
    # Passed on silently, 3 reads as l0mem's "no device" and 1 as a finding.
    proc = run_l0mem("run", ["-qq", "--", "sh", "-c", script], host_env(sim.sim_env()))
    assert proc.returncode == code, proc.stderr
    assert f"l0mem run: {said}, as the workload did" in proc.stderr.splitlines()


def test_no_device_memory_is_advised_as_such_and_trace_only_where_it_was_not_used() -> None:
    from l0mem.estimate import DEFAULT_CONFIG
    from l0mem.estimate.advice import next_steps
    from l0mem.estimate.model import Sample
    from l0mem.watch.estimation import more_evidence

    idle = [Sample(0.1 * i, "idle", 0, {"host.available": 1 << 34}) for i in range(20)]
    for tracing in (False, True):
        advice = next_steps(idle, None, {}, DEFAULT_CONFIG, {}, more_evidence(tracing))
        assert advice.text.startswith("no device memory was seen"), advice.text
        assert ("--trace" in advice.text) is not tracing
        assert "no total of the host's memory" not in advice.text


def test_a_process_left_running_is_named_in_the_summary_and_the_report(tmp_path: Path) -> None:
    # The first process ends at once; the one it started sleeps on past --follow.
    pidfile = tmp_path / "pid"
    report = tmp_path / "run.json"
    # Its output away from l0mem's pipes, which the test reads to their end.
    job = f"sleep 30 >/dev/null 2>&1 & echo $! > {pidfile}"
    proc = run_l0mem(
        "run",
        ["--follow", "0.5", "--json", str(report), "--", "sh", "-c", job],
        host_env(os.environ),
    )
    try:
        left = int(pidfile.read_text())
        assert proc.returncode == 0, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if "left running, unwatched" in ln]
        assert len(lines) == 1 and lines[0].rstrip().endswith(f"pid {left}"), proc.stderr
        outlived = json.loads(report.read_text())["exit"]["outlived"]
        assert outlived["left_running"] == [left] and outlived["processes"] == 1, outlived
    finally:
        with_pid = pidfile.read_text().strip() if pidfile.exists() else ""
        if with_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(with_pid), signal.SIGKILL)


def _climbs(samples: Sequence[Mapping[str, Any]], key: str) -> int:
    """Return how many times ``key`` rose from 0 (device memory: one climb each)."""
    used = [s["values"].get(key) for s in samples]
    levels = [u for u in used if u is not None]
    return sum(1 for a, b in zip([0, *levels], levels, strict=False) if a == 0 and b > 0)


def test_repeat_runs_the_workload_again_into_one_report(workload: Path, tmp_path: Path) -> None:
    truth_path, report = tmp_path / "truth.json", tmp_path / "run.json"
    args = _workload_args(workload, truth_path, steps=4, pause=0.1)
    proc = _run(
        ["--quiet", "--interval", "0.05", "--repeat", "3", "--json", str(report)],
        _env(mirror="peer-resident"),
        args,
    )
    assert proc.returncode == 0, proc.stderr
    data = _report(report)
    assert data["options"]["repeat"] == 3
    assert data["exit"] == {"returncode": 0, "killed_by": None, "runs": 3}
    # Each run climbed from no device memory and freed it: three climbs in one series.
    assert _climbs(data["samples"], "sysman.0.used") == 3
    assert data["samples"][-1]["values"]["sysman.0.used"] == 0
    assert data["summary"]["verdict"] == "mirror"
    assert "runs made" not in proc.stderr
    # The details say how often it ran (not the answer: at most five lines).
    shown = run_l0mem("run", ["--interval", "0.05", "--repeat", "2", "--", *args],
                      _env(mirror="peer-resident"))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "the workload ran 2 time(s), one run after another" in shown.stderr


def test_repeat_stops_at_the_first_run_that_fails_and_says_so(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    proc = run_l0mem(
        "run",
        ["--quiet", "--repeat", "3", "--json", str(report), "--", "sh", "-c", "exit 5"],
        host_env(sim.sim_env()),
    )
    assert proc.returncode == 5, proc.stderr
    assert "l0mem run: 1 of 3 runs made: run 1 did not succeed whole" in proc.stderr
    data = _report(report)
    assert data["exit"]["runs"] == 1 and data["exit"]["returncode"] == 5


def test_one_run_says_nothing_of_repeats(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    job = [sys.executable, "-c", "pass"]
    proc = run_l0mem("run", ["--quiet", "--json", str(report), "--", *job], host_env(os.environ))
    assert proc.returncode == 0, proc.stderr
    data = _report(report)
    assert data["options"]["repeat"] == 1 and "runs" not in data["exit"]


@pytest.mark.parametrize("value", ["0", "-1", "101", "two", "1.5"])
def test_repeat_refuses_what_is_no_count_of_runs(value: str) -> None:
    proc = run_l0mem("run", ["--repeat", value, "--", "true"], dict(os.environ))
    assert proc.returncode == 2, proc.stderr
    assert "--repeat" in proc.stderr


def test_a_stop_signal_during_repeats_ends_them_and_keeps_the_runs_made(tmp_path: Path) -> None:
    report, marks = tmp_path / "run.json", tmp_path / "runs"
    job = ["sh", "-c", f"echo run >> {marks}; sleep 0.4"]
    l0mem = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "run", "--quiet", "--interval", "0.05", "--repeat", "5",
         "--json", str(report), "--", *job],
        env=host_env(dict(os.environ)), cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not marks.exists() or len(marks.read_text().splitlines()) < 2
    ):
        time.sleep(0.02)
    l0mem.send_signal(signal.SIGINT)
    _, stderr = l0mem.communicate(timeout=60)
    assert l0mem.returncode == 128 + signal.SIGINT, stderr
    data = _report(report)
    assert data["stop_signal"] == "SIGINT"
    assert data["exit"]["runs"] == 2
    assert len(marks.read_text().splitlines()) == 2  # no run started after the stop
    assert "runs made" not in stderr
