"""One exit code per failure class, the same in every command, as the docs and ``--help`` say.

The matrix runs the real command line for each command and each failure
class that applies to it: in a fresh ``python -m l0mem`` process against the
simulator (whose configuration and the loader are per process), or with
click's CliRunner in this process where no device is reached (compare, paths
checked first, absurd device indices). Each case expects the code of its
class from :data:`CLASSES` and one stderr line without a traceback. A new
command or class is one line of :data:`CASES`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from l0mem.cli import cli
from l0mem.cli._exits import (
    COMMANDS,
    EXIT_TABLE,
    ExitCode,
    code_label,
    exit_epilog,
    readme_rows,
)
from tests.support import sim
from tests.support.cli import REPO_ROOT, never_reach_a_device, run_l0mem

REPORTS = Path(__file__).parent / "data" / "reports"
BASELINE = str(REPORTS / "baseline.json")

# The one decision: each failure class (and the two outcomes that are not
# failures) and its code in every command.
CLASSES: dict[str, ExitCode] = {
    "success, stdout closed": ExitCode.OK,
    "finding": ExitCode.REGRESSION,
    "usage": ExitCode.USAGE,
    "malformed device spec": ExitCode.USAGE,
    "no loader": ExitCode.NO_DEVICE,
    "no driver": ExitCode.NO_DEVICE,
    "no device": ExitCode.NO_DEVICE,
    "device index no driver has": ExitCode.NO_DEVICE,
    "device too small": ExitCode.NO_DEVICE,
    "out of device memory": ExitCode.NO_DEVICE,
    "host too small": ExitCode.NO_DEVICE,
    "device lost": ExitCode.DRIVER_ERROR,
    "bad input": ExitCode.BAD_INPUT,
    "unwritable output": ExitCode.BAD_INPUT,
    "cannot compare": ExitCode.MISMATCH,
    "interrupted": ExitCode.INTERRUPTED,
}

NO_LOADER = {"L0MEM_ZE_LOADER": "/nonexistent/libze_loader.so.1"}
NO_DRIVER = {"ZE_ENABLE_ALT_DRIVERS": "/nonexistent/libze_none.so"}
NO_SYCL = {"OCL_ICD_FILENAMES": "/nonexistent/libnone.so"}
UNWRITABLE = ("--json", "/nonexistent/l0mem-exit-codes/r.json")
HUGE_ELEMENTS = str(1 << 40)  # 14 TiB of buffers


@dataclasses.dataclass(frozen=True)
class Case:
    """One command run in one failure class; ``needle`` must be in its one stderr line."""

    command: str
    failure: str
    args: tuple[str, ...] = ()
    sim: Mapping[str, object] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    needle: str = ""
    in_process: bool = False  # CliRunner: no device is reached

    @property
    def code(self) -> ExitCode:
        """Return the code the failure class has in every command."""
        return CLASSES[self.failure]

    @property
    def id(self) -> str:
        """Return the test id: command, class and what makes it that class."""
        what = self.needle or " ".join(self.args[-2:]) or ",".join(map(str, self.sim.values()))
        return f"{self.command}|{self.failure}|{what}"


# Each command with the options that make a run short.
BASE: dict[str, tuple[str, ...]] = {
    "info": (),
    "audit": ("--setups", "l0", "--size", "64MiB", "--steps", "3", "--settle", "0"),
    "compare": (),
    "matrix": (),
    "p2p": ("--sizes", "4K", "--reps", "1", "--warmup", "0"),
    "allreduce": ("--sizes", "16K", "--reps", "1", "--warmup", "0"),
    "bench kernels": ("--elements", "1024", "--reps", "1", "--warmup", "0"),
    "run": ("--quiet",),
    "watch": ("--quiet",),
    "demo": ("--size", "32M", "--out", str(Path(tempfile.gettempdir()) / "l0mem-exit-codes-demo")),
}
# What run and watch watch when they succeed: a command that ends at once, and this process.
WATCHED = {
    "run": ("--", sys.executable, "-c", "pass"),
    "watch": ("--pid", str(os.getpid()), "--duration", "0.3"),
}
BACKEND_COMMANDS = ("p2p", "allreduce", "bench kernels")
# A size no simulated device (8 GiB) holds, and one a 64 TiB device holds but no host.
TOO_BIG = {"p2p": ("--sizes", "99999G"), "allreduce": ("--sizes", "99999G")}
TOO_BIG_FOR_HOST = {"p2p": ("--sizes", "4000G"), "allreduce": ("--sizes", "400G")}


def _backend_cases(command: str) -> list[Case]:
    l0 = ("--backend", "l0")
    too_big = TOO_BIG.get(command, ("--elements", HUGE_ELEMENTS))
    for_host = TOO_BIG_FOR_HOST.get(command, ("--elements", HUGE_ELEMENTS))
    return [
        Case(command, "no loader", l0, env=NO_LOADER, needle="loader"),
        Case(command, "no driver", l0, env=NO_DRIVER, needle="no Level Zero driver"),
        Case(command, "no device", l0, sim={"devices": 0}, needle="no Level Zero device"),
        Case(command, "device index no driver has", ("--device", "7"), needle="device 7"),
        Case(command, "device index no driver has", ("--device", "5000"), in_process=True),
        Case(command, "malformed device spec", (*l0, "--device", "x"), needle="'x'"),
        Case(command, "device too small", (*l0, *too_big), needle="which has 8.0 GiB"),
        Case(command, "out of device memory", l0, {"fail_alloc_at": 1}, needle="zeMemAlloc"),
        Case(
            command,
            "host too small",
            (*l0, *for_host),
            {"device_memory": "64T"},
            needle="of host memory",
        ),
        # A device lost while the drivers are listed, while the backend is made
        # (destroying what was made fails too: the line names the first call),
        # and while measuring.
        Case(command, "device lost", l0, {"device_lost_on": "zeDriverGet"}, needle="zeDriverGet"),
        Case(
            command,
            "device lost",
            l0,
            {"device_lost_on": "zeCommandListCreateImmediate"},
            needle="zeCommandListCreateImmediate",
        ),
        Case(command, "device lost", l0, {"device_lost_on": "zeEventCreate"}, needle="zeEventCreate"),
        Case(command, "unwritable output", UNWRITABLE, in_process=True, needle="cannot write"),
    ]


CASES: list[Case] = [
    Case("info", "no loader", env=NO_LOADER, needle="loader"),
    Case("info", "no driver", env=NO_DRIVER, needle="no Level Zero driver"),
    Case("info", "no device", sim={"devices": 0}, needle="no Level Zero device"),
    Case("info", "device lost", sim={"device_lost_on": "zeDriverGet"}, needle="zeDriverGet"),
    Case(
        "info",
        "device lost",
        sim={"device_lost_on": "zeDeviceCanAccessPeer"},
        needle="zeDeviceCanAccessPeer",
    ),
    Case("info", "unwritable output", UNWRITABLE, in_process=True, needle="cannot write"),
    *(c for command in BACKEND_COMMANDS for c in _backend_cases(command)),
    Case("allreduce", "no device", sim={"devices": 1}, needle="needs 2 devices"),
    Case("audit", "no device", sim={"devices": 0}, env=NO_SYCL, needle="no device to audit"),
    Case("audit", "no loader", env={**NO_LOADER, **NO_SYCL}, needle="no device to audit"),
    Case("audit", "device index no driver has", ("--device", "7"), needle="device 7"),
    Case("audit", "device index no driver has", ("--device", "5000"), in_process=True),
    Case("audit", "malformed device spec", ("--device", "x"), needle="'x'"),
    # No set-up measured a single step: the report is written, but it is no success.
    Case(
        "audit", "device too small", sim={"fail_alloc_at": 1}, needle="no set-up measured"
    ),
    Case("audit", "host too small", ("--floor", "99%"), needle="no set-up measured"),
    # A size past the device's free memory is the device's limit, said so (not the host floor's).
    Case("audit", "device too small", ("--size", "4000T"), needle="more than the device's free memory"),
    # Lost while the discovery child lists the devices (the SYCL CPU device is
    # still found), and in the set-up's child.
    Case("audit", "device lost", sim={"device_lost_on": "zeDriverGet"}, needle="set-up(s) failed"),
    # ... and no SYCL device either: still the driver's failure, not "no device".
    Case(
        "audit",
        "device lost",
        ("--sycl-device", "level_zero:gpu"),
        sim={"device_lost_on": "zeDriverGet"},
        needle="device discovery (discover-l0) failed",
    ),
    Case(
        "audit", "device lost", sim={"device_lost_on": "zeMemAllocDevice"}, needle="failed: l0"
    ),
    Case("audit", "usage", ("--json", "/tmp/x.json", "--junit", "/tmp/x.json"), in_process=True),
    Case("audit", "unwritable output", UNWRITABLE, in_process=True, needle="cannot write"),
    Case("run", "usage", ("--interval", "0", *WATCHED["run"]), in_process=True),
    Case("run", "usage", (), in_process=True, needle="no command given"),
    Case("run", "usage", ("--host-floor", "0", *WATCHED["run"]), in_process=True, needle="--no-host-floor"),
    Case("run", "unwritable output", (*UNWRITABLE, *WATCHED["run"]), in_process=True, needle="cannot write"),
    Case("run", "host too small", ("--host-floor", "99%", *WATCHED["run"]), needle="at or below the floor"),
    Case("watch", "usage", ("--pid", "0"), in_process=True),
    Case("watch", "no device", ("--pid", str(1 << 22)), needle="no process"),
    Case("watch", "unwritable output", ("--pid", "1", *UNWRITABLE), in_process=True, needle="cannot write"),
    Case("demo", "usage", ("--size", "1K"), in_process=True),
    Case("demo", "no driver", env={"L0MEM_SIM_LIBRARY": "/nonexistent/libze_sim.so"}, needle="no such file"),
    Case("demo", "unwritable output", ("--out", "/nonexistent/l0mem-exit-codes-demo"), needle="cannot write"),
    Case("compare", "finding", (BASELINE, str(REPORTS / "current-regressed.json")), in_process=True),
    Case("matrix", "bad input", (BASELINE, str(REPORTS / "missing.json")), in_process=True),
    Case("matrix", "bad input", (BASELINE, str(REPORTS / "malformed.json")), in_process=True),
    Case("matrix", "usage", (BASELINE, "--baseline", "no-such-stack"), in_process=True),
    Case("matrix", "unwritable output", (BASELINE, *UNWRITABLE), in_process=True, needle="cannot write"),
    Case("compare", "bad input", (BASELINE, str(REPORTS / "missing.json")), in_process=True),
    Case("compare", "bad input", (BASELINE, str(REPORTS / "malformed.json")), in_process=True),
    Case(
        "compare", "cannot compare", (BASELINE, str(REPORTS / "other-setups.json")), in_process=True
    ),
    Case("compare", "usage", (BASELINE, BASELINE, "--json", BASELINE), in_process=True),
    Case(
        "compare",
        "unwritable output",
        (BASELINE, BASELINE, *UNWRITABLE),
        in_process=True,
        needle="cannot write",
    ),
]


def _check_line(command: str, code: int, stderr: str, needle: str, output: str = "") -> None:
    """Assert ``stderr`` holds the one failure line of ``command`` (with ``needle``) and no traceback."""
    assert "Traceback" not in stderr + output, stderr
    lines = stderr.strip().splitlines()
    if code == ExitCode.OK or (code == ExitCode.REGRESSION and command != "allreduce"):
        # Success, or a finding the tables show. The audit's progress and notes are
        # lines too; its failures (and compare's) say "error:".
        # The demo's steps are other commands with lines of their own.
        said = ": error:" if command in ("audit", "compare") else ""
        assert not [ln for ln in lines if ln.startswith(f"l0mem {command}") and said in ln], stderr
        return
    mine = [ln for ln in lines if ln.startswith(("l0mem ", "Error: "))]
    assert len(mine) == 1, stderr
    line = mine[0]
    # A user reads the error's words, not l0mem's class path for it.
    assert "l0mem._" not in line and "Error: " not in line.partition(": ")[2], line
    if not line.startswith("Error: "):  # click's own usage errors
        assert line.startswith(f"l0mem {command}: "), line
        if command != "audit":  # the audit's progress bars share stderr
            assert lines == [line], stderr
    assert needle in line, (needle, line)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_failure_class_has_its_one_code(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    args = [*BASE[case.command], *case.args]
    if case.in_process:
        never_reach_a_device(monkeypatch)
        result = CliRunner().invoke(cli, [*case.command.split(), *args])
        assert result.exit_code == case.code, (result.output, result.exception)
        _check_line(case.command, case.code, result.stderr, case.needle, result.output)
        return
    env = {**sim.sim_env(**case.sim), **case.env}
    head, *rest = case.command.split()
    proc = run_l0mem(head, [*rest, *args], env, timeout=180)
    assert proc.returncode == case.code, proc.stderr
    _check_line(case.command, case.code, proc.stderr, case.needle)


# Where each command is interrupted: a function it calls while working, which
# sends the process a real SIGINT (what Ctrl-C does) before doing its work.
INTERRUPTED_IN = {
    "info": ("l0mem.cli.info", "collect"),
    "audit": ("l0mem.cli.audit", "run_audit"),
    "compare": ("l0mem.cli.compare", "compare_reports"),
    "matrix": ("l0mem.audit.matrix", "build"),
    "p2p": ("l0mem.bench.p2p", "run_p2p"),
    "allreduce": ("l0mem.bench.allreduce", "measure"),
    "bench kernels": ("l0mem.bench.kernels", "run_kernel_bench"),
    "run": ("l0mem.cli.run", "run_workload"),
    "watch": ("l0mem.cli.run", "watch_pid"),
    "demo": ("l0mem.cli.demo", "_step"),
}

_INTERRUPT = """
import importlib, os, signal, sys
# As a shell starts a command: a job started in the background may inherit SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
module = importlib.import_module({module!r})
real = getattr(module, {name!r})
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
setattr(module, {name!r}, interrupted)
from l0mem.cli import main
sys.argv = ["l0mem", *{args!r}]
main()
"""


def _success_args(command: str) -> list[str]:
    if command == "compare":
        return [BASELINE, str(REPORTS / "current-same.json")]
    if command == "matrix":
        return [BASELINE, str(REPORTS / "current-same.json")]
    if command in WATCHED:
        return [*BASE[command], *WATCHED[command]]
    return [*BASE[command], *(("--backend", "l0") if command in BACKEND_COMMANDS else ())]


def _python(code: str, env: Mapping[str, str], **streams: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])},
        cwd=REPO_ROOT,
        text=True,
        timeout=180,
        check=False,
        **streams,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_ctrl_c_is_130_in_every_command(command: str) -> None:
    module, name = INTERRUPTED_IN[command]
    args = [*command.split(), *_success_args(command)]
    if command == "run":
        # run forwards the stop to its workload: a Python one stopped while it starts
        # prints its own fatal error and traceback (seen under load), which is not l0mem's.
        args = [*args[: args.index("--") + 1], "sleep", "0.2"]
    code = _INTERRUPT.format(module=module, name=name, args=args)
    proc = _python(code, sim.sim_env(), capture_output=True)
    assert proc.returncode == CLASSES["interrupted"], proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem ")]
    assert len(lines) == 1 and "interrupted" in lines[0], proc.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_closed_stdout_keeps_the_success_code(command: str) -> None:
    # rich's own handler would exit 1 (a finding); the reader going away is no failure.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "l0mem", *command.split(), *_success_args(command)],
            env={**sim.sim_env(), "COLUMNS": "160"},
            cwd=REPO_ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == CLASSES["success, stdout closed"], proc.stderr
    _check_line(command, proc.returncode, proc.stderr, "")


def test_one_means_a_finding_only() -> None:
    assert [c for c, code in CLASSES.items() if code == ExitCode.REGRESSION] == ["finding"]
    findings = [row.text for row in EXIT_TABLE if row.code == ExitCode.REGRESSION]
    assert len(findings) == 6 and all(": a " in text for text in findings)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_code_the_matrix_expects_is_in_the_command_help(case: Case) -> None:
    assert f"\n  {code_label(case.code):<6s}" in exit_epilog(case.command)


def _documented_table() -> list[tuple[str, str]]:
    """Return the rows of the user guide's exit-code table (docs/guide/exit-codes.md)."""
    text = (REPO_ROOT / "docs" / "guide" / "exit-codes.md").read_text()
    section = text[text.index("# Exit codes\n") :]
    rows = re.findall(r"^\| (\d+|128\+N) \| (.*) \|$", section.split("\n\n## ")[0], flags=re.M)
    return [(code, meaning) for code, meaning in rows]


