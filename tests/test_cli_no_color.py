"""``NO_COLOR`` and ``TERM=dumb`` on every command that styles its output, on a real terminal.

Each command runs on a pseudo-terminal (where rich styles its output) with a
short run on the simulator, three ways: a colour terminal (the control: the
command does colour or style its output there), ``NO_COLOR=1`` (no colour
escape: https://no-color.org leaves bold and italics to the program) and
``TERM=dumb`` (no escape sequence at all: no colour, no bold, no cursor
movement of a live view or progress bar).
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from l0mem.cli import _COMMANDS
from tests.support import sim
from tests.support.cli import REPO_ROOT
from tests.support.own_memory import host_env

# A colour escape: SGR foreground or background, 8, 16, 256 colours or true colour.
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")
ESCAPE = "\x1b["
REPORTS = "tests/data/reports"

# Where a default run shows colours; run and watch style (bold, a live view) without colour.
COLOURED = {"info", "audit", "compare", "matrix", "p2p", "allreduce", "bench kernels"}
STYLED = {"run", "watch"}
# Prints plain lines of its own; its steps are audit and run, children on the same terminal.
NOT_HERE = {"demo": "its steps are the audit and run cases (the same terminal, the same variables)"}

# The variables that make rich colour or not whatever the terminal says: the user's, not these tests'.
_FORCING = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLORTERM")


@pytest.fixture(scope="module")
def sleeper() -> Iterator[int]:
    """Yield the pid of a process for ``watch`` to watch (ended afterwards)."""
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _case(command: str, sleeper: int) -> tuple[list[str], dict[str, str]]:
    """Return the arguments and environment of a short run of ``command``."""
    two = sim.sim_env(devices=2, mirror="peer-resident")
    quick = ["--backend", "l0", "--reps", "1", "--warmup", "0"]
    reports = [f"{REPORTS}/baseline.json", f"{REPORTS}/current-regressed.json"]
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "info": ([], two),
        "audit": (
            ["--setups", "l0,l0-peer-resident", "--size", "64MiB", "--steps", "3", "--settle", "0"],
            host_env(two),
        ),
        "compare": (reports, {}),
        "matrix": (reports, {}),
        "p2p": (["--sizes", "4K", *quick], two),
        "allreduce": (["--sizes", "16K", *quick], two),
        "bench kernels": (["--elements", "4096", *quick], two),
        "run": (["--", sys.executable, "-c", "import time; time.sleep(0.5)"], two),
        "watch": (["--pid", str(sleeper), "--duration", "1"], two),
    }
    return cases[command]


def _on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Return the exit code and everything ``argv`` wrote on a pseudo-terminal (stdout and stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO_ROOT)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and select.select([master], [], [], 10)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=30)
        os.close(master)
    return proc.returncode, out.decode(errors="replace")


def test_every_command_is_checked_or_said_why_not() -> None:
    # A new command that prints is added here, or to NOT_HERE with the reason.
    names = set(_COMMANDS) - {"bench"} | {"bench kernels"}
    assert names == COLOURED | STYLED | set(NOT_HERE)


@pytest.mark.parametrize("command", sorted(COLOURED | STYLED))
def test_no_color_and_a_dumb_terminal_are_honoured(command: str, sleeper: int) -> None:
    args, extra = _case(command, sleeper)
    argv = [sys.executable, "-m", "l0mem", *command.split(), *args]
    base = {k: v for k, v in os.environ.items() if k not in _FORCING}
    base.update(extra, COLUMNS="120")
    shown = {}
    for name, terminal in (
        ("colour", {"TERM": "xterm-256color"}),
        ("NO_COLOR", {"TERM": "xterm-256color", "NO_COLOR": "1"}),
        ("dumb", {"TERM": "dumb"}),
    ):
        code, text = _on_a_terminal(argv, {**base, **terminal})
        assert code in (0, 1), f"{command} ({name}) exited {code}:\n{text[-2000:]}"
        assert len(text.strip()) > 100, text  # it printed its result
        shown[name] = text
    # The control: on a colour terminal the command colours (or styles) what it prints.
    if command in COLOURED:
        assert COLOUR.search(shown["colour"]), f"{command}: no colour by default"
    else:
        assert ESCAPE in shown["colour"] and not COLOUR.search(shown["colour"])
    found = COLOUR.findall(shown["NO_COLOR"])
    assert not found, f"{command} with NO_COLOR=1: colour escapes {sorted(set(found))}"
    escapes = sorted(set(re.findall(r"\x1b\[[0-9;?]*[A-Za-z]", shown["dumb"])))
    assert ESCAPE not in shown["dumb"], f"{command} with TERM=dumb: escapes {escapes}"
