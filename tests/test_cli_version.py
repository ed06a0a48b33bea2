"""``l0mem --version``: l0mem's, the loader's and the SYCL runtime's versions, no device opened."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from l0mem import __version__
from l0mem.cli import cli
from tests.support.cli import DeviceReached, never_reach_a_device, run_l0mem


def test_version_names_l0mem_the_loader_and_the_sycl_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    never_reach_a_device(monkeypatch)

    def no_init(*args: object, **kwargs: object) -> None:
        raise DeviceReached

    monkeypatch.setattr("l0mem._ze.drivers.init", no_init)
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"l0mem {__version__}"
    assert lines[1].startswith("Level Zero loader 1.") and "libze_loader.so" in lines[1]
    assert lines[2] == (
        f"SYCL runtime: dpctl {importlib.metadata.version('dpctl')}, "
        f"intel-sycl-rt {importlib.metadata.version('intel-sycl-rt')}, "
        f"intel-opencl-rt {importlib.metadata.version('intel-opencl-rt')}"
    )


def test_a_missing_loader_is_said_never_a_crash() -> None:
    env = {**os.environ, "L0MEM_ZE_LOADER": "/nonexistent/libze_loader.so.1"}
    proc = run_l0mem("--version", [], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].startswith("Level Zero loader: not found (cannot load")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_script_comes_from_the_installed_command(shell: str) -> None:
    command = str(Path(sys.executable).with_name("l0mem"))
    env = {**os.environ, "_L0MEM_COMPLETE": f"{shell}_source"}
    proc = subprocess.run(
        [command], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "_l0mem_completion" in proc.stdout


def test_completion_offers_commands_and_options() -> None:
    command = str(Path(sys.executable).with_name("l0mem"))

    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "_L0MEM_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        proc = subprocess.run(
            [command], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        return [line.partition(",")[2] for line in proc.stdout.splitlines()]

    assert complete("l0mem au") == ["audit"]
    assert complete("l0mem p2p --veri") == ["--verify-only"]
    assert complete("l0mem p2p --ver") == ["--verify-only", "--verbose"]
