"""A GPU driver without hardware (NEO's AUB mode): labelled, never compared with hardware, unmeasured.

tests/conformance/ meets the real driver in that mode; these tests hold the
same rules on the simulator, on the SYCL CPU device and on synthetic reports.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from l0mem.audit.compare import ReportMismatchError, compare_reports
from l0mem.audit.model import AuditReport
from l0mem.audit.report import junit_xml, write_json
from l0mem.audit.runner import build_fingerprint
from l0mem.audit.setups import Inventory
from l0mem.backends import LevelZeroBackend, SyclBackend, level_zero_devices
from l0mem.cli import cli
from l0mem.cli.audit_view import render
from tests.support import sim, ze_session
from tests.support.cli import run_l0mem
from tests.test_analysis import synthetic_report, synthetic_run

AUB = {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "1", "ProductFamilyOverride": "bmg"}
REASON = "NEO runs without hardware: SetCommandStreamReceiver=1 (AUB command-stream mode)"


def _no_hardware(report: AuditReport) -> AuditReport:
    fingerprint = {**report.fingerprint, "no_hardware": REASON, "environment": AUB}
    return dataclasses.replace(report, fingerprint=fingerprint)


def _gpu(name: str = "Intel(R) Graphics [0xe202]") -> dict[str, Any]:
    return {"index": 0, "name": name, "type": "GPU"}


# ---------------------------------------------------------------- the fingerprint


def test_fingerprint_records_the_driver_environment_and_the_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in {**AUB, "ZE_AFFINITY_MASK": "0", "SECRET_TOKEN": "x"}.items():
        monkeypatch.setenv(key, value)
    fp = build_fingerprint(Inventory([_gpu()], None, {}, [], "none", {}))
    assert fp["environment"]["SetCommandStreamReceiver"] == "1"
    assert fp["environment"]["ZE_AFFINITY_MASK"] == "0"
    assert "SECRET_TOKEN" not in fp["environment"] and "PATH" not in fp["environment"]
    assert fp["no_hardware"] and "SetCommandStreamReceiver=1" in fp["no_hardware"]
    assert fp["simulated"] is False
    json.dumps(fp)


@pytest.mark.parametrize(
    "inventory",
    [
        Inventory([_gpu("l0mem simulated GPU 0")], None, {}, [], "none", {}),
        Inventory([], "none", {}, [{"name": "cpu", "device_type": "cpu"}], None, {}),
        Inventory([], "none", {}, [], "none", {}),
    ],
    ids=["simulator", "cpu-only", "nothing"],
)
def test_no_label_where_no_gpu_driver_reads_the_keys(
    monkeypatch: pytest.MonkeyPatch, inventory: Inventory
) -> None:
    for key, value in AUB.items():
        monkeypatch.setenv(key, value)
    fp = build_fingerprint(inventory)
    assert fp["no_hardware"] is None
    assert fp["environment"]["SetCommandStreamReceiver"] == "1"  # recorded all the same


def test_hardware_keys_give_no_label(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEOReadDebugKeys", "1")
    monkeypatch.setenv("EnableDeferBacking", "0")
    monkeypatch.delenv("SetCommandStreamReceiver", raising=False)
    fp = build_fingerprint(Inventory([_gpu()], None, {}, [], "none", {}))
    assert fp["no_hardware"] is None and fp["environment"]["EnableDeferBacking"] == "0"


# ---------------------------------------------------------------- reports


def test_platform_of_reports_and_runs() -> None:
    l0, cpu = synthetic_run(0.0, setup="l0"), synthetic_run(0.0, setup="sycl")
    cpu = dataclasses.replace(cpu, devices=[{"name": "cpu", "device_type": "cpu"}])
    report = _no_hardware(synthetic_report([l0, cpu]))
    assert report.platform == "no-hardware" and report.no_hardware == REASON
    assert report.run_platform(report.runs[0]) == "no-hardware"
    assert report.run_platform(report.runs[1]) == "hardware"  # the SYCL CPU device
    plain = synthetic_report([l0])
    assert plain.platform == "hardware" and plain.no_hardware is None
    sim_report = dataclasses.replace(plain, fingerprint={"simulated": True, "no_hardware": REASON})
    assert sim_report.platform == "simulator"


def test_a_report_without_the_new_keys_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    write_json(synthetic_report([synthetic_run(0.0, setup="l0")]), path)
    data = json.loads(path.read_text())
    assert "no_hardware" not in data["fingerprint"] and "environment" not in data["fingerprint"]
    from l0mem.audit.loading import read_json

    assert read_json(path).platform == "hardware"


def test_terminal_and_junit_never_say_hardware_for_such_runs() -> None:
    report = _no_hardware(synthetic_report([synthetic_run(1.0, setup="l0")]))
    out = io.StringIO()
    render(report, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "NO HARDWARE" in text and "No hardware: " + REASON in text
    row = next(line for line in text.splitlines() if line.startswith("│ l0 "))
    assert "NO HARDWARE" in row and "hardware" not in row.replace("NO HARDWARE", "")
    suite = ET.fromstring(junit_xml(report)).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["platform"] == "no-hardware"
    assert "[no-hardware]" in ET.tostring(suite, encoding="unicode")


def test_a_set_up_skipped_before_it_had_a_device_is_measured_on_nothing() -> None:
    # SYCL set-ups skipped for want of dpctl, next to runs on the driver: the
    # title still marks every run, and the skipped row claims no hardware.
    sycl = dataclasses.replace(
        synthetic_run(0.0, setup="sycl"), status="skipped", reason="no dpctl", devices=[]
    )
    report = _no_hardware(synthetic_report([synthetic_run(1.0, setup="l0"), sycl]))
    out = io.StringIO()
    render(report, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "l0mem audit (NO HARDWARE:" in text and "runs marked" not in text
    row = next(line for line in text.splitlines() if line.startswith("│ sycl "))
    assert row.split("│")[2].strip() == "-", row


def test_compare_refuses_no_hardware_against_hardware() -> None:
    hw = synthetic_report([synthetic_run(0.0, setup="l0")])
    nohw = _no_hardware(hw)
    sim_report = dataclasses.replace(hw, fingerprint={"simulated": True})
    for a, b in ((hw, nohw), (nohw, hw)):
        with pytest.raises(ReportMismatchError, match=r"(from|comes from) a GPU driver running without hardware"):
            compare_reports(a, b)
    for a, b in ((sim_report, nohw), (nohw, sim_report)):
        with pytest.raises(ReportMismatchError, match="simulated Level Zero driver"):
            compare_reports(a, b)
    same = compare_reports(nohw, nohw)
    assert same.no_hardware is True and same.to_dict()["no_hardware"] is True
    assert compare_reports(hw, hw).no_hardware is False


def test_compare_command_exits_5(tmp_path: Path) -> None:
    hw = synthetic_report([synthetic_run(0.0, setup="l0")])
    hw_path, nohw_path = tmp_path / "hw.json", tmp_path / "nohw.json"
    write_json(hw, hw_path)
    write_json(_no_hardware(hw), nohw_path)
    result = CliRunner().invoke(cli, ["compare", str(hw_path), str(nohw_path)])
    assert result.exit_code == 5
    assert re.search(r"nohw.json (comes )?from a GPU driver running without hardware", result.stderr)
    same = CliRunner().invoke(cli, ["compare", str(nohw_path), str(nohw_path)])
    assert same.exit_code == 0 and "no hardware" in same.stdout


# ---------------------------------------------------------------- the backends


def test_the_simulator_is_never_no_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    # The session's simulator: a process initializes the loader once, and the
    # tests after this one count on the session's devices.
    ze_session.simulator()
    for key, value in AUB.items():
        monkeypatch.setenv(key, value)
    with LevelZeroBackend(level_zero_devices()[:1]) as b:
        assert b.simulated and b.no_hardware is None


def test_the_sycl_cpu_device_is_never_no_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in AUB.items():
        monkeypatch.setenv(key, value)
    with SyclBackend(["opencl:cpu"]) as b:
        assert b.no_hardware is None


def _two_queues() -> list[Any]:
    """Return the SYCL CPU device twice: two queues, one context, direct copies."""
    import dpctl

    cpu = dpctl.SyclDevice("opencl:cpu")
    return [cpu, cpu]


class _NoHardware(SyclBackend):
    """The SYCL CPU device, told to be a GPU driver without hardware."""

    @property
    def no_hardware(self) -> str | None:
        return REASON


def test_p2p_runs_every_copy_once_and_times_none() -> None:
    from l0mem.bench.p2p import run_p2p

    with _NoHardware(_two_queues()) as b:
        result = run_p2p(b, sizes=[4096], reps=5, warmup=3)
    assert result.no_hardware == REASON and result.copies
    assert all(c.measured is None and c.skipped for c in result.copies)
    assert any(c.skipped == REASON for c in result.copies)
    data = result.to_dict()
    assert data["no_hardware"] == REASON
    assert all(c["gbps"] is None for c in data["copies"])
    assert any(REASON in note for note in data["notes"])


def test_bench_kernels_keeps_no_number() -> None:
    from l0mem.bench.kernels import run_kernel_bench

    with _NoHardware(["opencl:cpu"]) as b:
        result = run_kernel_bench(b, elements=1000, repetitions=5, warmup=2)
    assert result.copy is None and result.kernels == {} and result.timing is None
    data = result.to_dict()
    assert data["no_hardware"] == REASON and data["copy"] is None and data["kernels"] == []
    with pytest.raises(ValueError, match="nothing was measured"):
        result.ratio("l0mem_f32_add")


def test_allreduce_checks_no_sum() -> None:
    from l0mem.bench.allreduce import measure

    with _NoHardware(_two_queues()) as b:
        report = measure(b, [0, 1], [4096], threshold=1 << 20, reps=3, warmup=1)
    assert report["no_hardware"] == REASON
    assert report["results"] == [] and report["ok"] is None
    json.dumps(report)


def test_p2p_allreduce_and_info_json_record_the_driver_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from l0mem.bench.allreduce import measure
    from l0mem.bench.kernels import run_kernel_bench
    from l0mem.bench.p2p import run_p2p

    for key, value in AUB.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("UR_L0_USM_RESIDENT", "0x1")
    monkeypatch.setenv("L0MEM_TEST_PRIVATE", "not recorded")
    with _NoHardware(_two_queues()) as b:
        p2p = run_p2p(b, sizes=[4096], reps=1, warmup=0).to_dict()
        allreduce = measure(b, [0, 1], [4096], threshold=1 << 20, reps=1, warmup=0)
    with _NoHardware(["opencl:cpu"]) as b:
        kernels = run_kernel_bench(b, elements=1000, repetitions=1, warmup=0).to_dict()
    env = {**sim.sim_env(devices=1), **AUB, "UR_L0_USM_RESIDENT": "0x1", "L0MEM_TEST_PRIVATE": "x"}
    done = run_l0mem("info", ["--json", "-"], env)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    for data in (p2p, allreduce, kernels, info):
        env = data["environment"]
        assert env["UR_L0_USM_RESIDENT"] == "0x1" and env["SetCommandStreamReceiver"] == "1"
        assert "L0MEM_TEST_PRIVATE" not in env and "PATH" not in env
