"""Compare two audit reports run by run: verdict and slope changes, regressions.

Runs are matched by (setup, remedy). A run regresses when its verdict gets
worse (clean -> partial -> mirror) or its deciding slope rises by more than
the tolerance (MiB of host per GiB of device). A run that had a verdict in
the baseline and has none now (failed, inconclusive, or missing from the
current report) also regresses: a CI gate must not pass because the
measurement broke. So does a run the baseline has no verdict for
(inconclusive or failed there): nothing holds it to anything, and a gate
that passes it has checked nothing (``unjudged``). ``allow_unjudged``
relaxes both to a note. Skipped runs are never judged.

Reports from different platforms cannot be compared
(:class:`ReportMismatchError`): the simulated driver, a GPU driver running
without hardware (NEO's AUB or TBX modes, :attr:`AuditReport.no_hardware`) and
hardware each give numbers of their own kind.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from l0mem.audit.analysis import ensure_analysed
from l0mem.audit.loading import PathLike, load_json_data, report_from_data, schema_of
from l0mem.audit.model import AuditReport, ReportFormatError, SetupRun

COMPARE_SCHEMA = "l0mem.compare/1"
DEFAULT_SLOPE_TOLERANCE = 64.0  # MiB per GiB: well above run-to-run noise, far below a mirror

_RANK = {"clean": 0, "partial": 1, "mirror": 2}

RunKey = tuple[str, str | None]


class ReportMismatchError(ValueError):
    """Two well-formed reports cannot be compared (schema majors differ, or platforms)."""


@dataclasses.dataclass(frozen=True)
class RunChange:
    """How one (setup, remedy) run changed from the baseline to the current report."""

    setup: str
    remedy: str | None
    baseline_status: str
    current_status: str
    baseline_verdict: str | None
    current_verdict: str | None
    baseline_signal: str | None
    current_signal: str | None
    baseline_slope: float | None  # deciding slope, MiB per GiB
    current_slope: float | None
    regression: bool
    note: str  # why it regressed, or why it could not be judged; "" when unchanged and fine
    judged: bool = True  # the baseline had a verdict to hold the current run to

    @property
    def label(self) -> str:
        """Return the set-up name with the remedy in brackets when there is one."""
        return self.setup if self.remedy is None else f"{self.setup} [{self.remedy}]"

    @property
    def slope_change(self) -> float | None:
        """Return current minus baseline deciding slope (MiB per GiB), or None."""
        if self.baseline_slope is None or self.current_slope is None:
            return None
        return self.current_slope - self.baseline_slope

    def to_dict(self) -> dict[str, Any]:
        """Return the change as plain JSON data."""
        d = dataclasses.asdict(self)
        d["slope_change"] = self.slope_change
        for key in ("baseline_slope", "current_slope", "slope_change"):
            if d[key] is not None:
                d[key] += 0.0  # -0.0 is 0.0: never a signed zero in the JSON
        return d


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of comparing two reports."""

    slope_tolerance: float
    changes: list[RunChange]  # runs present in both, in the baseline's order
    missing: list[RunKey]  # in the baseline only
    new: list[RunKey]  # in the current report only
    simulated: bool  # either report's numbers come from the simulated driver
    # Missing runs that had a verdict in the baseline: regressions unless allow_unjudged.
    lost: list[RunKey] = dataclasses.field(default_factory=list)
    allow_unjudged: bool = False
    no_hardware: bool = False  # both reports come from a GPU driver without hardware

    @property
    def regressions(self) -> list[RunChange]:
        """Return the runs present in both reports that regressed."""
        return [c for c in self.changes if c.regression]

    @property
    def unjudged(self) -> list[RunChange]:
        """Return the failing runs the rule could not judge (no verdict in the baseline)."""
        return [c for c in self.regressions if not c.judged]

    @property
    def regressed(self) -> bool:
        """Return True when a matched run regressed or a judged run went missing."""
        return bool(self.regressions or self.lost)

    def to_dict(self) -> dict[str, Any]:
        """Return the comparison as plain JSON data (schema ``l0mem.compare/1``)."""
        return {
            "schema": COMPARE_SCHEMA,
            "slope_tolerance": self.slope_tolerance,
            "allow_unjudged": self.allow_unjudged,
            "simulated": self.simulated,
            "no_hardware": self.no_hardware,
            "regression": self.regressed,
            "changes": [c.to_dict() for c in self.changes],
            "missing": [{"setup": s, "remedy": r} for s, r in self.missing],
            "lost": [{"setup": s, "remedy": r} for s, r in self.lost],
            "new": [{"setup": s, "remedy": r} for s, r in self.new],
        }


