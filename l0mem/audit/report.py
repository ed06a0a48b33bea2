"""Audit reports on disk: JSON (the versioned schema), JUnit XML, table rows.

Every file is written atomically: to a temporary file in the same directory,
flushed to disk, then renamed over the destination, so a reader never sees a
half-written report and a failed write leaves any previous file untouched.
The JSON schema is documented in docs/report-schema.md; reading a report back
(hostile input included) is :mod:`l0mem.audit.loading`. The plot is
:func:`l0mem.plots.write_audit_plot`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from l0mem.audit.loading import PathLike
from l0mem.audit.model import AuditReport, ReportFormatError, SetupRun
from l0mem.estimate.signals import GIB
from l0mem.files import json_bytes, write_bytes
from l0mem.text import xml_text
from l0mem.units import fixed

JUNIT_CLASSNAME = "l0mem.audit"


def dumps_json(data: Any, path: PathLike) -> bytes:
    """Return ``data`` as strict JSON (:func:`l0mem.files.json_bytes`); raise ReportFormatError.

    A non-finite number is refused, not written as null: a report must read
    back exactly as it was measured.
    """
    try:
        return json_bytes(data, strict=True)
    except (TypeError, ValueError) as exc:
        raise ReportFormatError(f"{path}: not JSON-serializable: {exc}") from None


# ---------------------------------------------------------------- JSON


def write_json(report: AuditReport, path: PathLike) -> None:
    """Write ``report`` as schema-versioned JSON, atomically, after checking it reads back."""
    data = dumps_json(report.to_dict(), path)
    # Refuse to write what read_json would reject: a broken report is worse than none.
    try:
        AuditReport.from_dict(json.loads(data))
    except ReportFormatError as exc:
        raise ReportFormatError(f"{path}: {exc}") from None
    write_bytes(path, data)


# ---------------------------------------------------------------- JUnit


def _describe_result(report: AuditReport, run: SetupRun) -> str:
    res = run.result
    if res is None:
        return "not analysed"
    platform = report.run_platform(run)
    prefix = "" if platform == "hardware" else f"[{platform}] "
    if res.ratio is None or res.slope is None:
        return f"{prefix}{res.verdict}: {res.reason}"
    text = (
        f"{prefix}{res.verdict}: {fixed(res.slope)} MiB host per GiB device "
        f"(ratio {fixed(res.ratio, 2)}) by {res.deciding_signal} over "
        f"{fixed(res.max_device_bytes / GIB, 2)} GiB"
    )
    if res.vmrss_would_miss:
        text += "; proc.VmRSS does not show it"
    if res.released is False:
        text += "; host memory not released after free"
    if run.host_memory:
        text += (
            "; device memory is host memory on this device (CPU or integrated): "
            "a positive control, not a mirror"
        )
    return text


def junit_xml(report: AuditReport) -> bytes:
    """Return the report as JUnit XML: one testcase per run, mirrors and partials fail.

    Runs on a device whose memory is host memory (CPU, integrated GPU) pass
    whatever they measured: there about 1:1 is expected, a positive control.
    """
    suite = ET.Element("testsuite", name=JUNIT_CLASSNAME, timestamp=report.created)
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("l0mem_version", report.l0mem_version),
        ("schema", report.schema),
        ("complete", str(report.complete).lower()),
        ("simulated", str(report.simulated).lower()),
        ("platform", report.platform),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for run in report.runs:
        counts["tests"] += 1
        times = [s.t for s in run.samples]
        case = ET.SubElement(
            suite,
            "testcase",
            classname=JUNIT_CLASSNAME,
            name=run.label,
            time=f"{max(times) - min(times):.3f}" if times else "0",
        )
        verdict = None if run.result is None else run.result.verdict
        if run.status == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=run.reason or "skipped")
        elif run.status == "failed":
            counts["errors"] += 1
            err = ET.SubElement(case, "error", message=run.reason or "failed", type="failed")
            err.text = _describe_result(report, run)
        elif run.mirrors:
            counts["failures"] += 1
            message = _describe_result(report, run)
            fail = ET.SubElement(case, "failure", message=message, type=verdict or "")
            fail.text = "\n".join(
                [message, f"reason: {run.result.reason if run.result else ''}"]
                + [f"{k}={v}" for k, v in run.env.items()]
            )
        out = [f"status: {run.status}" + (f" ({run.reason})" if run.reason else "")]
        if run.status not in ("skipped", "failed"):
            out.append(_describe_result(report, run))
        ET.SubElement(case, "system-out").text = "\n".join(out)
    for key, count in counts.items():
        suite.set(key, str(count))
    root = ET.Element(
        "testsuites", {"name": "l0mem audit", **{k: str(v) for k, v in counts.items()}}
    )
    root.append(suite)
    _shown_as_written(root)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _shown_as_written(root: ET.Element) -> None:
    """Show every control character in the document's text and attributes as its code.

    Reasons carry a child's last line of stderr (a driver's words): a control
    character or an undecodable byte there is no valid XML 1.0, and a CI
    system could not read the file.
    """
    for element in root.iter():
        if element.text:
            element.text = xml_text(element.text, keep="\n\t")
        for key, value in element.attrib.items():
            element.set(key, xml_text(value))


def write_junit(report: AuditReport, path: PathLike) -> None:
    """Write the report as JUnit XML to ``path``, atomically."""
    write_bytes(path, junit_xml(report))


# ---------------------------------------------------------------- terminal rows


def summary_rows(report: AuditReport) -> list[dict[str, Any]]:
    """Return one flat row per run for the terminal table (verdict, slopes, signal, release)."""
    rows = []
    for run in report.runs:
        res = run.result
        rows.append(
            {
                "setup": run.setup,
                "remedy": run.remedy,
                "label": run.label,
                "backend": run.backend,
                "status": run.status,
                "verdict": None if res is None else res.verdict,
                "ratio": None if res is None else res.ratio,
                "slope": None if res is None else res.slope,
                "deciding_signal": None if res is None else res.deciding_signal,
                "slopes": {} if res is None else {f.signal: f.slope for f in res.host},
                "released": None if res is None else res.released,
                "vmrss_would_miss": False if res is None else res.vmrss_would_miss,
                "host_memory": run.host_memory,
                "simulated": run.simulated,
                "platform": report.run_platform(run),
                "unavailable": dict(run.unavailable),
                "reason": run.reason if res is None else res.reason,
            }
        )
    return rows
