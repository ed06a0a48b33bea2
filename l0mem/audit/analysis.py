"""Judge an audit's set-up runs with the estimation, and what each remedy did.

The estimation (:mod:`l0mem.estimate`) turns a run's samples into fits and a
verdict; this module hands it each set-up run (with the fills that did not
read back and the signals the run could not read) and the audit's own advice
for an inconclusive run, and compares remedy runs with the set-ups they
were meant to fix.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from l0mem.audit.model import AnalysisConfig, AuditReport, SetupAnalysis, SetupRun, Verdict
from l0mem.estimate import DEFAULT_CONFIG, analyze_samples

# What an audit's user can do for more evidence (NextSteps.text ends with it).
MORE_EVIDENCE = (
    "rerun with a longer --budget (more step windows) or a larger --size, or when the "
    "machine is quieter"
)


def analyze_run(run: SetupRun, config: AnalysisConfig = DEFAULT_CONFIG) -> SetupAnalysis:
    """Return the verdict on one set-up run, with every host and device fit."""
    return analyze_samples(
        run.samples,
        config,
        untouched=run.untouched_allocations,
        unavailable=run.unavailable,
        more=MORE_EVIDENCE,
    )


def analyze_report(report: AuditReport, config: AnalysisConfig | None = None) -> AuditReport:
    """Return ``report`` with every run not skipped analysed and the configuration recorded."""
    config = config or report.analysis or DEFAULT_CONFIG
    runs = [
        dataclasses.replace(r, result=None if r.status == "skipped" else analyze_run(r, config))
        for r in report.runs
    ]
    return dataclasses.replace(report, runs=runs, analysis=config)


def ensure_analysed(report: AuditReport) -> AuditReport:
    """Return ``report`` with the runs that lack a result analysed by its recorded configuration."""
    config = report.analysis or DEFAULT_CONFIG
    runs = [
        r
        if r.result is not None or r.status == "skipped"
        else dataclasses.replace(r, result=analyze_run(r, config))
        for r in report.runs
    ]
    return dataclasses.replace(report, runs=runs, analysis=config)


@dataclasses.dataclass(frozen=True)
class RemedyEffect:
    """What one remedy did to a set-up that mirrored."""

    setup: str
    remedy: str
    env: dict[str, str]
    baseline_verdict: Verdict
    baseline_ratio: float | None
    status: str  # the remedy run's status
    verdict: Verdict | None  # None when the remedy run has no result (skipped, failed)
    ratio: float | None
    removed: bool | None  # True: now clean; False: still mirror/partial; None: cannot tell

    def to_dict(self) -> dict[str, Any]:
        """Return the effect as plain JSON data."""
        return dataclasses.asdict(self)


def remedy_effects(report: AuditReport) -> list[RemedyEffect]:
    """Return, for each set-up that mirrored (fully or partly), the effect of each remedy run."""
    effects = []
    for base in report.runs:
        if base.remedy is not None or base.result is None:
            continue
        if base.result.verdict not in ("mirror", "partial"):
            continue
        for run in report.runs:
            if run.setup != base.setup or run.remedy is None:
                continue
            verdict = None if run.result is None else run.result.verdict
            removed = {"clean": True, "mirror": False, "partial": False}.get(verdict or "")
            effects.append(
                RemedyEffect(
                    setup=base.setup,
                    remedy=run.remedy,
                    env=dict(run.env),
                    baseline_verdict=base.result.verdict,
                    baseline_ratio=base.result.ratio,
                    status=run.status,
                    verdict=verdict,
                    ratio=None if run.result is None else run.result.ratio,
                    removed=removed,
                )
            )
    return effects
