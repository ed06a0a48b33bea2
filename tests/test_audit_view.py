"""The audit's view of a report: each set-up's table of signals."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from l0mem.audit.analysis import analyze_report
from l0mem.cli.audit_view import render
from tests.test_analysis import synthetic_report, synthetic_run

GIB = 1 << 30


def test_each_signal_is_one_row_of_its_set_ups_table() -> None:
    run = synthetic_run(1.0, setup="l0-peer-resident")
    # Shmem shows the mirror too: it is in the estimation's priority and among the
    # signals the view adds, and must still be one row.
    samples = [
        dataclasses.replace(s, values={**s.values, "meminfo.Shmem": GIB + (20 * GIB - s.values["meminfo.MemAvailable"])})
        for s in run.samples
    ]
    report = analyze_report(synthetic_report([dataclasses.replace(run, samples=samples)]))
    console = Console(record=True, width=160)
    render(report, console)
    rows = [ln for ln in console.export_text().splitlines() if ln.startswith("│ meminfo.Shmem ")]
    assert len(rows) == 1, rows
