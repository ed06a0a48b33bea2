"""No number l0mem shows or writes is a signed zero: ``-0``, ``-0.00`` or ``-0.0`` in a JSON.

``run`` printed ``-0 +/- 33 MiB host per GiB device (ratio -0.00``, ``audit -v``
a fit of ``-0`` and both reports ``"release_slope": -0.0``. Every float of a
verdict's analysis (slopes, intervals, ratios, R^2, times) is set here to a
value that rounds to a signed zero, and every view and writer of ``audit``,
``run`` and ``watch`` is read for one.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from l0mem.audit.model import AuditReport
from l0mem.audit.report import junit_xml, write_json
from l0mem.cli.audit_answer import answer_lines as audit_answer
from l0mem.cli.audit_view import render as render_audit
from l0mem.cli.fits_view import fits_table, number
from l0mem.cli.run_view import answer_lines, live_table, sample_line, summary_view
from l0mem.estimate import DEFAULT_CONFIG
from l0mem.watch.engine import FloorStop, WatchResult
from l0mem.watch.export import document
from l0mem.watch.export import write_json as write_watch_json
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.support.watch_series import climbing_series
from tests.test_analysis import synthetic_report, synthetic_run

GIB = 1 << 30
PDEV = "0000:10:00.0"
# A minus sign before a zero with nothing else to it: -0, -0.0, -0.00 (not -0.004, -1e-09,
# 10-04, nor the "+/-0" of an interval).
SIGNED_ZERO = re.compile(r"(?<![\d./])-0(\.0+)?(?![\d.])")
# What rounds to a signed zero: a signed zero itself, a hair below zero, below the last decimal.
HAIRS = [-0.0, -1e-9, -0.004]


def _hair(obj: Any, value: float) -> Any:
    """Return ``obj`` with every float of it and of the dataclasses it holds set to ``value``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            old = getattr(obj, f.name)
            new = _hair(old, value)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    if isinstance(obj, float):
        return value
    if isinstance(obj, list):
        return [_hair(x, value) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_hair(x, value) for x in obj)
    return obj


def _text(renderable: object, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, force_terminal=False)
    console.print(renderable, crop=False)
    return str(console.file.getvalue())  # type: ignore[attr-defined]


def _no_signed_zero_text(text: str) -> None:
    found = [m.group(0) for m in SIGNED_ZERO.finditer(text)]
    assert not found, f"signed zeros {found} in:\n{text}"


def _no_signed_zero_json(raw: str) -> None:
    _no_signed_zero_text(raw)

    def walk(data: Any, path: str) -> None:
        if isinstance(data, float):
            assert not (data == 0.0 and str(data).startswith("-")), path
        elif isinstance(data, dict):
            for k, v in data.items():
                walk(v, f"{path}.{k}")
        elif isinstance(data, list):
            for i, v in enumerate(data):
                walk(v, f"{path}[{i}]")

    walk(json.loads(raw), "$")


def _watch(value: float) -> tuple[WatchResult, Any, Series]:
    series = climbing_series()
    summary = summarize(series)
    fit = summary.analysis.host[0]
    summary = _hair(dataclasses.replace(summary, per_resident_gib=fit), value)
    result = WatchResult(series, 0, FloorStop(2.5, 3 * GIB, 2 * GIB, "SIGTERM", True), None, None)
    return result, summary, series


def _audit(value: float) -> AuditReport:
    report = synthetic_report([synthetic_run(1.0), synthetic_run(0.0, setup="l0", seed=2)])
    runs = [dataclasses.replace(r, result=_hair(r.result, value)) for r in report.runs]
    return dataclasses.replace(report, runs=runs)


@pytest.mark.parametrize("value", HAIRS)
def test_run_and_watch_show_no_signed_zero(value: float) -> None:
    result, summary, series = _watch(value)
    assert summary.analysis.slope == value or summary.analysis.slope is None
    _no_signed_zero_text("\n".join(answer_lines(result, summary)))
    for width in (80, 200):
        view = summary_view(result, summary, dict(series.unavailable), Console(width=width), verbose=True)
        _no_signed_zero_text(_text(view, width))
    at = WatchSample(value, dict(series.samples[0].values), 2)
    _no_signed_zero_text(sample_line(series, at))
    from l0mem.cli.run_view import Progress

    progress = Progress(Console(file=io.StringIO()), "run", quiet=True, live=False)
    _no_signed_zero_text(_text(live_table(series, at, progress.peaks)))


@pytest.mark.parametrize("value", HAIRS)
def test_the_fits_table_shows_no_signed_zero(value: float) -> None:
    _, summary, _ = _watch(value)
    for places in (0, 2, 3):
        _no_signed_zero_text(number(value, places))
    for width in (80, 200):
        table = fits_table(Console(width=width), "fits", summary.analysis)
        _no_signed_zero_text(_text(table, width))


@pytest.mark.parametrize("value", HAIRS)
def test_audit_shows_and_writes_no_signed_zero(value: float, tmp_path: Path) -> None:
    report = _audit(value)
    for width in (80, 200):
        console = Console(file=io.StringIO(), width=width, force_terminal=False)
        render_audit(report, console, verbose=True)
        _no_signed_zero_text(str(console.file.getvalue()))  # type: ignore[attr-defined]
    for answer_only in (False, True):
        _no_signed_zero_text("\n".join(audit_answer(report, answer_only)))
    _no_signed_zero_text(junit_xml(report).decode())
    path = tmp_path / "audit.json"
    write_json(report, path)
    _no_signed_zero_json(path.read_text())


@pytest.mark.parametrize("value", HAIRS)
def test_the_run_and_watch_json_holds_no_signed_zero(value: float, tmp_path: Path) -> None:
    result, summary, _ = _watch(value)
    data = document(
        result,
        summary,
        mode="run",
        command=["true"],
        pid=None,
        options={"interval": 0.5, "host_floor": 3 * GIB, "grace": 5.0},
        config=DEFAULT_CONFIG,
    )
    path = tmp_path / "run.json"
    write_watch_json(data, path)
    _no_signed_zero_json(path.read_text())


@pytest.mark.parametrize("near", [-0.0, -1e-9, -0.4])
def test_the_estimation_s_reasons_never_sign_a_zero(near: float) -> None:
    from types import SimpleNamespace

    from l0mem.estimate.decide import _spans

    text = _spans(SimpleNamespace(interval=(near, 200.0)))  # type: ignore[arg-type]
    assert not SIGNED_ZERO.search(text), text
    assert "its interval 0 to 200" in text