def load_pair(baseline: PathLike, current: PathLike) -> tuple[AuditReport, AuditReport]:
    """Return both reports; raise ReportFormatError (unreadable) or ReportMismatchError."""
    data_b = load_json_data(baseline)
    data_c = load_json_data(current)
    major_b, _ = schema_of(data_b, baseline)
    major_c, _ = schema_of(data_c, current)
    # Checked before full parsing: a report of another major version is well-formed
    # in its own terms, and saying "versions differ" is the useful message.
    if major_b != major_c:
        raise ReportMismatchError(
            f"schema major versions differ: {baseline} is {data_b['schema']!r}, "
            f"{current} is {data_c['schema']!r}"
        )
    before = report_from_data(data_b, baseline)
    after = report_from_data(data_c, current)
    # A report of no measured set-up (every discovery failed: "runs": []) holds nothing to
    # judge: "no run in common" would not say which file, nor why.
    empty = [
        f"{name} holds no measured set-up ({report.unmeasured})"
        for report, name in ((before, baseline), (after, current))
        if report.unmeasured is not None
    ]
    if empty:
        raise ReportMismatchError("; ".join(empty) + ": nothing to compare")
    check_comparable(before, after, baseline, current)
    return before, after


def check_comparable(
    baseline: AuditReport,
    current: AuditReport,
    baseline_name: PathLike = "baseline",
    current_name: PathLike = "current",
) -> None:
    """Raise ReportMismatchError when the reports come from different platforms.

    The platforms are hardware, l0mem's simulated driver and a GPU driver
    running without hardware (:attr:`AuditReport.platform`).
    """
    a, b = baseline.platform, current.platform
    if a == b:
        return
    raise ReportMismatchError(
        f"{baseline_name} comes from {_PLATFORMS.get(a, a)} and {current_name} from "
        f"{_PLATFORMS.get(b, b)}: numbers from different platforms cannot be compared"
    )


_PLATFORMS = {
    "hardware": "hardware",
    "simulator": "the simulated Level Zero driver",
    "no-hardware": "a GPU driver running without hardware",
}


