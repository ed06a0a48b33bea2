"""The base install has no NumPy: audit, run, watch, p2p and info work without it; allreduce says what to install."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.support import sim
from tests.support.cli import run_l0mem
from tests.support.jobs import peer_resident_job
from tests.support.own_memory import TRUTH_KEY, host_env

# Run first by the interpreter (site imports it): NumPy cannot be imported at all.
_BLOCK = """\
import sys


class _NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, _NoNumpy())

# Python runs only the first sitecustomize on the path: run the one this shadows (the
# quiet host of tests/support/child_site), so that only NumPy's absence differs.
import importlib.util, os

_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    _next = os.path.join(_entry or ".", "sitecustomize.py")
    if os.path.abspath(_entry or ".") != _here and os.path.isfile(_next):
        _spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", _next)
        _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
"""


@pytest.fixture
def no_numpy(tmp_path: Path) -> Callable[[Mapping[str, str]], dict[str, str]]:
    """Return a function giving an environment whose Python cannot import NumPy."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCK)

    def blocked(env: Mapping[str, str]) -> dict[str, str]:
        path = env.get("PYTHONPATH")
        return {**env, "PYTHONPATH": str(site) + (os.pathsep + path if path else "")}

    return blocked


Blocked = Callable[[Mapping[str, str]], dict[str, str]]


def test_the_block_holds(no_numpy: Blocked, tmp_path: Path) -> None:
    proc = run_l0mem("allreduce", ["--sizes", "4096"], no_numpy(sim.sim_env(devices=2)))
    assert proc.returncode != 0 and "pip install 'l0mem[bench]'" in proc.stderr, proc.stderr


def test_audit_with_remedies_and_p2p_verify_run_without_numpy(
    no_numpy: Blocked, tmp_path: Path
) -> None:
    env = no_numpy(host_env(sim.sim_env(mirror="peer-resident")))
    out = tmp_path / "audit.json"
    args = ["--setups", "l0,l0-peer-resident", "--size", "128MiB", "--steps", "4", "--settle", "0"]
    proc = run_l0mem("audit", [*args, "--remedies", "--json", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(out.read_text())["runs"]
    verdicts = {r["setup"]: r["result"]["verdict"] for r in runs if not r.get("remedy")}
    assert verdicts == {"l0": "clean", "l0-peer-resident": "mirror"}
    p2p = tmp_path / "p2p.json"
    proc = run_l0mem("p2p", ["--verify-only", "--json", str(p2p)], no_numpy(sim.sim_env(devices=2)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(p2p.read_text())["ok"] is True


def test_run_and_info_without_numpy(no_numpy: Blocked, tmp_path: Path) -> None:
    job, env = peer_resident_job()
    out = tmp_path / "run.json"
    opts = ["--quiet", "--trace", "--interval", "0.05", "--json", str(out)]  # as test_prometheus runs it
    proc = run_l0mem("run", [*opts, "--", *job], no_numpy(env))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    # On the quiet host (its ground truth is in the samples): no other process decides.
    assert any(TRUTH_KEY in s["values"] for s in report["samples"])
    assert report["summary"]["verdict"] == "mirror"
    proc = run_l0mem("info", [], no_numpy(sim.sim_env(devices=2)))
    assert proc.returncode == 0, proc.stderr
