"""Standard output or error on a full disk: the command keeps its exit code and says so, never a traceback.

``l0mem info > /dev/full`` ended with a traceback and exit 70 (a bug's code)
in every command that prints, and ``2>/dev/full`` with exit 1: only a reader
that left (EPIPE) or a terminal that hung up (EIO) stopped the printing
quietly. A write that fails because the file cannot grow (ENOSPC, EDQUOT,
EFBIG) stops it too, with one line on stderr where stderr can take it: the
reports are written before anything is printed, so the exit code is the
command's own, as with a reader that left (docs/guide/exit-codes.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from l0mem.audit.report import write_json
from tests.support import sim
from tests.support.cli import REPO_ROOT
from tests.test_analysis import synthetic_report, synthetic_run

FULL = "/dev/full"


def _commands(tmp: Path) -> dict[str, list[str]]:
    a, b = tmp / "a.json", tmp / "b.json"
    write_json(synthetic_report([synthetic_run(1.0)]), a)
    write_json(synthetic_report([synthetic_run(0.0)]), b)
    return {
        "info": ["info"],
        "p2p": ["p2p", "--backend", "l0", "--sizes", "4KiB", "--reps", "2"],
        "allreduce": ["allreduce", "--backend", "l0", "--sizes", "4KiB", "--reps", "2"],
        "bench": ["bench", "kernels", "--backend", "l0", "--reps", "2", "--elements", "1024"],
        "matrix": ["matrix", str(a), str(b)],
        "compare": ["compare", str(a), str(b)],  # a regression: exit 1, kept
        "matrix-missing": ["matrix", str(tmp / "missing.json")],  # exit 4, kept
        "run": ["run", "--", sys.executable, "-c", "pass"],  # its own output is its own
    }


def _run(
    args: list[str], stdout: int | IO[Any], stderr: int | IO[Any]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "l0mem", *args],
        env={**sim.sim_env(devices=2), "COLUMNS": "120"},
        cwd=REPO_ROOT,
        stdout=stdout,
        stderr=stderr,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "name", ["info", "p2p", "allreduce", "bench", "matrix", "compare", "matrix-missing", "run"]
)
def test_a_full_disk_behind_either_stream_keeps_the_exit_code(tmp_path: Path, name: str) -> None:
    args = _commands(tmp_path)[name]
    plain = _run(args, subprocess.PIPE, subprocess.PIPE)
    assert "Traceback" not in plain.stderr, plain.stderr
    with open(FULL, "w") as full:
        out_full = _run(args, full, subprocess.PIPE)
    assert out_full.returncode == plain.returncode, out_full.stderr
    assert "Traceback" not in out_full.stderr and "internal error" not in out_full.stderr
    if plain.stdout.strip():
        # What was printed is lost, and one line says so (the reader did not just leave).
        said = [ln for ln in out_full.stderr.splitlines() if "No space left on device" in ln]
        assert len(said) == 1 and said[0].startswith("l0mem "), out_full.stderr
        assert "standard output" in said[0], said[0]
    with open(FULL, "w") as full:
        err_full = _run(args, subprocess.PIPE, full)
    assert err_full.returncode == plain.returncode, err_full.stdout
