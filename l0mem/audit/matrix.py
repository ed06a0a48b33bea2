"""Many audit reports as one matrix: driver stacks against set-ups, for gating upgrades.

Rows are driver stacks: the compute-runtime (driver) version, the Level Zero
loader, the kernel, the SYCL runtime and the behaviour-changing environment a
report's fingerprint records. Columns are set-ups and remedies (``setup
[remedy]``). A cell holds the verdicts and MiB per GiB of every report of that
stack, the number of machines behind them, and whether those machines
disagree. Reports are grouped apart by platform (hardware, the simulator, a
driver without hardware) and schema major: their numbers never mix.

:func:`regressions` holds every row to a baseline row by ``l0mem compare``'s
own rule (:func:`l0mem.audit.compare.judge_runs`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from l0mem.audit.analysis import ensure_analysed
from l0mem.audit.compare import DEFAULT_SLOPE_TOLERANCE, judge_runs
from l0mem.audit.model import AuditReport, SetupRun
from l0mem.text import printable
from l0mem.units import fixed

MATRIX_SCHEMA = "l0mem.matrix/1"
# Recorded variables that name files on one machine, not a setting of the stack.
_PATH_VARIABLES = frozenset({"ZE_ENABLE_ALT_DRIVERS", "OCL_ICD_FILENAMES", "L0MEM_ZE_LOADER"})
_RANK = {"clean": 0, "partial": 1, "mirror": 2}


def _versions(values: Iterable[Any]) -> str:
    found = sorted({str(v) for v in values if v not in (None, "")})
    return ",".join(found) or "?"


# Packages that are the GPU driver and the loader (l0mem.probe.fingerprint lists them).
_DRIVER_PACKAGES = ("ze-intel-gpu", "level-zero-gpu", "compute-runtime")
_LOADER_PACKAGES = ("libze1", "level-zero", "oneapi-level-zero")


def _packages(fp: Mapping[str, Any], names: tuple[str, ...], exact: bool) -> list[str]:
    found = []
    for versions in ((fp.get("host") or {}).get("packages") or {}).values():
        for name, version in (versions or {}).items():
            if (name in names) if exact else any(n in name for n in names):
                found.append(str(version))
    return found


def stack_of(report: AuditReport) -> str:
    """Return the driver stack a report was made on, as one line (a matrix row).

    The installed packages name the driver and the loader where the machine
    has them (what audit and run/watch reports both record); else what the
    driver and loader said of themselves.
    """
    fp = report.fingerprint
    driver = _versions(
        _packages(fp, _DRIVER_PACKAGES, False)
        or (fp.get("compute_runtime") or {}).get("driver_versions")
        or []
    )
    components = (fp.get("loader") or {}).get("components") or []
    loader = _versions(
        _packages(fp, _LOADER_PACKAGES, True)
        or [c.get("version") for c in components if c.get("name") == "loader"]
    )
    kernel = (fp.get("host") or {}).get("kernel_release") or "?"
    runtime = (fp.get("sycl") or {}).get("runtime") or {}
    sycl = _versions(runtime.values()) if isinstance(runtime, Mapping) else "?"
    env = fp.get("environment") or {}
    settings = " ".join(f"{k}={v}" for k, v in sorted(env.items()) if k not in _PATH_VARIABLES)
    line = f"driver {driver} | loader {loader} | kernel {kernel} | sycl {sycl}"
    return line + (f" | {settings}" if settings else "")


def machine_of(report: AuditReport, source: str) -> str:
    """Return the report's machine (its hashed machine id), or the report itself without one."""
    host = report.fingerprint.get("host") or {}
    return str(host.get("machine_id") or f"report {source}")


def group_of(report: AuditReport) -> str:
    """Return the group a report belongs to: its platform and schema major (never mixed)."""
    major = report.schema.rsplit("/", 1)[-1].split(".")[0]
    return f"{report.platform}, schema {major}"


def from_watch(doc: Mapping[str, Any]) -> AuditReport:
    """Return a ``run``/``watch`` report (l0mem.watch/1) as a report of one run, for the matrix.

    Its column is ``run: <command>`` or ``watch``; its verdict and slope are the
    summary's (the audit's analysis over the series); its stack comes from the
    host fingerprint and the workload's driver environment.
    """
    from l0mem.audit.model import SetupAnalysis, check_fingerprint, plain_run
    from l0mem.jsonfields import array, string

    command = array(doc.get("command") or [], "command")
    name = string(command[0], "command[0]") if command else str(doc.get("mode"))
    column = f"run: {name.rsplit('/', 1)[-1]}" if command else name
    summary = doc.get("summary") or {}
    result = SetupAnalysis.from_dict(summary["analysis"], "summary.analysis")
    simulated = doc.get("simulated") is True
    run = plain_run(column, result=result, simulated=simulated)
    fingerprint = check_fingerprint(
        {
            "simulated": simulated,
            "host": doc.get("fingerprint") or {},
            "environment": doc.get("environment") or {},
        }
    )
    return AuditReport(
        l0mem_version=str(doc.get("l0mem_version")),
        created=str(doc.get("created")),
        fingerprint=fingerprint,
        options={},
        runs=[run],
        complete=True,
    )