def test_documented_table_is_the_table_every_command_follows() -> None:
    assert _documented_table() == readme_rows()
    assert [code for code, _ in readme_rows()] == [code_label(c) for c in sorted(ExitCode)]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_the_command_s_rows_of_the_table(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    shown = [ln.strip() for ln in result.output.splitlines()]
    epilog = [ln.strip() for ln in exit_epilog(command).splitlines() if ln.strip("\b")]
    start = shown.index("Exit codes:")
    assert shown[start : start + len(epilog)] == epilog
    # Every row that applies to the command, and no other, once.
    labels = [code_label(c) for c in sorted({r.code for r in EXIT_TABLE if command in r.commands})]
    listed = [ln.split()[0] for ln in epilog[1:] if ln.split()[0] in labels]
    assert listed == labels


# The first failing call is the error: creating a backend part-way and closing one.
_OPEN = """
from l0mem._ze.errors import DeviceLostError
from l0mem.backends import open_backend
try:
    backend = open_backend("l0", context={context!r})
    backend.close()
except DeviceLostError as err:
    notes = " ".join(getattr(err, "__notes__", []))
    print(err.routine, "DEVICE_LOST" in notes or not hasattr(err, "add_note"))
"""


@pytest.mark.parametrize("context", ["default", "single"])
@pytest.mark.parametrize(
    "call", ["zeCommandListCreateImmediate", "zeEventPoolCreate", "zeCommandListAppendBarrier"]
)
def test_open_backend_raises_the_first_failing_call(context: str, call: str) -> None:
    # Releasing what was already made fails on the lost device too; that error
    # is a note on the first one (Python 3.11 and later), never the error.
    proc = sim.run_python(_OPEN.format(context=context), devices=2, device_lost_on=call)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [call, "True"], proc.stdout + proc.stderr


def test_a_sycl_queue_that_cannot_be_made_is_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from l0mem.backends import NoDeviceError, open_backend, select_devices
    from l0mem.sycl import load_dpctl

    dpctl = load_dpctl()
    real = dpctl.SyclQueue
    made: list[object] = []

    def second_fails(*args: object, **kwargs: object) -> object:
        if made:
            raise dpctl.SyclQueueCreationError("the second queue failed")
        made.append(real(*args, **kwargs))
        return made[-1]

    try:
        select_devices("sycl", ["opencl:cpu"], sub_devices=2)
    except NoDeviceError as err:
        pytest.skip(f"the CPU device cannot be split here: {err}")
    monkeypatch.setattr(dpctl, "SyclQueue", second_fails)
    with pytest.raises(NoDeviceError, match="the second queue failed"):
        open_backend("sycl", ["opencl:cpu"], sub_devices=2)
    assert len(made) == 1


# The audit's code, decided from its report alone (the report is written first).
_STOPPED = "stopped-early"


@pytest.mark.parametrize(
    ("runs", "code", "line"),
    [
        ([("ok", None, 8)], ExitCode.OK, None),
        # Nothing measured for want of host memory (the floor) or device memory.
        ([(_STOPPED, "safety guard: MemAvailable 1 GiB ...; no step was taken", 0)], 3, "no room"),
        ([(_STOPPED, "device memory ran out: OutOfDeviceMemoryError: ...", 0)], 3, "no room"),
        # A child stopped by a signal before its first step: 128 + N of that signal.
        ([(_STOPPED, "stopped by SIGTERM", 0)], 143, "stopped by SIGTERM"),
        ([("interrupted", "interrupted (SIGHUP); freed 0 allocation(s)", 0)], 129, "by SIGHUP"),
        # One set-up measured: the other's lack of room is in the report, no failure.
        ([("ok", None, 8), (_STOPPED, "device memory ran out: ...", 0)], ExitCode.OK, None),
        ([("skipped", "needs at least 2 Level Zero devices of one driver, found 1", 0)], 3, "skipped"),
        # Skipped because discovering the devices failed (a device lost listing them).
        (
            [
                ("ok", None, 8),
                ("skipped", "device discovery (discover-l0) failed: exit code 1: DeviceLost", 0),
            ],
            ExitCode.DRIVER_ERROR,
            "set-up(s) failed: l0",
        ),
        ([("failed", "DeviceLostError: zeMemAllocDevice", 0)], ExitCode.DRIVER_ERROR, "failed"),
    ],
)
def test_the_audit_code_follows_the_class_of_what_stopped_it(
    runs: list[tuple[str, str | None, int]], code: int, line: str | None
) -> None:
    from l0mem.cli.audit import exit_code, outcome
    from tests.test_analysis import synthetic_report, synthetic_run

    setups = ["sycl", "l0"]
    report = synthetic_report(
        [
            synthetic_run(0.0, setup=setups[i], status=status, reason=reason, steps=steps)
            for i, (status, reason, steps) in enumerate(runs)
        ]
    )
    got, why = outcome(report, fail_on_mirror=True)
    assert got == code == exit_code(report, fail_on_mirror=True)
    assert (why is None) == (line is None) and (line or "") in (why or "")


def test_a_bug_is_its_own_code_with_its_traceback_never_a_finding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import l0mem.cli.compare as compare_cli

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(compare_cli, "compare_reports", broken)
    result = CliRunner().invoke(cli, ["compare", BASELINE, BASELINE])
    assert result.exit_code == ExitCode.INTERNAL != ExitCode.REGRESSION
    assert "Traceback" in result.stderr and "TypeError: a bug" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("l0mem compare: error: internal error (a bug in l0mem"), last


def test_a_bug_in_a_subcommand_of_a_group_names_the_whole_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import l0mem.cli.bench as bench_cli

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(bench_cli, "check_outputs", broken)
    result = CliRunner().invoke(cli, ["bench", "kernels", "--backend", "l0"])
    assert result.exit_code == ExitCode.INTERNAL
    assert result.stderr.strip().splitlines()[-1].startswith("l0mem bench kernels: internal error")
