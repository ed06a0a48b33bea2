"""The audit's answer, in at most five lines: affected or not, by how much, what to do.

It is printed before every table (and alone with ``--quiet``): which
allocation paths take host memory for device memory and how much per GiB,
which do not, the remedy to use where one was measured, and what was not
decided. Remedy runs, and devices whose memory is host memory (a CPU or
integrated device's 1:1 is a positive control, not a mirror), are details.
"""

from __future__ import annotations

from collections.abc import Sequence

from l0mem.audit.analysis import remedy_effects
from l0mem.audit.costs import remedy_advice
from l0mem.audit.model import AuditReport, SetupRun
from l0mem.cli.audit_view import PLATFORM_MARKS
from l0mem.text import excerpt
from l0mem.units import fixed

MAX_LINES = 5  # affected (or not), clean, what to do, ended early, what was not decided


def _remedies_tried(report: AuditReport) -> str:
    """Return what the remedy runs did where no remedy's cost was measured."""
    effects = remedy_effects(report)
    if not effects:
        return "Run again with --remedies to try the known workarounds and what each costs."
    removed = sorted({f"{e.remedy} for {e.setup}" for e in effects if e.removed})
    if removed:
        return "Removed by: " + ", ".join(removed) + " (its cost to peer copies: not measured)"
    return "No remedy tried removed it (the remedies table below)."


def _slope(run: SetupRun) -> str:
    slope = None if run.result is None else run.result.slope
    return "" if slope is None else f" {fixed(slope)} MiB/GiB"


def first_reason(runs: Sequence[SetupRun], limit: int | None = None) -> str:
    """Return the first run's label and reason (its status without one), cut at ``limit`` characters."""
    first = runs[0]
    why = first.reason or first.status
    return f"{first.label}: {why if limit is None else excerpt(why, limit)}"


def _why(runs: list[SetupRun], answer_only: bool, more: str) -> str:
    """Return where the reason is: below, or (``answer_only``: nothing is below) the first one itself."""
    if not answer_only:
        return f"below: {more}"
    if not runs:
        return "no set-up was planned"
    return first_reason(runs, 200)


def answer_lines(report: AuditReport, answer_only: bool = False) -> list[str]:
    """Return the answer to the audit's question, at most :data:`MAX_LINES` lines.

    ``answer_only`` (``-q``, nothing follows it): a line that would point below
    for why gives the first set-up's reason itself.
    """
    runs = [r for r in report.runs if r.remedy is None and r.status != "skipped"]
    paths = [r for r in runs if not r.host_memory]
    verdict = {r.label: (None if r.result is None else r.result.verdict) for r in runs}
    taken = [r for r in paths if verdict[r.label] in ("mirror", "partial")]
    clean = [r.label for r in paths if verdict[r.label] == "clean"]
    open_ = [r for r in paths if verdict[r.label] not in ("mirror", "partial", "clean")]
    marks = {PLATFORM_MARKS[p][0] for r in runs if (p := report.run_platform(r)) in PLATFORM_MARKS}
    prefix = "".join(f"[{m}] " for m in sorted(marks))
    lines = []
    if taken:
        lines.append(
            "Affected: host memory taken per GiB of device memory: "
            + ", ".join(f"{r.label} {verdict[r.label]}{_slope(r)}" for r in taken)
        )
    elif paths and not open_:
        lines.append("Not affected: no allocation path took host memory for device memory")
    if clean:
        lines.append("Clean: " + ", ".join(clean))
    if taken:
        lines.append(remedy_advice(report) or _remedies_tried(report))
    # A verdict stands on what was measured; how the set-up then ended is said too.
    ended = [r for r in paths if r.status != "ok" and r not in open_]
    if ended:
        lines.append(
            "Ended early after deciding: "
            + ", ".join(f"{r.label} ({r.status})" for r in ended)
            + "; "
            + _why(ended, answer_only, "why")
        )
    if open_:
        lines.append(
            "Not decided: "
            + ", ".join(
                f"{r.label} ({r.status if r.status != 'ok' else verdict[r.label] or r.status})"
                for r in open_
            )
            + "; "
            + _why(open_, answer_only, "why, and what would decide")
        )
    if not lines:
        controls = [r for r in runs if r.host_memory and r.result and r.result.slope is not None]
        planned = [r for r in report.runs if r.remedy is None and not r.host_memory]
        if controls:
            # Only a device whose memory is host memory (a CPU): a positive control measured,
            # no GPU's allocation path; "nothing was measured" read as if the audit had failed.
            lines.append(
                "No GPU measured: only the positive control on a device whose memory is host "
                "memory ("
                + ", ".join(f"{r.label}{_slope(r)}" for r in controls)
                + ": about 1024 expected there); "
                + _why(planned, answer_only, "why the GPU set-ups did not run")
            )
        else:
            planned = [r for r in report.runs if r.remedy is None]
            lines.append("Nothing was measured; " + _why(planned, answer_only, "why"))
    # Whatever comes first carries the mark of numbers that are not hardware results.
    lines[0] = prefix + lines[0]
    return lines


__all__ = ["MAX_LINES", "answer_lines"]
