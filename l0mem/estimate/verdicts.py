"""Verdicts from ratios and fits: the thresholds, and whether a fit may decide at all."""

from __future__ import annotations

from l0mem.estimate.model import AnalysisConfig, SignalFit, Verdict
from l0mem.estimate.signals import GIB


def classify(ratio: float, config: AnalysisConfig | None = None) -> Verdict:
    """Return the verdict for a host/device ratio (1.0 is a full mirror)."""
    config = config or AnalysisConfig()
    if ratio >= config.mirror_threshold:
        return "mirror"
    if ratio >= config.clean_threshold:
        return "partial"
    return "clean"


def separated(fit: SignalFit, config: AnalysisConfig) -> Verdict | None:
    """Return the verdict the fit's whole interval lies in, or None when it spans two."""
    interval = fit.interval
    if interval is None:
        return None
    low, high = classify(interval[0] / 1024.0, config), classify(interval[1] / 1024.0, config)
    return low if low == high else None


# Device memory that moved by less than this (bytes) decides nothing: host memory is
# counted in pages, and one 4 KiB page over less than 1 MiB is 4 MiB/GiB or more.
MIN_SPAN_BYTES = 1 << 20


def why_unusable(fit: SignalFit, config: AnalysisConfig | None = None) -> str | None:
    """Return why ``fit`` cannot decide at all (too little data, a poor line), or None."""
    config = config or AnalysisConfig()
    unit = "step window(s)" if fit.method == "steps" else "alloc sample(s)"
    if fit.points < config.min_points:
        return f"only {fit.points} {unit}, need {config.min_points}"
    if fit.slope is None or fit.uncertainty is None:
        return "device bytes did not vary across the alloc samples"
    if fit.span_gib * GIB < MIN_SPAN_BYTES:
        return (
            f"device memory moved by {round(fit.span_gib * GIB)} bytes only, under "
            f"{MIN_SPAN_BYTES >> 20} MiB: host memory counted in pages cannot give a ratio"
        )
    ratio = fit.slope / 1024.0
    if (
        fit.method == "line"
        and ratio >= config.clean_threshold
        and fit.r2 is not None
        and fit.r2 < config.min_r2
    ):
        return f"poor linear fit (R^2 {fit.r2:.2f} < {config.min_r2:.2f})"
    return None


__all__ = ["MIN_SPAN_BYTES", "classify", "separated", "why_unusable"]