@dataclasses.dataclass
class Cell:
    """Every run of one set-up on one stack: what each machine found."""

    runs: list[tuple[str, SetupRun]] = dataclasses.field(default_factory=list)  # (machine, run)

    @property
    def verdicts(self) -> list[str]:
        """Return the verdicts, one per run (status for a run without one)."""
        return [r.result.verdict if r.result else r.status for _, r in self.runs]

    @property
    def machines(self) -> int:
        """Return how many machines the cell holds."""
        return len({m for m, _ in self.runs})

    @property
    def disagree(self) -> bool:
        """Return whether two machines of this stack reached different verdicts.

        One machine's runs never disagree with each other, however many reports
        it gave: its verdicts differing is that machine's noise, not a split
        between machines.
        """
        return self.machines > 1 and len(set(self.verdicts)) > 1

    @property
    def slope(self) -> float | None:
        """Return the median deciding slope (MiB per GiB) over the runs that have one."""
        slopes = [r.result.slope for _, r in self.runs if r.result and r.result.slope is not None]
        # + 0.0: a median of -0.0 is 0.0, never a signed zero in the JSON.
        return statistics.median(slopes) + 0.0 if slopes else None

    @property
    def worst(self) -> SetupRun:
        """Return the run the cell is judged by: the worst verdict, then the steepest slope."""

        def key(item: tuple[str, SetupRun]) -> tuple[int, float]:
            res = item[1].result
            return (_RANK.get(res.verdict, -1) if res else -1, (res.slope or 0.0) if res else 0.0)

        return max(self.runs, key=key)[1]

    def text(self) -> str:
        """Return the cell as one short line: verdict(s), MiB/GiB, machines, disagreement."""
        counts: dict[str, int] = {}
        for v in self.verdicts:
            counts[v] = counts.get(v, 0) + 1
        verdict = "/".join(
            v if n == 1 or len(counts) == 1 else f"{v}x{n}" for v, n in counts.items()
        )
        slope = "-" if self.slope is None else fixed(self.slope)
        flag = " DISAGREE" if self.disagree else ""
        return f"{verdict} {slope} (n={self.machines}){flag}"

    def to_dict(self) -> dict[str, Any]:
        """Return the cell as plain JSON data."""
        return {
            "verdicts": self.verdicts,
            "slope_mib_per_gib": self.slope,
            "machines": self.machines,
            "disagree": self.disagree,
        }


@dataclasses.dataclass
class Matrix:
    """One group's matrix: stacks (rows) by set-ups (columns)."""

    group: str
    cells: dict[str, dict[str, Cell]] = dataclasses.field(default_factory=dict)

    @property
    def stacks(self) -> list[str]:
        """Return the rows, sorted."""
        return sorted(self.cells)

    @property
    def columns(self) -> list[str]:
        """Return the set-up columns, sorted."""
        return sorted({c for row in self.cells.values() for c in row})


@dataclasses.dataclass(frozen=True)
class Regression:
    """A cell worse than the baseline row's cell of the same set-up."""

    group: str
    stack: str
    column: str
    note: str


def summarized(report: AuditReport) -> AuditReport:
    """Return ``report`` analysed and without its samples: all a matrix keeps of it.

    A report's samples are most of its size (about 200 KiB of memory for a
    100 KB file); a fleet's matrix of 10,000 reports held them all at once.
    """
    report = ensure_analysed(report)
    return dataclasses.replace(
        report, runs=[dataclasses.replace(r, samples=[]) for r in report.runs]
    )


def build(reports: Sequence[tuple[str, AuditReport]]) -> list[Matrix]:
    """Return one matrix per group (platform and schema major) over ``(source, report)`` pairs."""
    groups: dict[str, Matrix] = {}
    for source, raw in reports:
        report = ensure_analysed(raw)
        matrix = groups.setdefault(group_of(report), Matrix(group_of(report)))
        row = matrix.cells.setdefault(stack_of(report), {})
        machine = machine_of(report, source)
        for run in report.runs:
            if run.status == "skipped":
                continue
            row.setdefault(run.label, Cell()).runs.append((machine, run))
    return [groups[g] for g in sorted(groups)]


