"""The mirroring audit: set-ups, child processes, data model, analysis, reports and comparison.

:mod:`.setups` holds the options and set-ups, :mod:`.planning` plans which
set-up runs on which device, :mod:`.runner` runs the audit: each set-up
(:mod:`.execute`) in a child process (:mod:`.process` starts it,
:mod:`.child` is its side: :mod:`.experiment` allocates, :mod:`.discovery`
lists the devices) under a :class:`Guard`. :mod:`.model` is
the report (its parts in :mod:`.runs`, field checks in :mod:`l0mem.jsonfields`),
:mod:`.analysis` fits the signals and judges each run, :mod:`.report` writes
JSON and JUnit (the plots are :mod:`l0mem.plots`') and :mod:`.compare`
compares two reports. Nothing here prints or exits: the CLI does.

What it may import: the layers below it, :mod:`l0mem.estimate`, :mod:`l0mem.bench`,
:mod:`l0mem.allreduce`, :mod:`l0mem.probe`, :mod:`l0mem.backends`,
:mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`, and the leaf modules;
never the CLI.
"""

from l0mem.audit.analysis import (
    RemedyEffect,
    analyze_report,
    analyze_run,
    ensure_analysed,
    remedy_effects,
)
from l0mem.audit.compare import Comparison, ReportMismatchError, RunChange, compare_reports
from l0mem.audit.guard import Guard
from l0mem.audit.loading import read_json
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
from l0mem.audit.planning import plan_audit
from l0mem.audit.remedies import KNOWN_REMEDIES, Remedy, custom_remedy
from l0mem.audit.report import (
    summary_rows,
    write_json,
    write_junit,
)
from l0mem.audit.runner import (
    AuditInterrupted,
    CancelEvent,
    RunEvent,
    discover,
    run_audit,
    run_setup,
)
from l0mem.audit.setups import AuditOptions, Inventory, NoDeviceError, SetupPlan
from l0mem.estimate import fit_signal
from l0mem.files import ReportWriteError

__all__ = [
    "KNOWN_REMEDIES",
    "SCHEMA",
    "AnalysisConfig",
    "AuditInterrupted",
    "AuditOptions",
    "AuditReport",
    "CancelEvent",
    "Comparison",
    "Guard",
    "Inventory",
    "NoDeviceError",
    "Remedy",
    "RemedyEffect",
    "ReportFormatError",
    "ReportMismatchError",
    "ReportWriteError",
    "RunChange",
    "RunEvent",
    "Sample",
    "SetupAnalysis",
    "SetupPlan",
    "SetupRun",
    "SignalFit",
    "analyze_report",
    "analyze_run",
    "compare_reports",
    "custom_remedy",
    "discover",
    "ensure_analysed",
    "fit_signal",
    "plan_audit",
    "read_json",
    "remedy_effects",
    "run_audit",
    "run_setup",
    "summary_rows",
    "utc_now",
    "write_json",
    "write_junit",
]
