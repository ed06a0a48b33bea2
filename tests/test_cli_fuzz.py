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

import pytest
from click.testing import CliRunner, Result

from l0mem.audit.compare import DEFAULT_SLOPE_TOLERANCE, compare_reports, load_pair
from l0mem.cli import cli
from tests.support.cli import DeviceReached, never_reach_a_device

SEED = 9
FILE_CASES = 150
OPTION_CASES = 200
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


_OPTIONS: dict[str, list[tuple[str, list[str]]]] = {
    "p2p": [
        ("--sizes", HOSTILE_SIZES),
        ("--reps", HOSTILE_NUMBERS),
        ("--warmup", HOSTILE_NUMBERS),
        ("--sub-devices", HOSTILE_NUMBERS),
        ("--backend", ["auto", "l0", "sycl", "cuda", ""]),
        ("--device", ["0", "99999999999999999999", "level_zero:gpu", ",", "x", "\u00b2"]),
    ],
    "allreduce": [
        ("--seed", HOSTILE_NUMBERS),
        ("--threshold", HOSTILE_NUMBERS),
        ("--count", HOSTILE_NUMBERS),
        ("--sizes", HOSTILE_SIZES),
        ("--reps", HOSTILE_NUMBERS),
        ("--transport", ["auto", "staged", "none"]),
    ],
    "bench kernels": [
        ("--elements", HOSTILE_NUMBERS),
        ("--work-group-size", HOSTILE_NUMBERS),
        ("--warmup", HOSTILE_NUMBERS),
        ("--context", ["default", "single", "many"]),
    ],
    "audit": [
        ("--steps", HOSTILE_NUMBERS),
        ("--settle", HOSTILE_NUMBERS),
        ("--floor", HOSTILE_SIZES),
        ("--size", HOSTILE_SIZES),
        ("--env", ["A=1", "=", "noequals", "A=" + "x" * 1000]),
        ("--device", ["0", "0,1", "1" * 5000, "\u00b2", "99999", ",", "level_zero:gpu"]),
    ],
}


def test_option_fuzz(monkeypatch: pytest.MonkeyPatch, per_case_limit: Callable[[], None]) -> None:
    never_reach_a_device(monkeypatch)
    rng = random.Random(SEED)
    runner = CliRunner()
    for _ in range(OPTION_CASES):
        command = rng.choice(sorted(_OPTIONS))
        args = command.split()
        final: dict[str, str] = {}  # click keeps the last value of a repeated option
        for _ in range(rng.randrange(1, 4)):
            name, values = rng.choice(_OPTIONS[command])
            final[name] = rng.choice(values)
            args += [name, final[name]]
        if rng.random() < 0.1:
            args.append(rng.choice(["--bogus", "-x", "extra", "--help"]))
        per_case_limit()
        try:
            result = runner.invoke(cli, args)
        except DeviceReached:
            # The options passed: none may have been absurd (it is exit 2, not a device run).
            assert not ABSURD.intersection(final.values()), args
            continue
        _check(result, args)