def judge_runs(
    base: SetupRun, cur: SetupRun, tolerance: float, allow_unjudged: bool
) -> tuple[bool, str]:
    """Return (regressed, note) for one matched pair of runs: ``l0mem compare``'s rule."""
    bv = None if base.result is None else base.result.verdict
    cv = None if cur.result is None else cur.result.verdict
    lost_verdict = cur.status == "failed" or (cur.status != "skipped" and cv not in _RANK)
    if _judged(base) and lost_verdict:
        now = "failed" if cur.status == "failed" else f"{cv or 'no verdict'} ({cur.status})"
        why = f" ({cur.reason})" if cur.reason else ""
        if allow_unjudged:
            return False, f"not judged: current run {now}{why}"
        return True, f"no verdict now: {bv} -> {now}{why}"
    if cur.status == "skipped" or base.status == "skipped":
        which = "current" if cur.status == "skipped" else "baseline"
        run = cur if cur.status == "skipped" else base
        return False, f"not judged: {which} run skipped" + (f" ({run.reason})" if run.reason else "")
    if not _judged(base) or bv is None:
        # Nothing to hold the current run to: passing it would check nothing.
        was = "failed" if base.status == "failed" else f"{bv or 'no verdict'}"
        why = f" ({base.reason})" if base.status == "failed" and base.reason else ""
        now = "failed" if cur.status == "failed" else f"{cv or 'no verdict'}"
        note = f"not judged: the baseline run has no verdict ({was}{why}) -> {now}"
        return not allow_unjudged, note
    if cur.status == "failed" or cv is None:
        return False, f"not judged: current run {cur.status}" + (
            f" ({cur.reason})" if cur.reason else ""
        )
    notes = []
    regressed = False
    if _RANK[cv] > _RANK[bv]:
        regressed = True
        notes.append(f"verdict worse: {bv} -> {cv}")
    bs = None if base.result is None else base.result.slope
    cs = None if cur.result is None else cur.result.slope
    if bs is not None and cs is not None and cs - bs > tolerance:
        regressed = True
        notes.append(f"slope up {cs - bs:.0f} MiB/GiB (tolerance {tolerance:.0f})")
    if _RANK[cv] < _RANK[bv]:
        notes.append(f"verdict better: {bv} -> {cv}")
    sig_b = None if base.result is None else base.result.deciding_signal
    sig_c = None if cur.result is None else cur.result.deciding_signal
    if sig_b != sig_c:
        notes.append(f"deciding signal changed: {sig_b} -> {sig_c}")
    return regressed, "; ".join(notes)


def compare_reports(
    baseline: AuditReport,
    current: AuditReport,
    slope_tolerance: float = DEFAULT_SLOPE_TOLERANCE,
    *,
    allow_unjudged: bool = False,
) -> Comparison:
    """Return the run-by-run comparison of two reports (unanalysed runs are analysed first).

    Raises ReportMismatchError when one report is from the simulator and the other is not.
    """
    if slope_tolerance < 0 or slope_tolerance != slope_tolerance:
        raise ValueError(f"slope tolerance must be >= 0 MiB/GiB, got {slope_tolerance}")
    check_comparable(baseline, current)
    baseline = ensure_analysed(baseline)
    current = ensure_analysed(current)
    cur_runs = {r.key: r for r in current.runs}
    base_keys = {r.key for r in baseline.runs}
    changes = []
    for base in baseline.runs:
        cur = cur_runs.get(base.key)
        if cur is None:
            continue
        regressed, note = judge_runs(base, cur, slope_tolerance, allow_unjudged)
        changes.append(
            RunChange(
                setup=base.setup,
                remedy=base.remedy,
                baseline_status=base.status,
                current_status=cur.status,
                baseline_verdict=None if base.result is None else base.result.verdict,
                current_verdict=None if cur.result is None else cur.result.verdict,
                baseline_signal=None if base.result is None else base.result.deciding_signal,
                current_signal=None if cur.result is None else cur.result.deciding_signal,
                baseline_slope=None if base.result is None else base.result.slope,
                current_slope=None if cur.result is None else cur.result.slope,
                regression=regressed,
                note=note,
                judged=_judged(base),
            )
        )
    missing = [r for r in baseline.runs if r.key not in cur_runs]
    return Comparison(
        slope_tolerance=slope_tolerance,
        changes=changes,
        missing=[r.key for r in missing],
        new=[r.key for r in current.runs if r.key not in base_keys],
        simulated=baseline.simulated or current.simulated,
        lost=[] if allow_unjudged else [r.key for r in missing if _judged(r)],
        allow_unjudged=allow_unjudged,
        no_hardware=baseline.platform == "no-hardware",
    )


def _judged(run: SetupRun) -> bool:
    """Return True when ``run`` has a verdict a later report can be held to."""
    return run.status not in ("skipped", "failed") and (
        run.result is not None and run.result.verdict in _RANK
    )


__all__ = [
    "COMPARE_SCHEMA",
    "DEFAULT_SLOPE_TOLERANCE",
    "Comparison",
    "ReportFormatError",
    "ReportMismatchError",
    "RunChange",
    "check_comparable",
    "compare_reports",
    "judge_runs",
    "load_pair",
]
