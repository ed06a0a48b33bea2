"""A seeded fuzz of the command line: hostile argument lists and input files.

Every case must end with a documented exit code, one error line and no
traceback, within a time limit; ``compare`` may say "regression" (exit 1) only
for two well-formed reports that really differ. The device side is never
reached: every way to a device raises DeviceReached, which no command maps.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from l0mem.audit.compare import DEFAULT_SLOPE_TOLERANCE, compare_reports, load_pair
from l0mem.cli import cli
from tests.support.cli import DeviceReached, never_reach_a_device

SEED = 9
FILE_CASES = 150
OPTION_CASES = 600
CASE_SECONDS = 5.0
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 130}
DATA = Path(__file__).parent / "data" / "reports"
REPORTS = sorted(DATA.glob("*.json"))

# Values no option should take, and a few it should.
HOSTILE_NUMBERS = [
    "-1",
    "0",
    "1",
    "3",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "1" + "0" * 300,
    "-" + "9" * 300,
    "0x10",
    "",
    " ",
    "1.5",
    "4K",
    "1e3",
    "١٢",  # Arabic-Indic digits: int() takes them
    "\x00",
    "--",
    "1,2",
]
# Values no numeric option of any command takes: passing one is a usage error.
ABSURD = {"-1", "nan", "inf", "-inf", "1e400", "1" + "0" * 300, "-" + "9" * 300, "1" * 5000}
HOSTILE_SIZES = [*HOSTILE_NUMBERS, "64K", "1.5G", "99999999999999999999T", "1,,", ",", "5%", "nan%"]


class _TimedOut(BaseException):
    """A case ran past CASE_SECONDS."""


@pytest.fixture
def per_case_limit() -> Iterator[Callable[[], None]]:
    """Yield a function that restarts the per-case timer; the timer raises _TimedOut."""

    def _raise(signum: int, frame: Any) -> None:
        raise _TimedOut(f"a case took over {CASE_SECONDS} s")

    old = signal.signal(signal.SIGALRM, _raise)

    def _restart() -> None:
        signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)

    try:
        yield _restart
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _hostile_value(rng: random.Random) -> Any:
    return rng.choice(
        [None, True, -1, 0, 10**30, -(10**30), 1e308, -1e308, "", "x" * 1000, [], {}, [[[]]]]
    )


def _mutate_tree(data: Any, rng: random.Random) -> Any:
    """Replace one random leaf or container of ``data`` with a hostile value."""
    if isinstance(data, dict) and data and rng.random() < 0.8:
        key = rng.choice(sorted(data))
        data[key] = _mutate_tree(data[key], rng)
        return data
    if isinstance(data, list) and data and rng.random() < 0.8:
        i = rng.randrange(len(data))
        data[i] = _mutate_tree(data[i], rng)
        return data
    return _hostile_value(rng)


def _make_input(rng: random.Random, where: Path, n: int) -> str:
    """Write one hostile (or valid) input under ``where`` and return its path."""
    p = where / f"in{n}.json"
    kind = rng.randrange(12)
    if kind == 0:
        p.write_bytes(rng.randbytes(rng.randrange(4096)))
    elif kind == 1:
        raw = rng.choice(REPORTS).read_bytes()
        p.write_bytes(raw[: rng.randrange(len(raw))])
    elif kind == 2:
        mutated = bytearray(rng.choice(REPORTS).read_bytes())
        for _ in range(rng.randrange(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        p.write_bytes(bytes(mutated))
    elif kind == 3:
        try:
            data = json.loads(rng.choice(REPORTS).read_text())
        except ValueError:
            data = {}
        p.write_text(json.dumps(_mutate_tree(data, rng)))
    elif kind == 4:
        depth = rng.choice([63, 64, 65, 1000, 100_000])
        p.write_text('{"schema": "l0mem.audit/1", "x": ' + "[" * depth + "]" * depth + "}")
    elif kind == 5:
        number = rng.choice(["9" * 5000, "9" * 25, "1e999", "-1e999", "1" + "0" * 4400 + ".5"])
        p.write_text('{"schema": "l0mem.audit/1", "runs": [' + number + "]}")
    elif kind == 6:
        os.mkfifo(p)
    elif kind == 7:
        p.mkdir()
    elif kind == 8:
        p.symlink_to(p)
    elif kind == 9:
        # Not /dev/zero: a regression must not read forever and fill memory.
        return rng.choice([str(where / "missing.json"), "/dev/null", ""])
    else:
        return str(rng.choice(REPORTS))
    return str(p)


def _compare_args(rng: random.Random, where: Path, n: int) -> list[str]:
    args: list[str] = []
    for _ in range(rng.randrange(3)):
        option = rng.choice(
            ["--slope-tolerance", "--allow-unjudged", "--fail-on-missing", "--json"]
        )
        args.append(option)
        if option == "--slope-tolerance":
            args.append(rng.choice(HOSTILE_NUMBERS))
        elif option == "--json":
            args.append(rng.choice([str(where / f"out{n}.json"), str(where), "/dev/null/x"]))
    if rng.random() < 0.25:
        # Real pairs too, so that the exit-1 oracle is exercised, not only the errors.
        current = rng.choice(["current-same.json", "current-regressed.json", "baseline.json"])
        return [*args, str(DATA / "baseline.json"), str(DATA / current)]
    return [*args, _make_input(rng, where, 2 * n), _make_input(rng, where, 2 * n + 1)]


def _check(result: Result, args: list[str]) -> None:
    """Assert the properties every case must have."""
    where = f"case {args!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        where,
        result.exception,
    )
    assert result.exit_code in DOCUMENTED, (where, result.exit_code, result.output)
    assert "Traceback" not in result.output, where
    # Errors quote what they refuse, but never a whole hostile input.
    assert len(result.stderr) < 8000, (where, len(result.stderr))
    if result.exit_code not in (0, 1):
        errors = [
            line for line in result.stderr.splitlines() if line.startswith(("Error:", "l0mem "))
        ]
        assert len(errors) == 1, (where, result.stderr)
        if result.exit_code != 2:  # click's usage errors add a usage line and a hint
            assert len(result.stderr.strip().splitlines()) == 1, (where, result.stderr)


def _really_regressed(args: list[str]) -> bool:
    """Return whether the two reports in ``args`` load and compare with a regression."""
    try:
        before, after = load_pair(args[-2], args[-1])
    except Exception:
        return False
    tolerance = DEFAULT_SLOPE_TOLERANCE
    for i, arg in enumerate(args[:-3]):
        if arg == "--slope-tolerance":  # click keeps the last one given
            tolerance = float(args[i + 1])
    comparison = compare_reports(
        before, after, tolerance, allow_unjudged="--allow-unjudged" in args
    )
    return bool(comparison.regressions or comparison.lost)


def test_compare_fuzz(tmp_path: Path, per_case_limit: Callable[[], None]) -> None:
    rng = random.Random(SEED)
    runner = CliRunner()
    codes: set[int] = set()
    for n in range(FILE_CASES):
        where = tmp_path / str(n)
        where.mkdir()
        args = _compare_args(rng, where, n)
        per_case_limit()
        result = runner.invoke(cli, ["compare", *args])
        _check(result, args)
        if result.exit_code == 1:
            assert _really_regressed(args), (args, result.output)
        codes.add(result.exit_code)
    # The generator reaches the interesting outcomes, not only one of them.
    assert {0, 1, 2, 4} <= codes, codes


# Values for options by what they take (the rest: strings anyone might type).
HOSTILE_TEXT = ["", " ", "\x00", "x" * 5000, "\u00b2", "-", "--", "\x1b[31mred", "a,,b", "=", "A=1"]
HOSTILE_DEVICES = [
    "0",
    "0,1",
    "1" * 5000,
    "\u00b2",
    "99999",
    ",",
    "level_zero:gpu",
    "opencl:cpu",
    "-1",
]
# String options that take a size, and --follow (SECONDS or all): numbers, refused alike.
SIZE_TEXT = {"--size", "--floor", "--host-floor"}


def _commands() -> list[tuple[str, click.Command]]:
    """Return every leaf command of the CLI by its words ("bench kernels")."""
    out: list[tuple[str, click.Command]] = []

    def walk(cmd: click.Command, words: list[str]) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*words, name])
        else:
            out.append((" ".join(words), cmd))

    walk(cli, [])
    return out


def _numeric(option: click.Option) -> bool:
    """Return whether ``option`` takes a number or a size (so an absurd one is a usage error)."""
    kinds = (click.types.IntParamType, click.types.FloatParamType)
    return (
        isinstance(option.type, kinds)
        or type(option.type).__name__ == "SizeList"
        or option.name in {"size", "floor", "host_floor", "follow"}
    )


def _values(option: click.Option, where: Path) -> list[str]:
    """Return hostile (and a few valid) values for ``option``, by the type it takes."""
    if isinstance(option.type, click.Choice):
        return [*map(str, option.type.choices), "", "bogus", "\x00", "AUTO"]
    if type(option.type).__name__ == "SizeList" or option.opts[-1] in SIZE_TEXT:
        return HOSTILE_SIZES
    if option.opts[-1] == "--follow":
        return [*HOSTILE_NUMBERS, "all", "ALL", "none"]
    if isinstance(option.type, (click.types.IntParamType, click.types.FloatParamType)):
        return HOSTILE_NUMBERS
    if isinstance(option.type, click.Path):
        fifo = where / "fifo"
        if not fifo.exists():
            os.mkfifo(fifo)
        return [str(where / "out.x"), str(where), "/dev/null/x", "", "x" * 5000, str(fifo), "-"]
    if option.opts[-1] in ("--device", "--sycl-device"):
        return HOSTILE_DEVICES
    return HOSTILE_TEXT


def _positionals(words: str, rng: random.Random) -> list[str]:
    """Return the arguments a command needs to get past its own usage check (reports, a workload)."""
    if words == "compare":
        return [
            str(DATA / "baseline.json"),
            str(DATA / rng.choice(["current-same.json", "baseline.json"])),
        ]
    if words == "matrix":
        return [str(rng.choice(REPORTS)) for _ in range(rng.randrange(1, 3))]
    if words == "run" and rng.random() < 0.8:
        return ["--", "true"]
    return []


def _stop_before_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way to a device, a workload, a tracer build or a demo step raise DeviceReached."""
    never_reach_a_device(monkeypatch)

    def _reached(*args: object, **kwargs: object) -> None:
        raise DeviceReached

    for target in ("l0mem.cli.run.Watch", "l0mem.cli.run.TraceSession", "l0mem.cli.demo._step"):
        monkeypatch.setattr(target, _reached)


