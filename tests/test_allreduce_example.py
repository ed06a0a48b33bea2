"""examples/allreduce_example.py runs on the simulator and on SYCL CPU sub-devices."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sim

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "allreduce_example.py"


def _run(env):
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "40000"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _lines(stdout):
    found = re.findall(
        r"(f32|bf16) (pair|ring) over (\d+) devices: ([\d,]+) bytes .* within bound: (\w+)", stdout
    )
    return {path: (algo, int(n), int(b.replace(",", "")), ok) for path, algo, n, b, ok in found}


def test_example_on_the_simulator():
    proc = _run(sim.sim_env(devices=3))
    assert proc.returncode == 0, proc.stderr
    got = _lines(proc.stdout)
    assert got["f32"][:2] == ("ring", 3) and got["bf16"][:2] == ("ring", 3)
    assert got["f32"][2] == 2 * got["bf16"][2] > 0
    assert got["f32"][3] == got["bf16"][3] == "True"


@pytest.mark.sycl
def test_example_on_sycl_sub_devices():
    env = {**os.environ, "ZE_ENABLE_ALT_DRIVERS": "/nonexistent/libze_none.so"}
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr
    got = _lines(proc.stdout)
    assert got["bf16"][:2] == ("pair", 2) and got["bf16"][3] == "True"
