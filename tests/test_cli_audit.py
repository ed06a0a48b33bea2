"""``l0mem audit`` end to end: usage errors, outputs, exit codes, and Ctrl-C.

The audits whose verdicts decide an exit code or a report's content run their
children on a quiet host (tests/support/own_memory.py): the samples carry the
simulator's ground truth and the system-wide signals move with the child's own
memory alone, so other processes on the machine cannot change the verdict.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from l0mem.audit import read_json
from l0mem.audit.runner import CHILD_MODULE
from l0mem.cli.audit import audit, parse_size
from tests.support import sim
from tests.support.own_memory import assert_mirrored, host_env, steps_up

ROOT = Path(__file__).resolve().parent.parent


def _cli(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "l0mem", "audit", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _one_line_error(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.startswith("l0mem audit: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "lots"], "bad size"),
        (["--setups", "l0,bogus"], "unknown set-up 'bogus'"),
        (["--env", "NOEQUALS"], "expected KEY=VALUE"),
        (["--env", "1BAD=x"], "not an environment variable name"),
        (["--plot", "out.txt"], "must end in .png or .svg"),
        (["--floor", "150%"], "percentage"),
        (["--steps", "2"], "2 is not in the range"),
        (["--sycl-device", "bogus:gpu"], "unknown backend"),
        (["--device", "x"], "expected a Level Zero device index as `l0mem info` lists it"),
        (["--device", "0,opencl:cpu"], "(a SYCL device is --sycl-device)"),
        (["--device", "-1"], "got '-1'"),
        (["--device", "1", "--device", "0,1"], "device 1 given twice"),
        (["--device", ","], "',' names no device"),
    ],
)
def test_usage_errors_exit_2_before_anything_runs(args: list[str], message: str) -> None:
    result = CliRunner().invoke(audit, args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_device_takes_indices_repeated_or_as_comma_lists() -> None:
    from l0mem.cli.audit import device_indices

    assert device_indices(()) == ()
    assert device_indices(("2", " 0 , 1 ")) == (2, 0, 1)


def test_a_device_index_no_device_has_is_one_line_and_exit_3(tmp_path: Path) -> None:
    # As in every command: not a quiet skip of the Level Zero set-ups, and nothing runs.
    out = tmp_path / "r.json"
    args = ["--setups", "l0,l0-dmabuf", "--device", "0,7", "--json", str(out)]
    result = _cli(args, sim.sim_env(devices=2))
    assert result.returncode == 3, result.stderr
    line = _one_line_error(result.stderr)
    assert line == "l0mem audit: error: no Level Zero device 7: this machine has 2 (0..1)"
    assert not out.exists()


def test_parse_size_accepts_binary_units() -> None:
    assert parse_size("4GiB") == 4 << 30
    assert parse_size("512M") == 512 << 20
    assert parse_size("1.5g") == 3 << 29
    assert parse_size("4096") == 4096
    with pytest.raises(ValueError):
        parse_size("4 parsecs")


def test_no_device_at_all_is_one_line_and_exit_3(tmp_path: Path) -> None:
    env = sim.sim_env(devices=0)
    env["OCL_ICD_FILENAMES"] = str(tmp_path / "no-such-icd.so")
    result = _cli(["--json", str(tmp_path / "r.json")], env)
    assert result.returncode == 3, result.stderr
    assert "no device to audit" in _one_line_error(result.stderr)
    assert not (tmp_path / "r.json").exists()


def test_every_setup_skipped_writes_the_reasons_and_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = _cli(["--setups", "l0-multi", "--json", str(out)], sim.sim_env(devices=1))
    assert result.returncode == 3, result.stderr
    (run,) = read_json(out).runs
    assert run.status == "skipped" and "at least 2" in (run.reason or "")
    assert "at least 2" in result.stdout


def test_full_audit_writes_json_junit_plot_and_fails_on_mirror(tmp_path: Path) -> None:
    paths = {
        "--json": tmp_path / "a.json",
        "--junit": tmp_path / "a.xml",
        "--plot": tmp_path / "a.svg",
    }
    args = ["--setups", "l0,l0-peer-resident", "--size", "512MiB", "--steps", "8", "--settle", "0"]
    args += ["--fail-on-mirror"] + [str(x) for pair in paths.items() for x in pair]
    result = _cli(args, host_env(sim.sim_env(mirror="peer-resident")))
    report = read_json(paths["--json"])
    runs = {r.setup: r for r in report.runs}
    assert_mirrored(runs["l0"], 0.0)
    assert_mirrored(runs["l0-peer-resident"], 1.0)
    assert runs["l0"].result is not None and runs["l0"].result.verdict == "clean"
    peer = runs["l0-peer-resident"].result
    assert peer is not None and peer.verdict == "mirror"
    assert result.returncode == 1, result.stderr
    assert report.complete and report.simulated
    assert "SIMULATOR" in result.stdout
    assert (
        "VmRSS alone would have missed the host memory taken by: l0-peer-resident" in result.stdout
    )
    # JUnit: the mirror is a failure, the clean set-up passes.
    suite = ET.parse(paths["--junit"]).getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["l0-peer-resident"].find("failure") is not None
    assert cases["l0"].find("failure") is None
    assert "<svg" in paths["--plot"].read_text()
    # The simulator opens no DRM device file, so the DRM signals are named as missing.
    assert all("drm" in r.unavailable for r in report.runs)
    assert "not available here: " in result.stdout and "drm (" in result.stdout


def _run_children(parent: psutil.Process) -> list[psutil.Process]:
    found = []
    for p in parent.children(recursive=True):
        try:
            cmdline = p.cmdline()
        except psutil.Error:
            continue
        if CHILD_MODULE in cmdline and "run" in cmdline:
            found.append(p)
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_frees_device_memory_writes_partial_report_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    args = ["--setups", "l0-peer-resident,l0", "--size", "512MiB", "--steps", "16"]
    args += ["--settle", "0.4", "--json", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "audit", *args],
        env=sim.sim_env(mirror="peer-resident"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job would have
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        while not _run_children(parent):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the audit never started a set-up"
            time.sleep(0.05)
        # Idle samples take 2 s at this settle time; interrupt a few steps into allocating.
        time.sleep(3.5)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    report = read_json(out)
    assert report.complete is False
    (run,) = report.runs  # the second set-up never started
    assert run.status == "interrupted"
    alloc = steps_up(run.samples)
    assert alloc, "the interrupt came before any allocation"
    # The child freed every allocation it made (one per step) and said so...
    assert run.reason is not None
    assert f"freed {len(alloc)} allocation(s)" in run.reason
    # ...and the device's own count went back to its idle value.
    idle = [s for s in run.samples if s.phase == "idle"]
    freed = [s for s in run.samples if s.phase == "freed"]
    assert freed and freed[-1].values["sysman.0.used"] == idle[0].values["sysman.0.used"]
    assert alloc[-1].values["sysman.0.used"] > idle[0].values["sysman.0.used"]
    assert not _group_alive(proc.pid), "a process of the audit outlived it"
    assert "l0-peer-resident" in stdout


def test_help_lists_setups_and_exit_codes() -> None:
    result = CliRunner().invoke(audit, ["--help"])
    assert result.exit_code == 0
    for text in ("l0-peer-resident", "sycl-single", "--fail-on-mirror", "--remedies"):
        assert text in result.output
    flat = " ".join(result.output.split())  # the epilog wraps anywhere
    for text in ("128+N", "SIGHUP 129", "SIGINT (Ctrl-C) 130", "SIGTERM 143", "--no-floor"):
        assert text in flat


@pytest.mark.parametrize("floor", ["99%", "above-available"])
def test_floor_above_available_stops_early_and_kills_nothing(tmp_path: Path, floor: str) -> None:
    from l0mem.probe import mem_available

    if floor == "above-available":
        floor = str(mem_available() + (4 << 30))
    out = tmp_path / "r.json"
    args = ["--setups", "l0,l0-dmabuf", "--size", "256MiB", "--steps", "4", "--floor", floor]
    args += ["--fail-on-mirror", "--json", str(out)]
    result = _cli(args, sim.sim_env(mirror="all"))
    assert "Traceback" not in result.stderr
    # Nothing measured, for want of host memory: exit 3, with the report written.
    assert result.returncode == 3, result.stderr
    report = read_json(out)
    assert not report.complete
    assert [r.setup for r in report.runs] == ["l0", "l0-dmabuf"]
    for run in report.runs:
        assert run.status == "stopped-early" and run.samples == []
        assert run.reason is not None and "killed" not in run.reason
        assert "below the floor" in run.reason and "no step was taken" in run.reason
        assert f"{run.setup}: stopped-early: safety guard: MemAvailable" in result.stdout
    assert "killed" not in result.stdout + result.stderr


def _report_of(*runs: Any) -> Any:
    from tests.test_analysis import synthetic_report

    return synthetic_report(list(runs))


def test_exit_code_any_failed_setup_is_a_driver_error() -> None:
    from l0mem.cli.audit import exit_code
    from tests.test_analysis import synthetic_run

    ok = synthetic_run(0.0, setup="l0")
    failed = synthetic_run(0.0, setup="l0-dmabuf", status="failed", reason="DEVICE_LOST")
    assert exit_code(_report_of(ok), fail_on_mirror=True) == 0
    assert exit_code(_report_of(ok, failed), fail_on_mirror=False) == 6
    assert exit_code(_report_of(failed), fail_on_mirror=False) == 6


def test_exit_code_fail_on_mirror_skips_host_memory_devices() -> None:
    from l0mem.cli.audit import exit_code
    from tests.test_analysis import synthetic_run

    cpu = synthetic_run(1.0, setup="sycl", host_memory=True)
    gpu = synthetic_run(1.0, setup="l0")
    assert exit_code(_report_of(cpu), fail_on_mirror=True) == 0
    assert exit_code(_report_of(cpu, gpu), fail_on_mirror=True) == 1
    assert exit_code(_report_of(cpu, gpu), fail_on_mirror=False) == 0


def test_unavailable_signals_are_listed_once_or_per_run() -> None:
    from l0mem.cli.audit import unavailable_lines
    from tests.test_analysis import synthetic_run

    gaps = {"cgroup": "no cgroup v2 memory controller", "meminfo.GPUActive": "not reported"}
    same = [synthetic_run(setup=s, unavailable=gaps) for s in ("l0", "l0-dmabuf")]
    assert unavailable_lines(same) == [
        "not available here: cgroup (no cgroup v2 memory controller), "
        "meminfo.GPUActive (not reported)"
    ]
    other = synthetic_run(setup="sycl", unavailable={**gaps, "sysman": "no device memory values"})
    assert unavailable_lines([*same, other]) == [
        "not available here: cgroup (no cgroup v2 memory controller), "
        "meminfo.GPUActive (not reported)",
        "also not available to sycl: sysman (no device memory values)",
    ]
    alone = synthetic_run(setup="sycl", unavailable={"sysman": "no device memory values"})
    assert unavailable_lines([same[0], alone]) == [
        "not available to l0: cgroup (no cgroup v2 memory controller), "
        "meminfo.GPUActive (not reported)",
        "not available to sycl: sysman (no device memory values)",
    ]
    skipped = dataclasses.replace(alone, status="skipped", reason="x", samples=[])
    assert unavailable_lines([skipped]) == []


def test_a_failed_setup_next_to_a_good_one_exits_6(tmp_path: Path) -> None:
    # The custom remedy's environment makes the simulator lose the device at once:
    # the remedy run fails, the plain run (a mirror) is fine.
    out = tmp_path / "r.json"
    args = ["--setups", "l0-peer-resident", "--size", "512MiB", "--steps", "8", "--settle", "0"]
    args += ["--env", "ZESIM_DEVICE_LOST_AT=1", "--json", str(out)]
    result = _cli(args, host_env(sim.sim_env(mirror="peer-resident")))
    report = read_json(out)
    base = report.run("l0-peer-resident")
    assert base is not None and base.status == "ok" and base.result is not None
    assert base.result.verdict == "mirror", base.result.reason
    custom = report.run("l0-peer-resident", "custom")
    assert custom is not None and custom.status == "failed"
    assert result.returncode == 6, result.stderr
    assert "set-up(s) failed: l0-peer-resident [custom]" in _one_line_error(result.stderr)


def test_no_driver_behind_alt_drivers_is_not_called_a_simulator(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    env = {**os.environ, "ZE_ENABLE_ALT_DRIVERS": "/nonexistent.so", "COLUMNS": "160"}
    args = ["--setups", "l0,sycl", "--sycl-device", "opencl:cpu", "--size", "64MiB"]
    args += ["--steps", "4", "--settle", "0", "--json", str(out)]
    result = _cli(args, env)
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report.simulated is False
    assert report.fingerprint["loader"]["alt_drivers"] == ["/nonexistent.so"]
    l0, sycl = report.runs
    assert l0.status == "skipped" and not l0.simulated
    assert sycl.status == "ok" and not sycl.simulated and sycl.host_memory
    assert "SIMULATOR" not in result.stdout
    assert "hardware (host memory)" in result.stdout


def test_sycl_cpu_positive_control_next_to_the_simulator(tmp_path: Path) -> None:
    paths = {
        "--json": tmp_path / "a.json",
        "--junit": tmp_path / "a.xml",
        "--plot": tmp_path / "a.svg",
    }
    args = ["--setups", "l0,sycl", "--sycl-device", "opencl:cpu", "--size", "512MiB"]
    args += ["--steps", "8", "--settle", "0", "--fail-on-mirror"]
    args += [str(x) for pair in paths.items() for x in pair]
    result = _cli(args, {**host_env(sim.sim_env(mirror="none")), "COLUMNS": "160"})
    report = read_json(paths["--json"])
    runs = {r.setup: r for r in report.runs}
    l0, sycl = runs["l0"], runs["sycl"]
    assert l0.simulated and not l0.host_memory
    assert l0.result is not None and l0.result.verdict == "clean", l0.result
    assert not sycl.simulated and sycl.host_memory
    assert sycl.result is not None
    assert sycl.result.verdict == "mirror", sycl.result.reason
    # The positive control is not a mirror: --fail-on-mirror passes, JUnit passes it.
    assert result.returncode == 0, result.stderr
    suite = ET.parse(paths["--junit"]).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["sycl"].find("failure") is None
    sysout = cases["sycl"].find("system-out")
    assert sysout is not None and "MiB host per GiB device" in (sysout.text or "")
    assert "[simulator]" not in (sysout.text or "")
    l0_out = cases["l0"].find("system-out")
    assert l0_out is not None and "[simulator] clean" in (l0_out.text or "")
    # Simulator marked per run, in the table and in the plot.
    assert "runs marked SIMULATOR" in result.stdout
    rows = {ln.split()[1]: ln for ln in result.stdout.splitlines() if ln.startswith("│ ")}
    assert "SIMULATOR" in rows["l0"] and "SIMULATOR" not in rows["sycl"]
    assert "hardware (host memory)" in rows["sycl"]
    svg = paths["--plot"].read_text()
    assert "l0 (SIMULATOR)" in svg and "sycl (SIMULATOR)" not in svg
    assert "not available" in result.stdout


@pytest.mark.parametrize("flag", ["--json", "--junit", "--plot"])
def test_unwritable_report_paths_exit_4_before_anything_runs(
    flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import l0mem.cli.audit as cli_audit

    ran: list[object] = []
    monkeypatch.setattr(cli_audit, "run_audit", lambda *a, **k: ran.append(a))
    target = tmp_path / "missing" / ("r.png" if flag == "--plot" else "r.out")
    result = CliRunner().invoke(audit, [flag, str(target)])
    assert result.exit_code == 4, result.output
    assert "cannot write (no such directory)" in result.output
    assert result.output.count("\n") == 1
    assert ran == [] and not (tmp_path / "missing").exists()


def test_remedies_show_what_each_costs_and_name_the_cheapest(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    args = ["--setups", "l0-peer-resident", "--remedies", "--size", "256MiB", "--steps", "4"]
    env = {**host_env(sim.sim_env(mirror="peer-resident")), "COLUMNS": "200"}
    result = _cli([*args, "--settle", "0", "--json", str(out)], env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "What each remedy costs peer copies" in result.stdout
    # The simulator's model: no peer access sends copies through the host, turning
    # deferred backing off keeps them direct, so the latter is the one to use.
    assert (
        "Use no-defer-backing (NEOReadDebugKeys=1 EnableDeferBacking=0) for l0-peer-resident: "
        "it removes the mirror and keeps peer copies direct" in result.stdout
    )
    costs = {c["remedy"]: c for c in json.loads(out.read_text())["remedy_costs"]}
    assert costs["no-peer-access"]["route"] == "through host"
    assert costs["no-defer-backing"]["route"] == costs[None]["route"] == "direct"
    assert all(c["applicable"] for c in costs.values())


@pytest.mark.parametrize("columns", [None, "100", "80"])
def test_off_a_terminal_the_tables_are_160_columns_wide_unless_columns_says(
    columns: str | None,
) -> None:
    env = host_env(sim.sim_env(mirror="peer-resident"))
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    args = ["--setups", "l0,l0-peer-resident", "--size", "192MiB", "--steps", "3", "--settle", "0"]
    result = _cli(args, env)
    assert result.returncode == 0, result.stderr
    # The tables are laid out to the width; a sentence is one line for the reader's
    # terminal (or log viewer) to wrap, so it is never cut.
    table = [ln for ln in result.stdout.splitlines() if ln[:1] in set("┏┃┡│└")]
    assert len(table) > 6
    widest = max(len(line) for line in table)
    if columns is None:
        assert 100 < widest <= 160, widest
    else:
        assert widest <= int(columns), widest
    # However narrow, a cell folds: no verdict, number or name is cut short.
    assert "…" not in result.stdout


def test_the_answer_comes_first_quiet_is_the_answer_alone_and_verbose_shows_every_signal() -> None:
    env = {**host_env(sim.sim_env(mirror="peer-resident")), "COLUMNS": "160"}
    args = ["--setups", "l0,l0-peer-resident", "--size", "192MiB", "--steps", "3", "--settle", "0"]
    runs = {flag: _cli([*args, *flag], env) for flag in ((), ("-q",), ("-v",))}
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr
    answer = [
        "[SIMULATOR] Affected: host memory taken per GiB of device memory: "
        "l0-peer-resident mirror 1024 MiB/GiB",
        "Clean: l0",
        "Run again with --remedies to try the known workarounds and what each costs.",
    ]
    assert runs[("-q",)].stdout.splitlines() == answer
    assert runs[()].stdout.splitlines()[:4] == [*answer, ""]
    rows = {f: sum(ln.startswith("│ ") for ln in p.stdout.splitlines()) for f, p in runs.items()}
    assert rows[("-v",)] > rows[()] > rows[("-q",)] == 0


@pytest.mark.parametrize("columns", [80, 120])
def test_at_80_and_120_columns_every_verdict_number_and_setting_is_whole(columns: int) -> None:
    # Where the summary table does not fit, each set-up is a block of "column: value"
    # lines; where it fits, a table. Either way no verdict, number or setting to copy
    # is cut or folded inside a word.
    env = {**host_env(sim.sim_env(mirror="peer-resident")), "COLUMNS": str(columns)}
    args = ["--setups", "l0,l0-peer-resident", "--size", "192MiB", "--steps", "3", "--settle", "0"]
    result = _cli([*args, "--remedies"], env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "…" not in out
    lines = out.splitlines()
    # The set-ups' summary: from its title to its caption.
    start = next(i for i, ln in enumerate(lines) if ln.startswith("l0mem audit ("))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("MiB/GiB: MiB of host memory"))
    summary = lines[start:end]
    stacked = "  verdict: mirror" in summary
    tabled = any(ln.startswith("┃ set-up") for ln in summary)
    assert stacked != tabled, out  # one form or the other, never a squeezed mix
    if columns == 80:
        assert stacked and "l0-peer-resident" in summary, out
    if tabled:
        assert any("l0-peer-resident" in ln and "mirror" in ln for ln in summary), out
    # The remedy to copy, on one line, whole.
    assert any("NEOReadDebugKeys=1 EnableDeferBacking=0" in ln for ln in lines), out
    # A table never wider than the terminal.
    table = [ln for ln in lines if ln[:1] in set("┏┃┡│└")]
    assert all(len(ln) <= columns for ln in table), max(len(ln) for ln in table)


def test_a_long_setting_is_printed_whole_on_a_narrow_terminal() -> None:
    # A remedy environment longer than the terminal: one line the terminal wraps, not cut.
    env = {**host_env(sim.sim_env(mirror="peer-resident")), "COLUMNS": "60"}
    setting = "EnableDeferBacking=0 " + " ".join(f"L0memUnusedKey{i}=1" for i in range(6))
    args = ["--setups", "l0-peer-resident", "--size", "192MiB", "--steps", "3", "--settle", "0"]
    extra = [x for kv in setting.split() for x in ("--env", kv)]
    result = _cli([*args, "--remedies", "--env", "NEOReadDebugKeys=1", *extra], env)
    assert result.returncode in (0, 6), result.stderr
    whole = "NEOReadDebugKeys=1 " + setting
    assert any(whole in ln for ln in result.stdout.splitlines()), result.stdout