def stacks_named(matrices: Sequence[Matrix], name: str) -> list[str]:
    """Return the stacks ``name`` names: the whole line it is, else every stack holding it, sorted."""
    stacks = sorted({s for m in matrices for s in m.stacks})
    if name in stacks:
        return [name]
    return [s for s in stacks if name in s]


def find_stack(matrices: Sequence[Matrix], name: str) -> str | None:
    """Return the one stack ``name`` names (the whole line, or a part of it unique to one), or None."""
    hits = stacks_named(matrices, name)
    return hits[0] if len(hits) == 1 else None


def regressions(
    matrices: Sequence[Matrix], baseline: str, tolerance: float = DEFAULT_SLOPE_TOLERANCE
) -> list[Regression]:
    """Return every cell worse than the baseline row's, by ``l0mem compare``'s rule."""
    out: list[Regression] = []
    for m in matrices:
        base = m.cells.get(baseline)
        if base is None:
            continue
        for stack in m.stacks:
            if stack == baseline:
                continue
            for column, cell in m.cells[stack].items():
                ref = base.get(column)
                if ref is None:
                    continue
                regressed, note = judge_runs(ref.worst, cell.worst, tolerance, False)
                if regressed:
                    out.append(Regression(m.group, stack, column, note))
    return out


def to_dict(
    matrices: Sequence[Matrix],
    found: Sequence[Regression] = (),
    baseline: str | None = None,
    apart: Mapping[str, int] | None = None,
    empty: Sequence[str] = (),
) -> dict[str, Any]:
    """Return the matrices as JSON (docs/matrix.md); ``empty``: reports of no measured set-up."""
    return {
        "schema": MATRIX_SCHEMA,
        "baseline": baseline,
        "groups": [
            {
                "group": m.group,
                "columns": m.columns,
                "rows": [
                    {
                        "stack": s,
                        "cells": {c: cell.to_dict() for c, cell in sorted(m.cells[s].items())},
                    }
                    for s in m.stacks
                ],
            }
            for m in matrices
        ],
        "regressions": [dataclasses.asdict(r) for r in found],
        "not_audit_reports": dict(apart or {}),
        "empty_reports": list(empty),
    }


# Characters a Markdown table cell cannot hold as they are: the cell separator,
# the escape itself, HTML's, and those that would make emphasis, code or a
# link of a report's text; control characters (a terminal's escape sequences,
# line breaks) are shown as their code, never sent raw.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", **{c: "\\" + c for c in "\\|`*_[]~#$"}}


def md_text(text: str) -> str:
    """Return ``text`` as it can stand in one cell or heading of a Markdown table, shown as written."""
    out = []
    for ch in text:
        shown = printable(ch)
        out.append(shown if shown != ch else _MD_ESCAPES.get(ch, ch))
    return "".join(out)


def markdown(matrices: Sequence[Matrix]) -> str:
    """Return the matrices as Markdown tables (to paste into an issue)."""
    parts = []
    for m in matrices:
        cols = [md_text(c) for c in m.columns]
        lines = [
            f"### {md_text(m.group)}",
            "",
            "| stack | " + " | ".join(cols) + " |",
            "| --- |" + " --- |" * len(cols),
        ]
        for s in m.stacks:
            cells = [md_text(m.cells[s][c].text()) if c in m.cells[s] else "" for c in m.columns]
            lines.append(f"| {md_text(s)} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def csv_rows(matrices: Sequence[Matrix]) -> list[list[str]]:
    """Return one CSV row per cell: group, stack, set-up, verdicts, MiB/GiB, machines, disagree."""
    rows = [["group", "stack", "setup", "verdicts", "slope_mib_per_gib", "machines", "disagree"]]
    for m in matrices:
        for s in m.stacks:
            for c, cell in sorted(m.cells[s].items()):
                slope = "" if cell.slope is None else fixed(cell.slope, 1)
                rows.append(
                    [
                        printable(m.group),
                        printable(s),
                        printable(c),
                        "/".join(cell.verdicts),
                        slope,
                        str(cell.machines),
                        str(cell.disagree).lower(),
                    ]
                )
    return rows


__all__ = [
    "MATRIX_SCHEMA",
    "Cell",
    "Matrix",
    "Regression",
    "build",
    "csv_rows",
    "find_stack",
    "from_watch",
    "group_of",
    "machine_of",
    "markdown",
    "md_text",
    "regressions",
    "stack_of",
    "stacks_named",
    "summarized",
    "to_dict",
]
