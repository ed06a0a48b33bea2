"""Hostile inputs and options (issue 9): one line and exit 4 or 2, never a traceback or exit 1."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from l0mem.audit.loading import MAX_REPORT_BYTES, MAX_REPORT_DEPTH, load_json_data
from l0mem.audit.model import ReportFormatError
from l0mem.cli import cli
from tests.support.cli import never_reach_a_device

DATA = Path(__file__).parent / "data" / "reports"
BASELINE = str(DATA / "baseline.json")
ROOT = Path(__file__).resolve().parent.parent


class _TimedOut(BaseException):
    """A case ran past its time limit (a blocking open, say)."""


@pytest.fixture
def time_limit() -> Iterator[None]:
    """Fail a test that takes more than 10 s instead of hanging the suite."""

    def _raise(signum: int, frame: Any) -> None:
        raise _TimedOut("timed out")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, 10.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _compare(*args: str) -> Result:
    return CliRunner().invoke(cli, ["compare", *args])


def _bad_input(result: Result, needle: str) -> None:
    assert result.exit_code == 4, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("l0mem compare: error: ")
    assert needle in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("time_limit")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    _bad_input(_compare(str(fifo), BASELINE), "not a regular file")


@pytest.mark.usefixtures("time_limit")
def test_a_device_is_refused_without_reading_it() -> None:
    # /dev/null, not /dev/zero: a regression must not read forever and fill memory.
    _bad_input(_compare("/dev/null", BASELINE), "not a regular file")


def test_a_symlink_loop_is_exit_4(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    _bad_input(_compare(str(loop), BASELINE), "cannot read")


def test_a_directory_is_exit_4(tmp_path: Path) -> None:
    _bad_input(_compare(str(tmp_path), BASELINE), "is a directory")


def test_deep_nesting_is_exit_4_not_a_recursion_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "l0mem.audit/1", "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    _bad_input(_compare(str(deep), BASELINE), f"nested over {MAX_REPORT_DEPTH} deep")


def test_nesting_inside_strings_does_not_count(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text('{"a": "' + "[" * 1000 + '\\"", "b": [[1]]}')
    assert load_json_data(p)["b"] == [[1]]


def test_a_file_over_the_cap_is_exit_4_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_REPORT_BYTES + 1)  # sparse: no disk, and it is never read
    _bad_input(_compare(str(big), BASELINE), "too large for a report")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"schema": "l0mem.audit/1", "n": ' + "9" * 5000 + "}", "out of range"),
        ('{"schema": "l0mem.audit/1", "n": ' + "9" * 30 + "}", "out of range"),
        ('{"schema": "l0mem.audit/1", "n": 1e400}', "out of range"),
        ('{"schema": "l0mem.audit/1", "n": -1e400}', "out of range"),
    ],
)
def test_absurd_numbers_are_exit_4(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "r.json"
    p.write_text(text)
    _bad_input(_compare(str(p), BASELINE), needle)


def test_an_absurd_integer_in_a_real_field_is_exit_4(tmp_path: Path) -> None:
    text = (DATA / "baseline.json").read_text()
    p = tmp_path / "r.json"
    # A 25-digit byte count parses as an int but overflowed the float analysis.
    p.write_text(text.replace('"max_device_bytes": ', '"max_device_bytes": 1000000000000', 1))
    with pytest.raises(ReportFormatError, match="out of range"):
        load_json_data(p)
    _bad_input(_compare(str(p), BASELINE), "out of range")


def test_a_huge_finite_slope_is_exit_4_not_an_overflow(tmp_path: Path) -> None:
    text = (DATA / "baseline.json").read_text()
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    # Each finite, but their difference is inf: the table's round() raised OverflowError.
    before.write_text(re.sub(r'("slope"\s*:\s*)[-0-9.e]+', r"\g<1>-1e308", text))
    after.write_text(re.sub(r'("slope"\s*:\s*)[-0-9.e]+', r"\g<1>1e308", text))
    _bad_input(_compare(str(before), str(after)), "out of range")


def test_a_huge_value_quoted_in_the_error_keeps_the_line_short(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text('{"schema": "' + "x" * 1_000_000 + '"}')
    result = _compare(str(p), BASELINE)
    _bad_input(result, "schema")
    assert len(result.stderr) < 1000


def test_ctrl_c_during_compare_is_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def _interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("l0mem.cli.compare.compare_reports", _interrupt)
    result = _compare(BASELINE, str(DATA / "current-same.json"))
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == "l0mem compare: error: interrupted by SIGINT"


def test_a_broken_pipe_is_not_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def _closed(*args: object, **kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("rich.console.Console.print", _closed)
    result = _compare(BASELINE, str(DATA / "current-same.json"))
    # No regression: the exit code the comparison had, printing stopped quietly.
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and result.stderr == ""
    regressed = _compare(BASELINE, str(DATA / "current-regressed.json"))
    assert regressed.exit_code == 1, regressed.output


def test_a_closed_stdout_keeps_the_exit_code_in_a_real_process() -> None:
    # rich's own broken-pipe handler exits 1; Python ignores SIGPIPE, so the write fails.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "l0mem", "compare", BASELINE, str(DATA / "current-same.json")],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write_end)
    # rich's handler would have made this 1 ("regression"); the comparison found none.
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ["allreduce", "--seed", "-1"],
        ["allreduce", "--seed", "1" + "0" * 300],
        ["allreduce", "--threshold", "1" + "0" * 300],
        ["allreduce", "--count", "1" + "0" * 300],
        ["allreduce", "--reps", "1" + "0" * 300],
        ["p2p", "--warmup", "1" + "0" * 300],
        ["p2p", "--sub-devices", "1" + "0" * 300],
        ["p2p", "--sizes", "1" + "0" * 300],
        ["bench", "kernels", "--elements", "1" + "0" * 300],
        ["bench", "kernels", "--work-group-size", "1" + "0" * 300],
        ["audit", "--steps", "1" + "0" * 300],
        ["audit", "--settle", "nan"],
        ["audit", "--settle", "1e400"],
        ["audit", "--size", "1" + "0" * 300],
        ["audit", "--floor", "1" + "0" * 300],
        ["compare", "--slope-tolerance", "1e400", BASELINE, BASELINE],
        ["p2p", "--device", "\u00b2"],  # superscript two: isdigit() but not int()
        # An index no machine has is exit 3, as any index no driver has: tests/test_exit_codes.py
    ],
)
def test_absurd_option_numbers_are_usage_errors(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    never_reach_a_device(monkeypatch)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output


def _float_options() -> list[tuple[str, click.Option]]:
    from l0mem.cli import cli

    found: list[tuple[str, click.Option]] = []
    ctx = click.Context(cli)

    def walk(name: str, command: click.Command) -> None:
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                walk(f"{name} {sub}".strip(), command.get_command(ctx, sub))  # type: ignore[arg-type]
            return
        found.extend(
            (name, p)
            for p in command.params
            if isinstance(p, click.Option) and isinstance(p.type, click.FloatRange)
        )

    walk("", cli)
    return found


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan", "inf", "-inf"])
def test_no_number_option_of_any_command_takes_nan_or_infinity(text: str) -> None:
    # click's FloatRange lets nan through (every comparison with it is false): a nan
    # tolerance once let matrix --slope-tolerance report no regression at all.
    options = _float_options()
    assert len(options) >= 8, options
    for name, option in options:
        ctx = click.Context(click.Command(name))
        with pytest.raises(click.BadParameter):
            option.process_value(ctx, text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("all", math.inf), ("ALL", math.inf), ("0", 0.0), ("2.5", 2.5)]
)
def test_follow_takes_seconds_or_all(text: str, seconds: float) -> None:
    from l0mem.cli._options import parse_follow

    assert parse_follow(click.Context(click.Command("run")), None, text) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["nan", "-1", "inf", "1e99", "forever", ""])
def test_follow_refuses_what_is_no_time(text: str) -> None:
    from l0mem.cli._options import parse_follow

    with pytest.raises(click.BadParameter):
        parse_follow(click.Context(click.Command("run")), None, text)  # type: ignore[arg-type]
