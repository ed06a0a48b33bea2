"""``l0mem p2p`` end to end through ``python -m l0mem``: simulator, SYCL CPU sub-devices, errors."""

from __future__ import annotations

import pytest

from tests.support import sim
from tests.support.cli import no_driver_env, run_json, run_json_on_sycl_cpu_pair, run_l0mem


def _cli(args, env):
    return run_l0mem("p2p", args, env)


def test_simulator_three_devices_partial_peers(tmp_path):
    out = tmp_path / "p2p.json"
    proc, data = run_json(
        "p2p",
        ["--sizes", "4K,64K", "--reps", "3", "--warmup", "1"],
        sim.sim_env(devices=3, peers="0>1,1>0"),
        out,
    )
    assert "simulator" in proc.stdout
    assert data["schema"] == "l0mem.p2p/1" and data["backend"] == "l0" and data["simulated"]
    assert [d["index"] for d in data["devices"]] == [0, 1, 2]
    assert data["sizes"] == [4096, 65536] and data["reps"] == 3
    access = {(p["src"], p["dst"]): p["can_access"] for p in data["peers"]}
    assert access == {
        (s, d): (s, d) in {(0, 1), (1, 0)} for s in range(3) for d in range(3) if s != d
    }
    copies = {(c["kind"], c["src"], c["dst"], c["nbytes"]): c for c in data["copies"]}
    assert len(copies) == 2 * (3 + 6 + 6)
    for (kind, s, d, _), c in copies.items():
        if kind == "direct" and {s, d} != {0, 1}:
            assert c["skipped"] == "no peer access" and c["gbps"] is None
            continue
        assert c["skipped"] is None and len(c["samples_ns"]) == 3
        assert c["min_ns"] <= c["median_ns"] <= c["max_ns"]
        assert c["gbps_min"] <= c["gbps"] <= c["gbps_max"]
    assert not list(tmp_path.glob(".p2p.json.*"))  # no temporary file left behind


def test_simulator_device_selection():
    proc = _cli(
        ["--device", "1", "--device", "0", "--sizes", "4K", "--reps", "1"], sim.sim_env(devices=3)
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulated GPU 2" not in proc.stdout and "1>0" in proc.stdout


@pytest.mark.sycl
def test_sycl_cpu_sub_devices(tmp_path):
    out = tmp_path / "p2p.json"
    data = run_json_on_sycl_cpu_pair("p2p", ["--sizes", "64K", "--reps", "2"], out)
    assert data["backend"] == "sycl" and not data["simulated"]
    assert any("CPU" in n for n in data["notes"])
    kinds = {(c["kind"], c["src"], c["dst"]): c for c in data["copies"]}
    assert kinds[("direct", 0, 1)]["skipped"] and kinds[("direct", 1, 0)]["skipped"]
    for key in (("same_device", 0, 0), ("staged", 0, 1), ("staged", 1, 0)):
        assert kinds[key]["skipped"] is None and kinds[key]["gbps"] > 0


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--sizes", "12X"], 2, "bad size"),
        (["--sizes", "4K", "--device", "7"], 2, "device index"),
        (["--sizes", "4K", "--sub-devices", "2"], 2, "sycl only"),
        (["--reps", "0"], 2, "--reps"),
    ],
)
def test_bad_options(args, code, needle):
    proc = _cli(args, sim.sim_env(devices=2))
    assert proc.returncode == code
    assert needle in proc.stderr


def test_no_driver_is_exit_3():
    proc = _cli(["--sizes", "4K"], no_driver_env())
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l0mem p2p:")


def test_unwritable_json_is_exit_4(tmp_path):
    target = tmp_path / "missing" / "p2p.json"
    proc = _cli(["--sizes", "4K", "--reps", "1", "--json", str(target)], sim.sim_env(devices=2))
    assert proc.returncode == 4 and "cannot write" in proc.stderr
    assert not target.exists()
