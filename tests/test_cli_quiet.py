"""``-q`` in every command that takes it: the answer alone (no progress, no tables), never with ``-v``."""

from __future__ import annotations

import os
import sys

import click
import pytest
from click.testing import CliRunner

from l0mem.cli import cli
from tests.support import sim
from tests.support.cli import never_reach_a_device, one_line, run_l0mem
from tests.support.own_memory import host_env


def _commands(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    """Return every command of the command line by its full name (``bench kernels``)."""
    found: dict[str, click.Command] = {}
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        full = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found.update(_commands(command, f"{full} "))
        elif command is not None:
            found[full] = command
    return found


def _has(command: click.Command, flag: str) -> bool:
    return any(flag in p.opts for p in command.params if isinstance(p, click.Option))


QUIET = sorted(name for name, c in _commands().items() if _has(c, "-q"))
BOTH = sorted(name for name in QUIET if _has(_commands()[name], "-v"))


def test_the_commands_that_take_quiet_are_the_measuring_ones_and_compare() -> None:
    assert QUIET == ["allreduce", "audit", "bench kernels", "compare", "p2p", "run", "watch"]
    assert set(QUIET) - set(BOTH) <= {"compare"}


@pytest.mark.parametrize("name", BOTH)
@pytest.mark.parametrize("order", [("-q", "-v"), ("-v", "--quiet"), ("--verbose", "-q"), ("-qv",)])
def test_quiet_with_verbose_is_one_usage_line_in_every_command(
    name: str, order: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # audit, run and watch took both (run: -q meant "no live view"); now none does.
    never_reach_a_device(monkeypatch)
    result = CliRunner().invoke(cli, [*name.split(), *order])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"l0mem {name}: "), result.stderr
    assert "-q/--quiet" in lines[0] and "-v/--verbose" in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("name", QUIET)
def test_every_quiet_option_says_the_same(name: str) -> None:
    (option,) = [p for p in _commands()[name].params if "-q" in getattr(p, "opts", ())]
    assert isinstance(option, click.Option) and option.is_flag and option.name == "answer_only"
    assert (option.help or "").startswith("Print the answer only (its first lines): no progress")


AUDIT = ["audit", "-q", "--setups", "l0,l0-peer-resident", "--size", "96MiB", "--steps", "3"]
AUDIT += ["--settle", "0"]
RUN = [
    "run",
    "-q",
    "--interval",
    "0.05",
    "--",
    sys.executable,
    "-c",
    "import time; time.sleep(0.5)",
]
WATCH = ["watch", "-q", "--interval", "0.05", "--pid", str(os.getpid()), "--duration", "0.5"]


@pytest.mark.parametrize(
    "argv", [AUDIT, RUN, WATCH, [*RUN[:1], "-qq", *RUN[2:]]], ids=lambda a: " ".join(a[:2])
)
def test_quiet_prints_the_answer_alone_with_no_progress(argv: list[str]) -> None:
    # Off a terminal the audit printed a line per step and run/watch one per sample.
    env = host_env(sim.sim_env(mirror="peer-resident"))
    proc = run_l0mem(argv[0], argv[1:], env)
    assert proc.returncode == 0, proc.stderr
    # run's lines are l0mem's stderr (stdout is the workload's); the others' answer is stdout.
    answer = (proc.stderr if argv[0] == "run" else proc.stdout).strip().splitlines()
    rest = proc.stdout if argv[0] == "run" else proc.stderr
    assert 1 <= len(answer) <= 5, answer
    assert answer[0].startswith(("[SIMULATOR] ", "SIMULATOR (", "verdict: ")), answer
    assert rest.strip() == "", rest
    assert not any(mark in "\n".join(answer) for mark in ("━", "──", "┃", "│", " t=", "step "))


def test_the_audits_quiet_answer_says_why_where_it_would_point_below() -> None:
    # -q prints nothing below the answer: "below: why" pointed at nothing.
    env = host_env(sim.sim_env(fail_alloc_at=1))
    proc = run_l0mem("audit", ["-q", "--setups", "l0", "--size", "64MiB", "--steps", "3"], env)
    assert proc.returncode == 3, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    assert "below" not in line and "l0: device memory ran out" in line, line
    loud = run_l0mem("audit", ["--setups", "l0", "--size", "64MiB", "--steps", "3"], env)
    assert "below: why" in loud.stdout.splitlines()[0]
    assert one_line(proc, "audit").startswith("l0mem audit: error: no set-up measured")
