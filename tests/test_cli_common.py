"""The one CLI failure path (l0mem.cli._common): the error table, fail, reporting, measuring."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from l0mem._ze.errors import DeviceLostError
from l0mem.cli import _common, _options
from l0mem.cli._common import ExitCode, classify, fail, measuring, reporting

PACKAGE = Path(__file__).resolve().parents[1] / "l0mem"


@pytest.mark.parametrize(
    ("module", "name", "code"), _common.LIBRARY_ERRORS, ids=lambda v: getattr(v, "name", str(v))
)
def test_every_table_entry_names_an_exception_class(module: str, name: str, code: ExitCode) -> None:
    from l0mem._ze.errors import ZeError

    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, Exception)
    if issubclass(cls, ZeError):
        # A driver's error names the call that failed, first.
        err = cls(routine="zeMemAllocDevice", detail="what went wrong")
        assert classify(err) == (code, str(err))
        assert str(err).startswith("zeMemAllocDevice: ")
    else:
        assert classify(cls("what went wrong\nsecond line")) == (code, "what went wrong")


def test_library_errors_map_to_their_codes() -> None:
    from l0mem._ze.errors import DeviceLostError, OutOfDeviceMemoryError, OutOfHostMemoryError
    from l0mem.audit.compare import ReportMismatchError
    from l0mem.audit.model import ReportFormatError
    from l0mem.audit.setups import NoDeviceError as AuditNoDevice
    from l0mem.backends import DeviceSelectionError, NoDeviceError
    from l0mem.bench.fit import HostTooSmall
    from l0mem.files import ReportWriteError

    assert classify(NoDeviceError("x")) == (ExitCode.NO_DEVICE, "x")
    assert classify(AuditNoDevice("x")) == (ExitCode.NO_DEVICE, "x")
    assert classify(DeviceSelectionError("x")) == (ExitCode.USAGE, "x")
    assert classify(ReportWriteError("x")) == (ExitCode.BAD_INPUT, "x")
    assert classify(ReportFormatError("x")) == (ExitCode.BAD_INPUT, "x")
    assert classify(ReportMismatchError("x")) == (ExitCode.MISMATCH, "x")
    # Too little memory is one class, predicted or met, on the device or the host.
    assert classify(HostTooSmall("x")) == (ExitCode.NO_DEVICE, "x")
    device = OutOfDeviceMemoryError(routine="zeMemAllocDevice")
    assert classify(device) == (ExitCode.NO_DEVICE, str(device))
    host = OutOfHostMemoryError(routine="zeMemAllocHost")
    assert classify(host) == (ExitCode.NO_DEVICE, str(host))
    # Any other driver failure is the driver's (exit 6), its call named, never a missing device.
    lost = DeviceLostError(routine="zeContextCreate")
    assert classify(lost) == (ExitCode.DRIVER_ERROR, str(lost))
    assert classify(ValueError("x")) is None
    assert classify(KeyboardInterrupt()) is None


@pytest.mark.parametrize(
    ("command", "line"),
    [
        ("p2p", "l0mem p2p: boom"),
        ("audit", "l0mem audit: error: boom"),
        ("compare", "l0mem compare: error: boom"),
    ],
)
def test_fail_prints_one_line_and_exits_with_the_code(
    command: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        fail(command, ExitCode.MISMATCH, "boom")
    assert exc.value.code == 5
    assert capsys.readouterr().err == line + "\n"


def test_reporting_maps_library_errors_and_lets_bugs_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from l0mem.backends import NoDeviceError

    with pytest.raises(SystemExit) as exc, reporting("info"):
        raise NoDeviceError("no Level Zero device found")
    assert exc.value.code == 3
    assert capsys.readouterr().err == "l0mem info: no Level Zero device found\n"
    with pytest.raises(KeyError), reporting("info"):
        raise KeyError("a bug keeps its traceback")


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (RuntimeError("driver\ngone"), 6, "l0mem p2p: RuntimeError: driver"),
        (MemoryError(), 3, "l0mem p2p: out of host memory"),
        (MemoryError("cannot allocate 4096 bytes on gpu 0"), 3, "l0mem p2p: out of device memory: cannot allocate 4096 bytes on gpu 0"),
        (KeyboardInterrupt(), 130, "l0mem p2p: interrupted by SIGINT; device memory was freed"),
        # A driver error names its call and result, not l0mem's class for it.
        (
            DeviceLostError(0x70000001, "zeContextCreate"),
            6,
            "l0mem p2p: zeContextCreate: ZE_RESULT_ERROR_DEVICE_LOST (0x70000001): the device "
            "hung, was reset or removed, or its driver was updated (the kernel log, dmesg, "
            "says which; run again once the device is back)",
        ),
    ],
)
def test_measuring_turns_runtime_failures_into_one_line(
    error: BaseException, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc, measuring("p2p"):
        raise error
    assert exc.value.code == code
    assert capsys.readouterr().err == line + "\n"


def test_measuring_leaves_click_usage_errors_to_click() -> None:
    with pytest.raises(click.BadParameter), measuring("p2p"):
        raise click.BadParameter("bad")


def test_commands_report_failures_only_through_common() -> None:
    # One failure path: no command prints its own error line or exits by itself.
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name in ("_common.py", "__init__.py"):
            continue
        text = path.read_text()
        assert "def _fail" not in text, path.name
        assert re.search(r"\berr=True", text) is None, path.name


def _measuring_commands() -> dict[str, click.Command]:
    from l0mem.cli.allreduce import allreduce
    from l0mem.cli.bench import kernels
    from l0mem.cli.p2p import p2p

    return {"p2p": p2p, "allreduce": allreduce, "bench kernels": kernels}


@pytest.mark.parametrize("name", ["--reps", "--warmup"])
def test_reps_and_warmup_are_one_option_with_help_in_every_command(name: str) -> None:
    options = {
        command: next(p for p in cmd.params if name in p.opts)
        for command, cmd in _measuring_commands().items()
    }
    helps = {getattr(o, "help", None) for o in options.values()}
    assert len(helps) == 1 and None not in helps and "" not in helps, helps
    assert {o.metavar for o in options.values()} == {"N"}
    # Defaults stay each command's own.
    defaults = {command: o.default for command, o in options.items()}
    expected = {"--reps": [10, 5, 20], "--warmup": [2, 1, 3]}[name]
    assert list(defaults.values()) == expected


def test_sizes_option_parses_with_units_and_checks_each_size() -> None:
    def whole_words(n: int) -> None:
        if n % 4:
            raise ValueError(f"{n:,} bytes is not a whole number of words")

    @click.command()
    @_options.sizes_option("1K,4K", "what they mean here", check=whole_words)
    def show(sizes: list[int]) -> None:
        click.echo(repr(sizes))

    runner = CliRunner()
    assert runner.invoke(show, []).output == "[1024, 4096]\n"
    assert runner.invoke(show, ["--sizes", "1.5K,64M,1.5K"]).output == f"[1536, {64 << 20}]\n"
    bad = runner.invoke(show, ["--sizes", "12X"])
    assert bad.exit_code == 2 and "Invalid value for --sizes: bad size '12X'" in bad.output
    odd = runner.invoke(show, ["--sizes", "4K,1001"])
    assert odd.exit_code == 2
    assert "Invalid value for --sizes: 1,001 bytes is not a whole number of words" in odd.output
    text = " ".join(runner.invoke(show, ["--help"]).output.split())
    assert "--sizes LIST Bytes per device buffer" in text and "(what they mean here)" in text


def test_every_command_with_json_checks_the_path_first() -> None:
    # One helper, called before any work; its failure is the one-line exit 4
    # (exit 2 for an output that is also an input or another output).
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name in ("_common.py", "_options.py", "__init__.py", "audit_view.py"):
            continue
        text = path.read_text()
        if "json_path" in text and "run_outputs.check(" not in text:  # run/watch: run_outputs.py
            assert '("--json", json_path)' in text and "check_outputs(" in text, path.name


def test_every_command_prints_through_the_quiet_console() -> None:
    # rich's own Console exits 1 on a broken pipe; 1 means a finding.
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name in ("_common.py", "__init__.py", "audit_view.py", "p2p_view.py"):
            continue
        text = path.read_text()
        assert "render(" not in text or "output(" in text, path.name
        assert "Console()" not in text, path.name


def test_check_output_is_one_line_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _common.check_output("p2p", None)
    _common.check_output("p2p", tmp_path / "fine.json")
    with pytest.raises(SystemExit) as exc:
        _common.check_output("p2p", tmp_path / "missing" / "x.json")
    assert exc.value.code == 4
    assert capsys.readouterr().err == (
        f"l0mem p2p: {tmp_path / 'missing' / 'x.json'}: cannot write (no such directory)\n"
    )
    assert list(tmp_path.iterdir()) == []
