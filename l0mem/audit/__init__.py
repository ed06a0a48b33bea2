"""The mirroring audit: data model, analysis, reports and comparison of reports."""

from l0mem.audit.analysis import (
    RemedyEffect,
    analyze_report,
    analyze_run,
    ensure_analysed,
    fit_signal,
    remedy_effects,
)
from l0mem.audit.compare import Comparison, ReportMismatchError, RunChange, compare_reports
from l0mem.audit.model import (
    SCHEMA,
    AnalysisConfig,
    AuditReport,
    ReportFormatError,
    Sample,
    SetupAnalysis,
    SetupRun,
    SignalFit,
    utc_now,
)
from l0mem.audit.report import (
    MissingDependencyError,
    ReportWriteError,
    read_json,
    summary_rows,
    write_json,
    write_junit,
    write_plot,
)

__all__ = [
    "SCHEMA",
    "AnalysisConfig",
    "AuditReport",
    "Comparison",
    "MissingDependencyError",
    "RemedyEffect",
    "ReportFormatError",
    "ReportMismatchError",
    "ReportWriteError",
    "RunChange",
    "Sample",
    "SetupAnalysis",
    "SetupRun",
    "SignalFit",
    "analyze_report",
    "analyze_run",
    "compare_reports",
    "ensure_analysed",
    "fit_signal",
    "read_json",
    "remedy_effects",
    "summary_rows",
    "utc_now",
    "write_json",
    "write_junit",
    "write_plot",
]
