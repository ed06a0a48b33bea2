"""``l0mem allreduce`` end to end through ``python -m l0mem``: simulator, SYCL CPU sub-devices, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sim

REPO = Path(__file__).resolve().parents[1]


def _cli(args, env, timeout=120):
    try:
        return subprocess.run(
            [sys.executable, "-m", "l0mem", "allreduce", *args],
            env={**env, "COLUMNS": "160"},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"l0mem allreduce {' '.join(args)} hung (killed after {timeout} s)")


def _check_report(data, n_dev, sizes, threshold):
    assert data["schema"] == "l0mem.allreduce/1"
    assert len(data["devices"]) == n_dev and data["threshold"] == threshold
    assert data["ok"] is True
    rows = {(r["nelem"], r["path"]): r for r in data["results"]}
    assert set(rows) == {(n, p) for n in sizes for p in ("f32", "bf16")}
    for (nelem, path), r in rows.items():
        assert r["auto"] == ((nelem < threshold) == (path == "f32"))
        assert r["within_bound"] and r["identical"]
        assert 0 <= r["max_error_to_bound"] <= 1
        assert len(r["time_ns"]["samples"]) == data["reps"]
        assert r["time_ns"]["min"] <= r["time_ns"]["median"] <= r["time_ns"]["max"]
        assert sum(r["bytes_crossed"].values()) == r["total_bytes_crossed"] > 0
        assert r["busbw_gbps"] > 0 and r["wire_gbps"] > 0
    for nelem in sizes:
        f32, bf16 = rows[(nelem, "f32")], rows[(nelem, "bf16")]
        assert 2 * bf16["total_bytes_crossed"] == f32["total_bytes_crossed"]
        # The BF16 error must show that compression happened.
        assert bf16["max_abs_error"] > f32["max_abs_error"]
    return rows


@pytest.mark.parametrize("n_dev", [2, 3, 4])
def test_simulator(tmp_path, n_dev):
    out = tmp_path / "ar.json"
    sizes = [7, 100, 1001]
    proc = _cli(
        [
            "--sizes",
            ",".join(map(str, sizes)),
            "--threshold",
            "100",
            "--reps",
            "2",
            "--json",
            str(out),
        ],
        sim.sim_env(devices=n_dev),
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout
    data = json.loads(out.read_text())
    assert data["simulated"] is True and data["backend"] == "l0"
    rows = _check_report(data, n_dev, sizes, 100)
    assert {r["algorithm"] for r in rows.values()} == {"pair" if n_dev == 2 else "ring"}
    assert set(data["routes"].values()) == {"direct"}


def test_simulator_without_peers_stages(tmp_path):
    out = tmp_path / "ar.json"
    proc = _cli(
        ["--sizes", "64", "--threshold", "32", "--reps", "1", "--json", str(out)],
        sim.sim_env(devices=3, peers="none"),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data["routes"].values()) == {"staged"}
    for r in data["results"]:
        assert r["staged_copies"] == r["copies"] > 0


def test_simulator_device_count(tmp_path):
    out = tmp_path / "ar.json"
    proc = _cli(
        ["--devices", "2", "--sizes", "10", "--reps", "1", "--json", str(out)],
        sim.sim_env(devices=4),
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(out.read_text())["devices"]) == 2


@pytest.mark.sycl
def test_sycl_cpu_sub_devices(tmp_path):
    out = tmp_path / "ar.json"
    sizes = [33, 512]
    proc = _cli(
        [
            "--backend",
            "sycl",
            "--sub-devices",
            "2",
            "--sizes",
            "33,512",
            "--threshold",
            "512",
            "--reps",
            "2",
            "--json",
            str(out),
        ],
        dict(os.environ),
    )
    if proc.returncode == 3 and "compute units" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["backend"] == "sycl" and data["simulated"] is False
    _check_report(data, 2, sizes, 512)
    assert set(data["routes"].values()) == {"staged"}


@pytest.mark.parametrize(
    ("args", "devices", "code", "needle"),
    [
        (["--devices", "5"], 2, 3, "needs 5 devices, 2 available"),
        ([], 1, 3, "needs 2 devices, 1 available"),
        (["--threshold", "-1"], 2, 2, "--threshold"),
        (["--sizes", "1,,x"], 2, 2, "bad size"),
    ],
)
def test_errors(args, devices, code, needle):
    proc = _cli([*args, "--reps", "1"], sim.sim_env(devices=devices))
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr


def test_no_driver_is_exit_3():
    env = {**os.environ, "ZE_ENABLE_ALT_DRIVERS": "/nonexistent/libze_none.so"}
    proc = _cli(["--sizes", "8"], env)
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1
