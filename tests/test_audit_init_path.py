"""The audit end to end before the simulator offered with and without zeInitDrivers.

Part of the loader matrix (.ci/conformance runs it behind loader 1.32 too):
whichever call initialized Level Zero, the audit finds the simulator's devices,
runs a set-up over two of them and records that call in the report's fingerprint. Nothing
here reads a measured figure, so other processes moving system memory cannot
change the outcome.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from l0mem.backends.base import is_simulator_name
from l0mem.cli._common import ExitCode
from tests.support import sim as simsupport
from tests.support.cli import run_json


@pytest.mark.parametrize("offered", ["0", "1"], ids=["driver-without", "driver-with"])
def test_audit_runs_and_records_the_init_path(tmp_path: Path, offered: str) -> None:
    env = simsupport.sim_env(devices=2, init_drivers=offered)
    # A small total and no floor: the audit never waits on this machine's free memory.
    args = ["--setups", "l0-multi", "--size", "64M", "--steps", "3", "--no-floor"]
    proc, report = run_json("audit", args, env, tmp_path / "audit.json")
    assert proc.returncode == ExitCode.OK
    assert "Traceback" not in proc.stderr
    fp = report["fingerprint"]
    want = "zeInitDrivers" if offered == "1" and simsupport.loader_has_init_drivers() else "zeInit"
    assert fp["loader"]["init_path"] == want
    assert fp["loader"]["components"], "the loader's components are listed"
    assert fp["simulated"] is True
    assert report["complete"] is True
    (run,) = report["runs"]
    assert run["setup"] == "l0-multi" and run["status"] == "ok" and run["samples"], run
    assert run["result"] is not None
    names = [d["name"] for d in run["devices"]]
    assert len(names) == 2 and all(is_simulator_name(n) for n in names), names
