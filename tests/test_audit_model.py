"""The audit data model: round trips and strict validation with field paths."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from l0mem.audit.model import (
    SCHEMA,
    AnalysisConfig,
    AuditReport,
    ReportFormatError,
    Sample,
    SetupRun,
    check_utc_timestamp,
    parse_schema,
    utc_now,
)
from tests.test_analysis import synthetic_report, synthetic_run


@pytest.fixture
def report_dict() -> dict[str, Any]:
    runs = [
        synthetic_run(1.0),
        synthetic_run(0.0, setup="l0", remedy="affinity", env={"ZE_AFFINITY_MASK": "0"}),
        dataclasses.replace(
            synthetic_run(setup="l0-multi"),
            status="skipped",
            reason="needs two devices",
            samples=[],
        ),
    ]
    return synthetic_report(runs).to_dict()


def test_report_round_trips_through_json(report_dict: dict[str, Any]) -> None:
    report = AuditReport.from_dict(json.loads(json.dumps(report_dict)))
    assert report.to_dict() == report_dict
    assert report.schema == SCHEMA
    assert report.analysis == AnalysisConfig()
    assert report.runs[0].result is not None and report.runs[0].result.verdict == "mirror"
    assert report.runs[1].label == "l0 [affinity]" and report.runs[1].env == {
        "ZE_AFFINITY_MASK": "0"
    }
    assert report.runs[2].result is None
    assert report.run("l0", "affinity") is report.runs[1]
    assert report.run("l0") is None


def test_each_class_round_trips() -> None:
    run = synthetic_report([synthetic_run(0.5)]).runs[0]
    assert SetupRun.from_dict(run.to_dict()) == run
    assert Sample.from_dict(run.samples[3].to_dict()) == run.samples[3]
    assert run.result is not None
    assert type(run.result).from_dict(run.result.to_dict()) == run.result
    cfg = AnalysisConfig(priority=("meminfo.MemFree",), min_points=4)
    assert AnalysisConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def _broken(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """Return a copy of ``data`` with the item at ``path`` replaced (or deleted for ...)."""
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["runs"], ..., "runs: missing field"),
        (["complete"], "yes", "complete: expected true or false, got str"),
        (["created"], "yesterday", "created: not an ISO 8601 timestamp"),
        (["created"], "2025-01-02T03:04:05+02:00", "created: timestamp must be in UTC"),
        (["fingerprint"], [], "fingerprint: expected an object, got list"),
        (["runs", 0, "status"], "great", "runs[0].status: expected one of"),
        (["runs", 0, "backend"], "cuda", "runs[0].backend: expected one of"),
        (["runs", 0, "step_bytes"], -1, "runs[0].step_bytes: must be >= 0"),
        (["runs", 0, "target_bytes"], True, "runs[0].target_bytes: expected an integer, got bool"),
        (["runs", 0, "env", "X"], 1, "runs[0].env['X']: expected a string, got int"),
        (["runs", 2, "reason"], None, "runs[2].reason: a skipped run must give a reason"),
        (["runs", 0, "samples", 1, "phase"], "warm", "runs[0].samples[1].phase: expected one of"),
        (["runs", 0, "samples", 1, "t"], "0.1", "runs[0].samples[1].t: expected a number"),
        (
            ["runs", 0, "samples", 1, "values", "proc.VmRSS"],
            1.5,
            "runs[0].samples[1].values['proc.VmRSS']: expected an integer, got float",
        ),
        (
            ["runs", 0, "samples", 1, "device_bytes"],
            ...,
            "runs[0].samples[1].device_bytes: missing",
        ),
        (
            ["runs", 0, "samples", 1, "values", "proc.VmRSS"],
            -4,
            "runs[0].samples[1].values['proc.VmRSS']: must be >= 0",
        ),
        (["runs", 0, "result", "verdict"], "bad", "runs[0].result.verdict: expected one of"),
        (
            ["runs", 0, "result", "host", 0, "slope"],
            "1",
            "runs[0].result.host[0].slope: expected a number",
        ),
        (
            ["runs", 0, "result", "released"],
            "no",
            "runs[0].result.released: expected true or false",
        ),
        (["analysis", "mirror_threshold"], 0.01, "analysis: need 0 <= clean_threshold"),
        (["analysis", "priority"], "meminfo.MemFree", "analysis.priority: expected a list"),
        (["schema"], "something.else/1", "schema: not an l0mem audit report"),
        (["schema"], "l0mem.audit/2", "schema: unsupported schema version 'l0mem.audit/2'"),
        (["schema"], "l0mem.audit/x", "schema: malformed schema version"),
    ],
)
def test_malformed_fields_are_named(
    report_dict: dict[str, Any], path: list[Any], value: Any, message: str
) -> None:
    with pytest.raises(ReportFormatError) as info:
        AuditReport.from_dict(_broken(report_dict, path, value))
    text = str(info.value)
    assert text.startswith(message)
    assert "\n" not in text


def test_non_finite_number_is_rejected(report_dict: dict[str, Any]) -> None:
    with pytest.raises(ReportFormatError, match=r"runs\[0\]\.samples\[0\]\.t: must be finite"):
        AuditReport.from_dict(_broken(report_dict, ["runs", 0, "samples", 0, "t"], float("nan")))


def test_free_form_parts_must_be_json(report_dict: dict[str, Any]) -> None:
    with pytest.raises(
        ReportFormatError, match=r"fingerprint\['host'\]\['x'\]: not JSON data: set"
    ):
        AuditReport.from_dict(_broken(report_dict, ["fingerprint", "host", "x"], {1}))


def test_duplicate_runs_are_rejected(report_dict: dict[str, Any]) -> None:
    data = copy.deepcopy(report_dict)
    data["runs"].append(copy.deepcopy(data["runs"][0]))
    with pytest.raises(ReportFormatError, match=r"runs\[3\]: second run of 'sycl'"):
        AuditReport.from_dict(data)


def test_top_level_must_be_an_object() -> None:
    with pytest.raises(ReportFormatError, match="<root>: expected an object, got list"):
        AuditReport.from_dict([])


def test_minor_versions_and_unknown_keys_are_accepted(report_dict: dict[str, Any]) -> None:
    data = _broken(report_dict, ["schema"], "l0mem.audit/1.4")
    data["added_in_1_4"] = {"anything": 1}
    data["runs"][0]["new_field"] = 3
    report = AuditReport.from_dict(data)
    assert report.schema == "l0mem.audit/1.4"
    assert len(report.runs) == 3


def test_parse_schema_and_timestamps() -> None:
    assert parse_schema("l0mem.audit/1") == (1, 0)
    assert parse_schema("l0mem.audit/3.2") == (3, 2)
    with pytest.raises(ReportFormatError):
        parse_schema("l0mem.audit")
    stamp = utc_now()
    assert stamp.endswith("Z")
    assert check_utc_timestamp(stamp).tzinfo is not None


def test_simulated_flag_comes_from_the_fingerprint(report_dict: dict[str, Any]) -> None:
    assert AuditReport.from_dict(report_dict).simulated is False
    data = _broken(report_dict, ["fingerprint", "simulated"], True)
    assert AuditReport.from_dict(data).simulated is True


def test_schema_document_names_every_field() -> None:
    from pathlib import Path

    from l0mem.audit.model import SetupAnalysis, SignalFit

    doc = (Path(__file__).resolve().parent.parent / "docs" / "report-schema.md").read_text()
    for cls in (AuditReport, SetupRun, Sample, SetupAnalysis, SignalFit, AnalysisConfig):
        for field in dataclasses.fields(cls):
            assert f"`{field.name}`" in doc, f"{cls.__name__}.{field.name} is not documented"


def test_run_flags_and_unavailable_signals_round_trip() -> None:
    gaps = {"cgroup": "no cgroup v2 memory controller", "meminfo.GPUActive": "not reported"}
    run = synthetic_run(1.0, host_memory=True, simulated=False, unavailable=gaps)
    data = json.loads(json.dumps(run.to_dict()))
    assert data["unavailable"] == gaps and data["host_memory"] is True
    back = SetupRun.from_dict(data)
    assert back == run and back.unavailable == gaps
    assert back.mirrors is False  # 1:1 on host memory is the expected positive control


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("unavailable", ["cgroup"], "runs[0].unavailable: expected an object, got list"),
        ("unavailable", {"cgroup": 3}, "runs[0].unavailable['cgroup']: expected a string"),
        ("host_memory", "yes", "runs[0].host_memory: expected true or false, got str"),
        ("simulated", None, "runs[0].simulated: expected true or false, got null"),
    ],
)
def test_new_run_fields_are_validated(
    report_dict: dict[str, Any], key: str, value: Any, message: str
) -> None:
    with pytest.raises(ReportFormatError) as info:
        AuditReport.from_dict(_broken(report_dict, ["runs", 0, key], value))
    assert str(info.value).startswith(message)


def test_reports_from_schema_1_0_still_load_with_implied_flags(
    report_dict: dict[str, Any],
) -> None:
    # 1.0 reports had no per-run flags: CPU devices imply host memory, and a
    # simulated report's Level Zero runs are the simulated ones.
    data = _broken(report_dict, ["schema"], "l0mem.audit/1")
    data["fingerprint"]["simulated"] = True
    data["runs"][0]["devices"] = [{"name": "CPU", "device_type": "cpu"}]
    for run in data["runs"]:
        for key in ("host_memory", "simulated", "unavailable"):
            del run[key]
    report = AuditReport.from_dict(data)
    sycl, l0, multi = report.runs
    assert (sycl.backend, sycl.host_memory, sycl.simulated) == ("sycl", True, False)
    assert (l0.backend, l0.host_memory, l0.simulated) == ("l0", False, True)
    assert multi.simulated is True and all(r.unavailable == {} for r in report.runs)
    assert sycl.mirrors is False


def test_schema_is_minor_1_and_documented_as_such() -> None:
    from pathlib import Path

    from l0mem.audit.model import SCHEMA_MAJOR, SCHEMA_MINOR

    assert SCHEMA == f"l0mem.audit/{SCHEMA_MAJOR}.{SCHEMA_MINOR}" == "l0mem.audit/1.2"
    doc = (Path(__file__).resolve().parent.parent / "docs" / "report-schema.md").read_text()
    assert f"`{SCHEMA}`" in doc.splitlines()[0]
