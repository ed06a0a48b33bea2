"""Run ``python -m l0mem COMMAND`` in a subprocess for end-to-end command tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_child(
    argv: Sequence[str], environ: Mapping[str, str], timeout: float = 180, name: str = ""
) -> subprocess.CompletedProcess[str]:
    """Return the finished child ``argv`` (``name`` in the failure, else argv); fail the test if it hangs."""
    try:
        return subprocess.run(
            list(argv),
            env=dict(environ),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name or ' '.join(argv)} hung (killed after {timeout} s)")


def run_l0mem(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    timeout: float = 120,
    columns: int = 160,
) -> subprocess.CompletedProcess[str]:
    """Return the finished ``l0mem COMMAND ARGS`` run (``columns`` wide); fail the test if it hangs."""
    return run_child(
        [sys.executable, "-m", "l0mem", command, *args],
        {**env, "COLUMNS": str(columns)},
        timeout,
        name=f"l0mem {command} {' '.join(args)}",
    )


def no_driver_env() -> dict[str, str]:
    """Return os.environ with the loader pointed at a Level Zero driver that does not exist."""
    return {**os.environ, "ZE_ENABLE_ALT_DRIVERS": "/nonexistent/libze_none.so"}


def skip_if_too_few_compute_units(proc: subprocess.CompletedProcess[str]) -> None:
    """Skip the test when ``--sub-devices`` could not partition this machine's SYCL CPU device.

    The commands exit 3 ("no usable device for the request") with a line naming
    the compute units; tests/test_cli_p2p.py checks that they do.
    """
    if proc.returncode == 3 and "compute units" in proc.stderr:
        pytest.skip(proc.stderr.strip())


def one_line(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """Return the single stderr line of a failed ``l0mem COMMAND`` run (fail the test otherwise)."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"l0mem {command}: "), lines[0]
    return lines[0]


def _json_of(proc: subprocess.CompletedProcess[str], json_path: Path) -> dict[str, Any]:
    """Return the JSON a run wrote to ``json_path``, after checking that it exited 0."""
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(json_path.read_text()))


def run_json(
    command: str, args: Sequence[str], env: Mapping[str, str], json_path: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``l0mem COMMAND ARGS --json JSON_PATH``, which must exit 0; return it and its JSON."""
    proc = run_l0mem(command, [*args, "--json", str(json_path)], env)
    return proc, _json_of(proc, json_path)


def run_json_on_sycl_cpu_pair(command: str, args: Sequence[str], json_path: Path) -> dict[str, Any]:
    """Return the JSON of ``run_json`` over two SYCL sub-devices of one device (the CPU here)."""
    proc = run_l0mem(
        command,
        ["--backend", "sycl", "--sub-devices", "2", *args, "--json", str(json_path)],
        dict(os.environ),
    )
    skip_if_too_few_compute_units(proc)
    return _json_of(proc, json_path)


class DeviceReached(BaseException):
    """A command got past option parsing to the device side (never allowed in these tests)."""


def never_reach_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way to a device raise DeviceReached (a BaseException: no command maps it)."""

    def _reached(*args: object, **kwargs: object) -> None:
        raise DeviceReached

    for target in (
        "l0mem.backends.open_backend",
        "l0mem.backends.select_devices",
        "l0mem.cli.audit.run_audit",
    ):
        monkeypatch.setattr(target, _reached)


def command_params(keep: Callable[[click.Parameter], bool]) -> dict[tuple[str, str], Any]:
    """Return every parameter of every l0mem command that ``keep`` takes, by (command, name)."""
    from l0mem.cli import cli

    found: dict[tuple[str, str], Any] = {}

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                walk(command, f"{prefix}{name} ")
            elif command is not None:
                for p in command.params:
                    if keep(p):
                        found[f"{prefix}{name}", p.opts[-1]] = p

    walk(cli, "")
    return found


def usage_error(args: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """Return the usage error ``l0mem ARGS`` gives (exit 2, nothing on stdout), blanks joined, before any work."""
    from click.testing import CliRunner

    from l0mem.cli import cli

    never_reach_a_device(monkeypatch)
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == ""
    return " ".join(result.stderr.split())
