"""The estimation: from samples of memory signals to a slope, its uncertainty and a verdict.

One estimation serves every command that judges host memory: the audit's
set-up runs and the workloads ``l0mem run`` and ``watch`` follow. Its parts:
:mod:`.model` (samples, settings, fits and the judged result, with their
JSON forms), :mod:`.signals` (what each signal measures and its cost series),
:mod:`.steps` (robust slopes from step windows: the change of each signal
right around each change of device memory), :mod:`.bystanders` (other
processes' memory taken out of the totals where a component shows it),
:mod:`.fits` (one signal's fit:
step windows where there are any, else a least-squares line),
:mod:`.verdicts` (the thresholds, and whether a fit may decide at all),
:mod:`.climbs` (the level the host reached, against what the windows say;
the median of several climbs), :mod:`.decide` (which signal decides, and
whether its interval separates the verdicts), :mod:`.advice` (what to do
when it does not) and :mod:`.repeat` (for a run that can repeat its steps:
one step more, a whole climb more, or enough).

What it may import: :mod:`l0mem.probe` (signal names) and the leaves.
"""

import dataclasses
from collections.abc import Iterable

from l0mem.estimate.climbs import disputed
from l0mem.estimate.decide import (
    MORE_EVIDENCE,
    analyze_samples,
    classify,
    released,
    separated,
    undecided_reason,
    why_unusable,
)
from l0mem.estimate.fits import fit_signal, least_squares
from l0mem.estimate.model import (
    DEFAULT_PRIORITY,
    DEFAULT_TOTALS,
    AnalysisConfig,
    NextSteps,
    Sample,
    SetupAnalysis,
    SignalFit,
    Verdict,
)
from l0mem.estimate.order import Interval, median_interval
from l0mem.estimate.signals import (
    DRM_HOST_AGGREGATE,
    STACK_COMPONENTS,
    carries,
    cost_series,
    recorded_signals,
    signal_info,
)
from l0mem.estimate.steps import StepSlope, Window, step_slope, windows

DEFAULT_CONFIG = AnalysisConfig()


def for_stacks(config: AnalysisConfig, gpu_modules: Iterable[str]) -> AnalysisConfig:
    """Return ``config`` for a machine with these GPU kernel modules loaded (its ``stacks``)."""
    return dataclasses.replace(
        config, stacks=tuple(sorted({m for m in gpu_modules if m in STACK_COMPONENTS}))
    )

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_PRIORITY",
    "DEFAULT_TOTALS",
    "DRM_HOST_AGGREGATE",
    "MORE_EVIDENCE",
    "STACK_COMPONENTS",
    "AnalysisConfig",
    "Interval",
    "NextSteps",
    "Sample",
    "SetupAnalysis",
    "SignalFit",
    "StepSlope",
    "Verdict",
    "Window",
    "analyze_samples",
    "carries",
    "classify",
    "cost_series",
    "disputed",
    "fit_signal",
    "for_stacks",
    "least_squares",
    "median_interval",
    "recorded_signals",
    "released",
    "separated",
    "signal_info",
    "step_slope",
    "undecided_reason",
    "why_unusable",
    "windows",
]