def test_option_fuzz_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_case_limit: Callable[[], None]
) -> None:
    """Every option of every command, given values of its type that no user should be punished for."""
    _stop_before_work(monkeypatch)
    rng = random.Random(SEED)
    runner = CliRunner()
    commands = _commands()
    seen: set[tuple[str, str]] = set()
    for n in range(OPTION_CASES):
        words, command = commands[n % len(commands)]
        options = [p for p in command.params if isinstance(p, click.Option)]
        where = tmp_path / str(n)
        where.mkdir()
        args = words.split()
        final: dict[str, tuple[click.Option, str | None]] = {}
        for _ in range(rng.randrange(1, 4)):
            option = rng.choice(options)
            name = rng.choice(option.opts)
            seen.add((words, option.opts[-1]))
            if option.is_flag or option.count or option.opts[-1] in ("--help",):
                args.append(name)
                final[option.opts[-1]] = (option, None)
                continue
            value = rng.choice(_values(option, where))
            args += [name, value]
            final[option.opts[-1]] = (option, value)
        if rng.random() < 0.05:
            args.append(rng.choice(["--bogus", "-x", "extra"]))
        args += _positionals(words, rng)
        per_case_limit()
        absurd = [n for n, (o, v) in final.items() if v in ABSURD and _numeric(o)]
        try:
            result = runner.invoke(cli, args)
        except DeviceReached:
            # The options passed: none may have been absurd (that is exit 2, not work begun).
            assert not absurd, (args, absurd)
            continue
        _check(result, args)
        if absurd and "--help" not in args:
            assert result.exit_code == 2, (args, absurd, result.exit_code, result.output)
    every = {(w, p.opts[-1]) for w, c in commands for p in c.params if isinstance(p, click.Option)}
    assert len(seen) >= 0.9 * len(every), sorted(every - seen)
