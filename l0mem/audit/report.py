"""Audit reports on disk: JSON (the versioned schema), JUnit XML, a plot, table rows.

Every file is written atomically: to a temporary file in the same directory,
flushed to disk, then renamed over the destination, so a reader never sees a
half-written report and a failed write leaves any previous file untouched.
The JSON schema is documented in docs/report-schema.md.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from l0mem.audit.analysis import DEFAULT_CONFIG, GIB, cost_series, recorded_signals
from l0mem.audit.model import AuditReport, ReportFormatError, SetupRun, parse_schema
from l0mem.files import json_bytes, write_bytes

PathLike = str | os.PathLike[str]

JUNIT_CLASSNAME = "l0mem.audit"


class MissingDependencyError(ImportError):
    """An optional dependency needed for the request is not installed."""


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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# The largest report l0mem reads: real reports are a few hundred KiB, so this
# only bounds the memory and time a hostile or wrong file can cost.
MAX_REPORT_BYTES = 64 << 20
# The deepest nesting of arrays and objects read: real reports nest 6 deep;
# refusing deeper before parsing keeps every reader clear of RecursionError.
MAX_REPORT_DEPTH = 64
# Integers in a report are byte counts, nanoseconds and counters: all fit in
# 64 bits; a longer one would overflow the float arithmetic of the analysis.
# Floats (slopes, ratios, seconds) are held to the same magnitude.
_MAX_INT = 1 << 64
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")


def _read_capped(p: Path) -> bytes:
    """Return the bytes of the regular file ``p``; raise ReportFormatError for anything else."""
    try:
        # stat first: opening a FIFO would block until a writer comes, and a
        # device could stream forever.
        st = p.stat()
    except FileNotFoundError:
        raise ReportFormatError(f"{p}: no such file") from None
    except OSError as exc:
        raise ReportFormatError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ReportFormatError(f"{p}: is a directory, not a report file")
    if not stat.S_ISREG(st.st_mode):
        raise ReportFormatError(f"{p}: not a regular file (a FIFO, socket or device)")
    if st.st_size > MAX_REPORT_BYTES:
        raise ReportFormatError(
            f"{p}: too large for a report ({st.st_size} bytes, the limit is {MAX_REPORT_BYTES})"
        )
    try:
        # O_NONBLOCK: the path may have been swapped for a FIFO since the stat.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReportFormatError(f"{p}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ReportFormatError(f"{p}: not a regular file (a FIFO, socket or device)")
            raw = f.read(MAX_REPORT_BYTES + 1)
        except OSError as exc:
            raise ReportFormatError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ReportFormatError(f"{p}: too large for a report (over {MAX_REPORT_BYTES} bytes)")
    return raw


def _too_deep(raw: bytes) -> bool:
    """Return whether arrays and objects in ``raw`` nest over MAX_REPORT_DEPTH deep.

    Each pass deletes the innermost pairs, so a group nested d deep is gone
    after d passes: bounded work at C speed, where a loop over 64 MiB of
    brackets in Python would take seconds.
    """
    brackets = _STRINGS.sub(b"", raw).translate(_AS_PARENS, _NOT_BRACKETS)
    for _ in range(MAX_REPORT_DEPTH):
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            break
        brackets = shorter
    # Left over: deeper groups, or brackets never closed (which json would
    # still recurse into before it fails).
    return b"()" in brackets or brackets.count(b"(") > MAX_REPORT_DEPTH


def _parse_int(text: str) -> int:
    # Checked on the digits, before int() (whose own limit, 4300 digits, is far too lax).
    if len(text.lstrip("-")) > 20 or abs(int(text)) >= _MAX_INT:
        raise ValueError(f"integer {text[:24]}{'...' if len(text) > 24 else ''} out of range")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    # The integers' bound too: a finite 1e308 still overflows a difference or round().
    if not math.isfinite(value) or abs(value) >= _MAX_INT:
        raise ValueError(f"number {text[:24]}{'...' if len(text) > 24 else ''} out of range")
    return value


def load_json_data(path: PathLike) -> dict[str, Any]:
    """Return the JSON object in ``path``; raise ReportFormatError (one line) when unreadable.

    Only a regular file of at most MAX_REPORT_BYTES, nested at most
    MAX_REPORT_DEPTH deep, with numbers of magnitude below 2**64, is read.
    """
    p = Path(path)
    raw = _read_capped(p)
    if _too_deep(raw):
        raise ReportFormatError(f"{p}: not an l0mem report (nested over {MAX_REPORT_DEPTH} deep)")
    try:
        data = json.loads(
            raw.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except UnicodeDecodeError:
        raise ReportFormatError(f"{p}: not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise ReportFormatError(
            f"{p}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ReportFormatError(f"{p}: not JSON ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise ReportFormatError(f"{p}: not an l0mem report (top level is not a JSON object)")
    return data


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def schema_of(data: dict[str, Any], source: PathLike) -> tuple[int, int]:
    """Return (major, minor) of the report schema in ``data``; raise ReportFormatError."""
    schema = data.get("schema")
    if not isinstance(schema, str):
        raise ReportFormatError(f"{source}: schema: missing field (not an l0mem audit report)")
    try:
        return parse_schema(schema)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{source}: {exc}") from None


def report_from_data(data: dict[str, Any], source: PathLike) -> AuditReport:
    """Return the report in ``data``; errors name ``source`` and the bad field."""
    schema_of(data, source)
    try:
        return AuditReport.from_dict(data)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{source}: {exc}") from None


def read_json(path: PathLike) -> AuditReport:
    """Return the report stored in ``path``; raise ReportFormatError with a one-line message."""
    return report_from_data(load_json_data(path), path)


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
        f"{prefix}{res.verdict}: {res.slope:.0f} MiB host per GiB device "
        f"(ratio {res.ratio:.2f}) by {res.deciding_signal} over "
        f"{res.max_device_bytes / GIB:.2f} GiB"
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
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(report: AuditReport, path: PathLike) -> None:
    """Write the report as JUnit XML to ``path``, atomically."""
    write_bytes(path, junit_xml(report))


# ---------------------------------------------------------------- plot

_PLOT_FORMATS = {".png": "png", ".svg": "svg"}


def plot_signal(report: AuditReport, run: SetupRun) -> str | None:
    """Return the host signal a run is plotted by: the deciding one, else the first recorded."""
    if run.result is not None and run.result.deciding_signal is not None:
        return run.result.deciding_signal
    recorded = set(recorded_signals(run))
    priority = (report.analysis or DEFAULT_CONFIG).priority
    return next((s for s in priority if s in recorded), None)


def write_plot(report: AuditReport, path: PathLike) -> None:
    """Plot host memory cost (MiB) against device GiB per set-up to a PNG or SVG, atomically."""
    fmt = _PLOT_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: plot file must end in .png or .svg")
    try:
        # Figure without pyplot: no global backend state, no display needed (Agg canvas).
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(
            "plotting needs matplotlib: install the plot extra (pip install 'l0mem[plot]')"
        ) from None

    setups: dict[str, list[SetupRun]] = {}
    for run in report.runs:
        if run.samples:
            setups.setdefault(run.setup, []).append(run)
    ncols = min(3, max(1, len(setups)))
    nrows = max(1, math.ceil(len(setups) / ncols))
    fig = Figure(figsize=(5.0 * ncols, 3.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    title = "Host memory cost of device allocations"
    plotted = [r for runs in setups.values() for r in runs]
    if plotted and all(r.simulated for r in plotted):
        title += " (SIMULATOR, not hardware)"
    elif any(r.simulated for r in plotted):
        title += " (panels marked SIMULATOR: simulator, not hardware)"
    if any(report.run_platform(r) == "no-hardware" for r in plotted):
        title += " (NO HARDWARE: the GPU driver executed nothing)"
    fig.suptitle(title)
    if not setups:
        axes[0].text(0.5, 0.5, "no set-up has samples", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, (setup, runs) in zip(axes, setups.items(), strict=False):
        max_x = 0.0
        for run in runs:
            signal = plot_signal(report, run)
            if signal is None:
                continue
            series = cost_series(run, signal)
            line = [(x, y) for phase, x, y in series if phase != "freed"]
            freed = [(x, y) for phase, x, y in series if phase == "freed"]
            verdict: str = "not analysed" if run.result is None else run.result.verdict
            if run.host_memory and verdict in ("mirror", "partial"):
                verdict += ", expected: host memory"
            label = f"{run.remedy or 'no remedy'}: {verdict} ({signal})"
            (drawn,) = ax.plot([p[0] for p in line], [p[1] for p in line], "o-", ms=3, label=label)
            if freed:
                ax.plot(
                    [p[0] for p in freed], [p[1] for p in freed], "x", color=drawn.get_color(), ms=7
                )
            max_x = max([max_x, *(p[0] for p in line)])
        if max_x > 0:
            ax.plot([0, max_x], [0, 1024 * max_x], ":", color="grey", label="1:1 mirror")
        ax.set_title(setup + (" (SIMULATOR)" if any(r.simulated for r in runs) else ""))
        ax.set_xlabel("device memory allocated (GiB)")
        ax.set_ylabel("host memory used (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(setups) :]:
        if setups:
            ax.set_axis_off()
    buf = io.BytesIO()
    # Text kept as text in an SVG: smaller, searchable, and its labels readable by tools.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format=fmt)
    write_bytes(path, buf.getvalue())


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
