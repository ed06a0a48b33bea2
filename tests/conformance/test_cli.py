"""l0mem's commands end to end on NEO without hardware: no crash, no traceback, no untrue number.

Every command runs with the loader's validation layer and its leak checker
too: l0mem must release every handle it created.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from l0mem.audit.remedies import ALL_SETUPS
from l0mem.cli.audit_view import NO_HARDWARE_MARK as AUDIT_NO_HARDWARE
from tests.conformance import neo

TWO_ROOTS = {"CreateMultipleRootDevices": "2"}
PVC_FLAT = {"CreateMultipleSubDevices": "2", "ZE_FLAT_DEVICE_HIERARCHY": "FLAT"}
CHECKED = {**neo.VALIDATION, "ZEL_ENABLE_BASIC_LEAK_CHECKER": "1"}
LAYERS = [{}, CHECKED]
LAYER_IDS = ["plain", "validation"]


def l0mem(args: list[str], product: str = "bmg", **keys: str) -> subprocess.CompletedProcess[str]:
    """Run ``l0mem ARGS`` against NEO as ``product`` with ``keys``; check it ended cleanly."""
    environ = {**neo.env(product, **keys), "COLUMNS": "100"}
    proc = neo.run([sys.executable, "-m", "l0mem", *args], environ)
    neo.no_traceback(proc)
    text = proc.stdout + proc.stderr
    if keys.get("ZEL_ENABLE_BASIC_LEAK_CHECKER") and args[0] != "audit":
        # The audit's children hold the devices; every other command does itself.
        assert "create/destroy calls" in text, "the leak checker did not report"
    leaks = [int(n) for n in re.findall(r"LEAK = (-?\d+)", text)]
    # A negative count is the checker's own (zeContextCreateEx is not counted as a create).
    assert all(n <= 0 for n in leaks), text[-3000:]
    return proc


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.mark.parametrize("layers", LAYERS, ids=LAYER_IDS)
def test_info(tmp_path: Path, layers: dict[str, str]) -> None:
    out = tmp_path / "info.json"
    proc = l0mem(["info", "--json", str(out)], **TWO_ROOTS, **layers)
    assert proc.returncode == 0, proc.stderr
    report = _json(out)
    assert report["loader"]["init_path"] == "zeInitDrivers"
    assert "initialized by" in proc.stdout and "zeInitDrivers" in proc.stdout
    (driver,) = report["drivers"]
    assert [d["index"] for d in driver["devices"]] == [0, 1]
    assert driver["peer_access"] == [[True, False], [False, True]]


@pytest.mark.parametrize("layers", LAYERS, ids=LAYER_IDS)
def test_p2p_measures_nothing_and_says_why(tmp_path: Path, layers: dict[str, str]) -> None:
    out = tmp_path / "p2p.json"
    args = ["p2p", "--sizes", "64K", "--reps", "2", "--json", str(out)]
    proc = l0mem(args, "pvc", **PVC_FLAT, **neo.CPU_COPIES, **layers)
    assert proc.returncode == 0, proc.stderr
    report = _json(out)
    assert report["no_hardware"] and "SetCommandStreamReceiver=1" in report["no_hardware"]
    assert report["copies"], "the copies are listed"
    for c in report["copies"]:
        assert c["skipped"] and c["gbps"] is None and c["samples_ns"] == [], c
    # Tiles of one card: peer access, and l0mem would copy directly.
    assert {p["route"] for p in report["peers"]} == {"direct"}
    assert "Not measured: NEO runs without hardware" in proc.stdout
    assert "GB/s" not in proc.stdout.split("Copy bandwidth")[1].split("\n", 1)[1]


@pytest.mark.parametrize("layers", LAYERS, ids=LAYER_IDS)
def test_allreduce_checks_nothing_and_fails_nothing(tmp_path: Path, layers: dict[str, str]) -> None:
    out = tmp_path / "allreduce.json"
    args = ["allreduce", "--sizes", "64K", "--reps", "2", "--json", str(out)]
    proc = l0mem(args, **TWO_ROOTS, **neo.CPU_COPIES, **layers)
    # Not "outside its error bound" (exit 1): kernels that never ran prove nothing.
    assert proc.returncode == 0, proc.stderr
    report = _json(out)
    assert report["no_hardware"] and report["results"] == [] and report["ok"] is None
    assert report["routes"] == {"0>1": "staged", "1>0": "staged"}
    assert "Not measured or checked" in proc.stdout


@pytest.mark.parametrize("layers", LAYERS, ids=LAYER_IDS)
def test_bench_kernels_measures_nothing(tmp_path: Path, layers: dict[str, str]) -> None:
    out = tmp_path / "kernels.json"
    args = ["bench", "kernels", "--backend", "l0", "--elements", "65536", "--reps", "2"]
    proc = l0mem([*args, "--json", str(out)], **neo.CPU_COPIES, **layers)
    assert proc.returncode == 0, proc.stderr
    report = _json(out)
    assert report["no_hardware"] and report["copy"] is None and report["kernels"] == []
    assert report["timing"] is None
    assert "Not measured" in proc.stdout and "GB/s" not in proc.stdout


@pytest.fixture(scope="module", params=LAYERS, ids=LAYER_IDS)
def audit(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """An audit of two set-ups on two root devices: the finished command and its report."""
    out = tmp_path_factory.mktemp("audit") / "audit.json"
    args = ["audit", "--size", "128M", "--steps", "3", "--setups", "l0,l0-multi"]
    proc = l0mem([*args, "--json", str(out)], **TWO_ROOTS, **request.param)
    assert proc.returncode == 0, proc.stderr
    return proc, _json(out)


def test_audit_judges_no_memory_the_fill_never_touched(
    audit: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, report = audit
    for run in report["runs"]:
        # The fill never ran: every allocation is untouched and nothing is judged.
        assert run["status"] == "ok" and run["untouched_allocations"] == 3, run
        assert run["result"]["verdict"] == "inconclusive"
        assert run["result"]["reason"].startswith("memory not touched")


def test_audit_is_labelled_no_hardware_and_records_the_driver_keys(
    audit: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    proc, report = audit
    fp = report["fingerprint"]
    assert fp["simulated"] is False
    assert fp["no_hardware"] and "SetCommandStreamReceiver=1" in fp["no_hardware"]
    env = fp["environment"]
    for key in (
        "NEOReadDebugKeys",
        "SetCommandStreamReceiver",
        "ProductFamilyOverride",
        "CreateMultipleRootDevices",
    ):
        assert key in env, key
    assert "PATH" not in env and "HOME" not in env
    assert fp["loader"]["init_path"] == "zeInitDrivers"
    text = proc.stdout.replace("not hardware results", "")
    assert "NO HARDWARE" in text and "hardware " not in text


def test_default_audit_claims_nothing_from_untouched_memory(tmp_path: Path) -> None:
    # Every default set-up on two root devices: the Level Zero ones that can run
    # do (untouched memory, nothing judged), the rest are skipped with a reason
    # (no peer access, no dma-buf export, no dpctl in the root): exit 0.
    out = tmp_path / "audit.json"
    proc = l0mem(["audit", "--size", "64M", "--steps", "3", "--json", str(out)], **TWO_ROOTS)
    assert proc.returncode == 0, proc.stderr
    runs = _json(out)["runs"]
    assert {r["setup"] for r in runs} == set(ALL_SETUPS)
    ran = [r for r in runs if r["status"] != "skipped"]
    assert {r["setup"] for r in ran} == {"l0", "l0-multi"}
    for run in runs:
        if run["status"] == "skipped":
            assert run["reason"] and run["result"] is None, run
            continue
        assert run["status"] == "ok" and run["untouched_allocations"] == 3, run
        assert run["result"]["verdict"] == "inconclusive", run
        assert f"{run['setup']} ({AUDIT_NO_HARDWARE})" in proc.stdout
    dmabuf = next(r for r in runs if r["setup"] == "l0-dmabuf")
    assert "cannot export allocations as dma-buf" in dmabuf["reason"]
    # The title labels every run, skipped ones too; nothing reads as hardware.
    assert f"l0mem audit ({AUDIT_NO_HARDWARE}:" in proc.stdout and "runs marked" not in proc.stdout
    text = proc.stdout.replace("not hardware results", "")
    assert "hardware " not in text


def test_audit_residency_fails_with_the_driver_error(tmp_path: Path) -> None:
    # PVC tiles can access each other, so the peer-resident set-up runs and the
    # mode's residency error ends it: a failed set-up (exit 6), reported, no crash.
    out = tmp_path / "audit.json"
    args = ["audit", "--size", "128M", "--steps", "3", "--setups", "l0-peer-resident"]
    proc = l0mem([*args, "--json", str(out)], "pvc", **PVC_FLAT)
    assert proc.returncode == 6, proc.stderr
    (run,) = _json(out)["runs"]
    assert run["status"] == "failed" and "zeContextMakeMemoryResident" in run["reason"]
    assert proc.stderr.strip().splitlines()[-1].startswith("l0mem audit: ")


def test_compare_refuses_no_hardware_against_hardware(tmp_path: Path) -> None:
    nohw = tmp_path / "nohw.json"
    proc = l0mem(["audit", "--size", "64M", "--steps", "3", "--setups", "l0", "--json", str(nohw)])
    assert proc.returncode == 0, proc.stderr
    data = _json(nohw)
    # The same report as if made on hardware: no label, no NEO keys.
    hw = tmp_path / "hw.json"
    data["fingerprint"]["no_hardware"] = None
    data["fingerprint"]["environment"] = {}
    hw.write_text(json.dumps(data))
    for pair in ((nohw, hw), (hw, nohw)):
        res = l0mem(["compare", str(pair[0]), str(pair[1])])
        assert res.returncode == 5, res.stderr
        assert "without hardware" in res.stderr
    # Nothing was measured without hardware: no verdict to hold a run to, so the
    # comparison judges nothing and says so (exit 1), unless that is allowed.
    same = l0mem(["compare", str(nohw), str(nohw), "--json", str(tmp_path / "c.json")])
    assert same.returncode == 1, same.stderr
    assert "not judged" in same.stdout
    allowed = l0mem(
        ["compare", str(nohw), str(nohw), "--allow-unjudged", "--json", str(tmp_path / "c.json")]
    )
    assert allowed.returncode == 0, allowed.stderr
    assert _json(tmp_path / "c.json")["no_hardware"] is True
