"""``l0mem demo`` end to end: the audit and a watched job on the simulated driver, labelled as such."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from l0mem.cli.demo import BANNER, SIM_VAR, demo_env
from tests.support import sim
from tests.support.cli import REPO_ROOT


def _demo(out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "l0mem", "demo", "--size", "64M", "--out", str(out), *extra],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def shown(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Return the finished demo (its output) and its reports' directory."""
    out = tmp_path_factory.mktemp("demo")
    # The user's own simulator settings and driver variables must not change what it shows.
    env = {
        **sim.sim_env(devices=1, mirror="none"),
        "NEOReadDebugKeys": "1",
        "EnableDeferBacking": "0",
    }
    proc = _demo(out, env)
    stdout, stderr = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), out


def test_the_demo_runs_its_three_steps_on_the_simulator_and_says_so(
    shown: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = shown
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == BANNER
    steps = [ln for ln in lines if ln.startswith("== ")]
    assert [s.split(".")[0] for s in steps] == ["== 1", "== 2", "== 3"]
    assert all("SIMULATION:" in s for s in steps)
    assert f"The reports are in {out}" in proc.stdout
    assert "SIMULATOR" in proc.stdout  # the steps' own labels
    assert sorted(p.name for p in out.iterdir()) == [
        "audit.json",
        "run-no-peer-residency.json",
        "run.json",
    ]


def test_the_demo_audit_shows_the_mirror_and_its_remedy(
    shown: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = shown
    report = json.loads((out / "audit.json").read_text())
    runs = {(r["setup"], r.get("remedy")): r for r in report["runs"]}
    assert all(r["simulated"] for r in runs.values())
    # Never a wrong verdict; a busy machine may leave one undecided.
    assert runs[("l0", None)]["result"]["verdict"] in ("clean", "inconclusive")
    assert runs[("l0-peer-resident", None)]["result"]["verdict"] in ("mirror", "inconclusive")
    assert any(remedy for _, remedy in runs)


def test_the_demo_job_mirrors_and_no_peer_residency_removes_it(
    shown: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = shown
    run = json.loads((out / "run.json").read_text())
    npr = json.loads((out / "run-no-peer-residency.json").read_text())
    assert run["simulated"] and npr["simulated"]
    (owner,) = [d for d in run["trace"]["devices"] if d["index"] == 0]
    assert owner["allocated_peak"] == 64 << 20 and owner["resident_on_peak"] == {"1": 64 << 20}
    assert run["summary"]["analysis"]["verdict"] in ("mirror", "inconclusive")
    assert npr["summary"]["analysis"]["verdict"] in ("clean", "inconclusive")
    (owner,) = [d for d in npr["trace"]["devices"] if d["index"] == 0]
    assert owner["resident_on_peak"] in ({}, {"1": 0})


def test_the_demo_environment_is_two_mirroring_simulated_gpus_whatever_the_user_set() -> None:
    user = {
        **{"ZESIM_DEVICES": "1", "ZESIM_FAIL_ALLOC_AT": "1", "ZE_AFFINITY_MASK": "0"},
        **{"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "0"},
        **{"L0MEM_ZE_LOADER": "/l/libze_loader.so.1", "HOME": "/h"},
    }
    env = demo_env(Path("/x/libze_sim.so"), user)
    assert env["ZE_ENABLE_ALT_DRIVERS"] == "/x/libze_sim.so"
    assert (env["ZESIM_DEVICES"], env["ZESIM_MIRROR"]) == ("2", "peer-resident")
    gone = ("ZESIM_FAIL_ALLOC_AT", "ZE_AFFINITY_MASK", "NEOReadDebugKeys")
    assert not set(gone) & set(env) and "ForceZeDeviceCanAccessPerReturnValue" not in env
    # The user's loader and everything unrelated to drivers stay.
    assert env["L0MEM_ZE_LOADER"] == "/l/libze_loader.so.1" and env["HOME"] == "/h"


def test_a_report_the_demo_cannot_write_stops_it_before_any_step(tmp_path: Path) -> None:
    (tmp_path / "audit.json").mkdir()  # no report can replace a directory
    proc = subprocess.run(
        [sys.executable, "-m", "l0mem", "demo", "--out", str(tmp_path)],
        env=sim.sim_env(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith("l0mem demo: ") and "audit.json: cannot write" in proc.stderr
    assert BANNER not in proc.stdout


def test_without_a_simulated_driver_it_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != SIM_VAR}
    proc = subprocess.run(
        [sys.executable, "-m", "l0mem", "demo", "--out", str(tmp_path / "out")],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    line = proc.stderr.strip()
    assert line.startswith("l0mem demo: this checkout's simulated driver is not built"), line
    assert "libze-dev" in line and not (tmp_path / "out").exists()
    # The command it gives builds the simulator and names it: run exactly that.
    assignment = line.split(f"{SIM_VAR}=", 1)[1].rsplit(" l0mem demo", 1)[0]
    named = subprocess.run(
        ["sh", "-c", f"printf %s {assignment}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert named.returncode == 0, named.stderr
    assert Path(named.stdout).is_file() and Path(named.stdout).name == "libze_sim.so"


def test_an_install_without_the_simulator_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import l0mem
    from l0mem.cli.demo import no_simulator

    monkeypatch.delenv(SIM_VAR, raising=False)
    monkeypatch.setattr(l0mem, "__file__", str(tmp_path / "site" / "l0mem" / "__init__.py"))
    why = no_simulator()
    assert why.startswith("this l0mem was installed without its simulated driver"), why
    assert "libze-dev" in why and "install l0mem's wheel" in why and "tests.support" not in why
    monkeypatch.setenv(SIM_VAR, str(tmp_path / "nothing.so"))
    assert no_simulator() == f"{SIM_VAR}={tmp_path / 'nothing.so'}: no such file"


def test_sigterm_during_a_step_stops_the_step_too_and_keeps_its_report(tmp_path: Path) -> None:
    proc = _demo(tmp_path, sim.sim_env())
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        if line.startswith("== 2.") or time.monotonic() > deadline:
            break
    time.sleep(2.0)  # the job under way
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["stop_signal"] == "SIGTERM"
    assert not (tmp_path / "run-no-peer-residency.json").exists()
