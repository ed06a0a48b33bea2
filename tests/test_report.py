"""Report files: JSON round trip and errors, atomic writes, JUnit XML, table rows (plots: test_plots)."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from l0mem.audit.loading import read_json
from l0mem.audit.model import AuditReport, ReportFormatError
from l0mem.audit.report import (
    dumps_json,
    junit_xml,
    summary_rows,
    write_json,
    write_junit,
)
from l0mem.files import ReportWriteError, json_bytes
from tests.test_analysis import synthetic_report, synthetic_run

DATA = Path(__file__).parent / "data" / "reports"


@pytest.fixture
def report() -> AuditReport:
    runs = [
        synthetic_run(1.0, setup="sycl"),
        synthetic_run(0.5, setup="l0-peer-resident", released=False),
        synthetic_run(0.0, setup="l0"),
        synthetic_run(0.0, setup="sycl", remedy="affinity", env={"ZE_AFFINITY_MASK": "0"}),
        dataclasses.replace(
            synthetic_run(setup="l0-multi"),
            status="skipped",
            reason="needs two devices",
            samples=[],
        ),
        dataclasses.replace(
            synthetic_run(setup="l0-dmabuf", steps=2),
            status="failed",
            reason="zeMemAllocDevice: ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
        ),
        synthetic_run(1.0, setup="sycl-single", noise_mib=400.0, seed=9),
    ]
    return synthetic_report(runs)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# ---------------------------------------------------------------- JSON


def test_json_round_trip(tmp_path: Path, report: AuditReport) -> None:
    path = tmp_path / "audit.json"
    write_json(report, path)
    assert read_json(path) == report
    assert json.loads(path.read_text())["schema"] == "l0mem.audit/1.2"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert _leftovers(tmp_path) == []


def test_stored_fixtures_read() -> None:
    for name in ("baseline.json", "current-same.json", "current-regressed.json"):
        assert read_json(DATA / name).runs


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON (Expecting property name enclosed in double quotes at line 1"),
        (b"{\xc3\x28}", "not JSON (not UTF-8 text)"),
        (b"\xff\xfe{\x00", "not JSON as l0mem reads it: UTF-16 text"),
        (b'{"schema": NaN}', "not JSON (NaN is not valid JSON)"),
        (b"[1, 2]", "not an l0mem report (top level is not a JSON object)"),
        (b'{"runs": []}', "schema: missing field"),
        (b'{"schema": "other.tool/1"}', "schema: not an l0mem audit report"),
        (b'{"schema": "l0mem.audit/2"}', "schema: unsupported schema version 'l0mem.audit/2'"),
        (b'{"schema": "l0mem.audit/1"}', "created: missing field"),
    ],
)
def test_read_json_errors_are_one_line_and_name_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ReportFormatError) as info:
        read_json(path)
    text = str(info.value)
    assert text.startswith(f"{path}: {message}"), text
    assert "\n" not in text


def test_read_json_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportFormatError, match=r"nope\.json: no such file"):
        read_json(tmp_path / "nope.json")
    with pytest.raises(ReportFormatError, match="is a directory"):
        read_json(tmp_path)


def test_read_json_names_the_bad_field_of_a_stored_file() -> None:
    with pytest.raises(ReportFormatError, match=r"malformed.json: runs\[1\]\.samples\[2\]\.phase"):
        read_json(DATA / "malformed.json")


# ---------------------------------------------------------------- atomic writes


def test_non_serializable_value_leaves_no_file(tmp_path: Path, report: AuditReport) -> None:
    bad = dataclasses.replace(report, fingerprint={"host": {"cpus": {1, 2}}})
    path = tmp_path / "audit.json"
    with pytest.raises(ReportFormatError, match="not JSON-serializable"):
        write_json(bad, path)
    assert list(tmp_path.iterdir()) == []


def test_audit_json_refuses_what_benchmark_json_writes_as_null(report: AuditReport) -> None:
    # One serializer (l0mem.files.json_bytes): the audit report in strict mode.
    data = {"slope": float("nan"), "runs": [1.5, float("inf")]}
    assert json.loads(json_bytes(data)) == {"slope": None, "runs": [1.5, None]}
    with pytest.raises(ValueError):
        json_bytes(data, strict=True)
    with pytest.raises(ReportFormatError, match=r"x\.json: not JSON-serializable"):
        dumps_json(data, "x.json")
    finite = report.to_dict()
    assert dumps_json(finite, "x.json") == json_bytes(finite, strict=True)
    assert json_bytes(finite, strict=True) == json_bytes(finite)


def test_invalid_report_is_not_written(tmp_path: Path, report: AuditReport) -> None:
    bad_run = dataclasses.replace(report.runs[4], reason=None)  # a skip without a reason
    bad = dataclasses.replace(report, runs=[*report.runs[:4], bad_run])
    with pytest.raises(ReportFormatError, match=r"runs\[4\]\.reason"):
        write_json(bad, tmp_path / "audit.json")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_old_file_and_no_temp(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.json"
    path.write_text("previous")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(ReportWriteError) as info:
        write_json(report, path)
    assert str(info.value) == f"{path}: cannot write (Input/output error)"
    assert path.read_text() == "previous"
    assert _leftovers(tmp_path) == []


def test_interrupted_write_leaves_no_temp(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_junit(report, tmp_path / "junit.xml")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_destination_is_a_one_line_error(tmp_path: Path, report: AuditReport) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(
        ReportWriteError, match=r"file/audit.json: cannot write \(Not a directory\)"
    ):
        write_json(report, not_a_dir / "audit.json")
    with pytest.raises(ReportWriteError, match="No such file or directory"):
        write_json(report, tmp_path / "missing" / "audit.json")


# ---------------------------------------------------------------- JUnit


def test_junit_cases_failures_skips_and_errors(tmp_path: Path, report: AuditReport) -> None:
    path = tmp_path / "junit.xml"
    write_junit(report, path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {
        "sycl",
        "l0-peer-resident",
        "l0",
        "sycl [affinity]",
        "l0-multi",
        "l0-dmabuf",
        "sycl-single",
    }
    assert all(c.get("classname") == "l0mem.audit" for c in cases.values())
    assert (
        suite.get("tests"),
        suite.get("failures"),
        suite.get("errors"),
        suite.get("skipped"),
    ) == (
        "7",
        "2",
        "1",
        "1",
    )

    mirror = cases["sycl"].find("failure")
    assert mirror is not None and mirror.get("type") == "mirror"
    message = mirror.get("message") or ""
    assert "1024 MiB host per GiB device" in message and "ratio 1.00" in message
    assert "meminfo.MemAvailable" in message and "VmRSS does not show it" in message

    partial = cases["l0-peer-resident"].find("failure")
    assert partial is not None and partial.get("type") == "partial"
    assert "512 MiB" in (partial.get("message") or "")
    assert "not released" in (partial.get("message") or "")

    skipped = cases["l0-multi"].find("skipped")
    assert skipped is not None and skipped.get("message") == "needs two devices"
    error = cases["l0-dmabuf"].find("error")
    assert error is not None and "UNSUPPORTED_FEATURE" in (error.get("message") or "")
    for name in ("l0", "sycl [affinity]", "sycl-single"):  # clean, clean, inconclusive
        assert cases[name].find("failure") is None and cases[name].find("error") is None
    inconclusive = cases["sycl-single"].find("system-out")
    assert inconclusive is not None and "inconclusive" in (inconclusive.text or "")


def _all_simulated(report: AuditReport) -> AuditReport:
    """Return ``report`` as the simulator would have written it: every run simulated."""
    runs = [dataclasses.replace(r, simulated=True) for r in report.runs]
    return dataclasses.replace(report, fingerprint={"simulated": True}, runs=runs)


def test_junit_marks_simulator_numbers(report: AuditReport) -> None:
    sim = _all_simulated(report)
    root = ET.fromstring(junit_xml(sim))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["simulated"] == "true"
    failure = next(root.iter("failure"))
    assert (failure.get("message") or "").startswith("[simulator] ")


def test_junit_marks_simulator_numbers_per_run(report: AuditReport) -> None:
    # One simulated Level Zero run next to real ones: only it carries the mark.
    runs = [dataclasses.replace(r, simulated=r.setup == "l0-peer-resident") for r in report.runs]
    mixed = dataclasses.replace(report, fingerprint={"simulated": True}, runs=runs)
    root = ET.fromstring(junit_xml(mixed))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    peer = cases["l0-peer-resident"].find("failure")
    assert peer is not None and (peer.get("message") or "").startswith("[simulator] ")
    sycl = cases["sycl"].find("failure")
    assert sycl is not None and "[simulator]" not in (sycl.get("message") or "")


def test_junit_host_memory_device_passes_with_its_slope(report: AuditReport) -> None:
    # A CPU device's memory is host memory: its 1:1 is a positive control, not a failure.
    runs = [dataclasses.replace(r, host_memory=r.setup == "sycl") for r in report.runs]
    root = ET.fromstring(junit_xml(dataclasses.replace(report, runs=runs)))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    sycl = cases["sycl"]
    assert sycl.find("failure") is None and sycl.find("error") is None
    out = sycl.find("system-out")
    assert out is not None and "1024 MiB host per GiB device" in (out.text or "")
    assert "positive control" in (out.text or "")
    # A mirror elsewhere still fails.
    assert cases["l0-peer-resident"].find("failure") is not None


# ---------------------------------------------------------------- table rows


def test_summary_rows(report: AuditReport) -> None:
    rows = {r["label"]: r for r in summary_rows(report)}
    assert len(rows) == 7
    sycl = rows["sycl"]
    assert sycl["verdict"] == "mirror" and sycl["deciding_signal"] == "meminfo.MemAvailable"
    assert sycl["slope"] == pytest.approx(1024.0, abs=1e-3)
    assert sycl["slopes"]["proc.VmRSS"] == pytest.approx(0.0, abs=1e-6)
    assert sycl["vmrss_would_miss"] is True and sycl["released"] is True
    assert rows["l0-peer-resident"]["released"] is False
    assert rows["l0-multi"]["verdict"] is None and rows["l0-multi"]["reason"] == "needs two devices"
    assert rows["sycl [affinity]"]["remedy"] == "affinity"
    assert rows["sycl-single"]["verdict"] == "inconclusive"
    assert all(r["simulated"] is False and r["host_memory"] is False for r in rows.values())
    flagged = dataclasses.replace(
        report.runs[0], host_memory=True, simulated=True, unavailable={"cgroup": "none here"}
    )
    (row,) = summary_rows(dataclasses.replace(report, runs=[flagged]))
    assert row["host_memory"] is True and row["simulated"] is True
    assert row["unavailable"] == {"cgroup": "none here"}


def test_a_run_skipped_before_it_had_a_device_measured_on_no_platform(
    report: AuditReport,
) -> None:
    simulated = dataclasses.replace(report, fingerprint={**report.fingerprint, "simulated": True})
    nowhere = dataclasses.replace(report.runs[0], status="skipped", devices=[], simulated=False)
    skipped_on_a_device = dataclasses.replace(report.runs[0], status="skipped", simulated=True)
    rows = summary_rows(dataclasses.replace(simulated, runs=[nowhere, skipped_on_a_device]))
    assert [r["platform"] for r in rows] == ["none", "simulator"]


@pytest.mark.parametrize("raw", ["\x1b[2J", "\x00", "\x07bell", "\udce9", "\ufffe"], ids=repr)
def test_junit_carries_any_text_as_valid_xml(report: AuditReport, raw: str) -> None:
    # A reason holds the child's last stderr line (a driver's words):
    # a control character or an undecodable byte there made a file no CI could parse.
    runs = [
        dataclasses.replace(r, status="failed", reason=f"driver said {raw} here", result=None)
        if i == 0
        else r
        for i, r in enumerate(report.runs)
    ]
    bad = dataclasses.replace(report, runs=runs)
    root = ET.fromstring(junit_xml(bad))  # parses
    suite = root.find("testsuite")
    assert suite is not None
    error = next(c.find("error") for c in suite.iter("testcase") if c.find("error") is not None)
    assert error is not None and "driver said " in (error.get("message") or "")
    shown = error.get("message") or ""
    assert raw not in shown and "\\" in shown, shown
