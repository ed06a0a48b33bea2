"""Turn a set-up run's samples into fitted slopes, a verdict and remedy effects.

For each signal recorded in every alloc sample, the memory cost (relative to
the idle mean, with the signal's sense applied) is fitted by least squares
against the device bytes allocated. The slope, in MiB of memory per GiB of
device memory, says how much of each allocation is mirrored: 1024 is 1:1.
The verdict comes from the first signal in :attr:`AnalysisConfig.priority`
whose fit is trustworthy; the others are reported but do not decide.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from l0mem.audit.model import (
    AnalysisConfig,
    AuditReport,
    SetupAnalysis,
    SetupRun,
    SignalFit,
    Verdict,
)
from l0mem.probe.signals import SignalInfo, describe

MIB = 1 << 20
GIB = 1 << 30

# Sum of every DRM client's host-backed regions (system, gtt, ...) for one fdinfo
# key: the mirror is charged to the *peer* device's file, so no single
# drm.<pdev>.<region>.<key> signal shows all of it.
DRM_HOST_AGGREGATE = "drm.all.host."

DEFAULT_CONFIG = AnalysisConfig()


@functools.lru_cache(maxsize=4096)
def signal_info(name: str) -> SignalInfo | None:
    """Return what ``name`` measures (aggregates included), or None for unknown names."""
    if name.startswith(DRM_HOST_AGGREGATE):
        return SignalInfo(name, "host", 1, "drm")
    try:
        return describe(name)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _drm_host_key(name: str) -> str | None:
    """Return the fdinfo key of a host-region DRM signal, or None for any other signal."""
    if not name.startswith("drm.") or name.startswith(DRM_HOST_AGGREGATE):
        return None
    info = signal_info(name)
    if info is None or info.side != "host":
        return None
    return name.rpartition(".")[2]


def _value(values: dict[str, int], signal: str) -> float | None:
    """Return the signal's value in one snapshot, or None when absent or not finite."""
    if signal.startswith(DRM_HOST_AGGREGATE):
        key = signal[len(DRM_HOST_AGGREGATE) :]
        parts = [v for k, v in values.items() if _drm_host_key(k) == key]
        return float(sum(parts)) if parts and all(math.isfinite(p) for p in parts) else None
    v = values.get(signal)
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def recorded_signals(run: SetupRun) -> list[str]:
    """Return the known signals (DRM host aggregates included) present in every alloc sample."""
    alloc = [s.values for s in run.samples if s.phase == "alloc"]
    if not alloc:
        return []
    names = {n for n in alloc[0] if signal_info(n) is not None}
    names |= {DRM_HOST_AGGREGATE + k for n in alloc[0] if (k := _drm_host_key(n))}
    return sorted(n for n in names if all(_value(v, n) is not None for v in alloc))


def cost_series(run: SetupRun, signal: str) -> list[tuple[str, float, float]]:
    """Return (phase, device GiB, memory cost MiB) for every sample holding ``signal``."""
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    ref = _reference(run, signal)
    out: list[tuple[str, float, float]] = []
    for s in run.samples:
        v = _value(s.values, signal)
        if v is not None and ref is not None:
            out.append((s.phase, s.device_bytes / GIB, info.sense * (v - ref) / MIB))
    return out


def _reference(run: SetupRun, signal: str) -> float | None:
    """Return the idle mean of ``signal``, else its first alloc value (slopes do not need it)."""
    idle = [
        v for s in run.samples if s.phase == "idle" and (v := _value(s.values, signal)) is not None
    ]
    if idle:
        return statistics.fmean(idle)
    first = [
        v for s in run.samples if s.phase == "alloc" and (v := _value(s.values, signal)) is not None
    ]
    return first[0] if first else None


@dataclasses.dataclass(frozen=True)
class _Line:
    slope: float
    intercept: float
    r2: float | None
    residual: float | None


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> _Line | None:
    """Return the least-squares line through the points, or None when x does not vary."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx > 0.0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    # A cost that never moved has no variance to explain: R^2 is undefined, not 0 or 1.
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0.0 else None
    residual = math.sqrt(ss_res / (n - 2)) if n > 2 else None
    return _Line(slope, intercept, r2, residual)


def fit_signal(run: SetupRun, signal: str, config: AnalysisConfig = DEFAULT_CONFIG) -> SignalFit:
    """Return the fit of ``signal``'s memory cost against device bytes over the alloc samples."""
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    series = cost_series(run, signal)
    idle = [c for phase, _, c in series if phase == "idle"]
    alloc = [(x, c) for phase, x, c in series if phase == "alloc"]
    freed = [c for phase, _, c in series if phase == "freed"]
    xs = [x for x, _ in alloc]
    ys = [c for _, c in alloc]
    line = _least_squares(xs, ys)
    noise = statistics.stdev(idle) if len(idle) >= 2 else None
    span = max(xs) - min(xs) if xs else 0.0
    uncertainty = None
    if line is not None:
        # Host signals are system-wide: their noise comes from other processes and
        # drifts rather than averaging out, so it is not divided by sqrt(points).
        sigma = max(noise or 0.0, line.residual or 0.0)
        uncertainty = config.noise_sigmas * sigma / span
    return SignalFit(
        signal=signal,
        side=info.side,
        points=len(alloc),
        slope=None if line is None else line.slope,
        intercept_mib=None if line is None else line.intercept,
        r2=None if line is None else line.r2,
        noise_mib=noise,
        residual_mib=None if line is None else line.residual,
        uncertainty=uncertainty,
        span_gib=span,
        peak_mib=max(ys) if ys else None,
        remaining_mib=freed[-1] if freed else None,
    )


def why_unusable(fit: SignalFit, config: AnalysisConfig = DEFAULT_CONFIG) -> str | None:
    """Return why ``fit`` cannot decide a verdict, or None when it can."""
    if fit.points < config.min_points:
        return f"only {fit.points} alloc sample(s), need {config.min_points}"
    if fit.slope is None or fit.uncertainty is None:
        return "device bytes did not vary across the alloc samples"
    if fit.uncertainty / 1024.0 > config.max_uncertainty:
        return (
            f"too noisy: slope uncertain by +/-{fit.uncertainty:.0f} MiB/GiB "
            f"(idle noise {_mib(fit.noise_mib)}, residual {_mib(fit.residual_mib)} "
            f"over {fit.span_gib:.2f} GiB)"
        )
    ratio = fit.slope / 1024.0
    if ratio >= config.clean_threshold and fit.r2 is not None and fit.r2 < config.min_r2:
        return f"poor linear fit (R^2 {fit.r2:.2f} < {config.min_r2:.2f})"
    return None


def _mib(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f} MiB"


_PCP_HIDDEN = frozenset({"meminfo.MemAvailable", "meminfo.MemFree"})


def classify(ratio: float, config: AnalysisConfig = DEFAULT_CONFIG) -> Verdict:
    """Return the verdict for a host/device ratio (1.0 is a full mirror)."""
    if ratio >= config.mirror_threshold:
        return "mirror"
    if ratio >= config.clean_threshold:
        return "partial"
    return "clean"


def analyze_run(run: SetupRun, config: AnalysisConfig = DEFAULT_CONFIG) -> SetupAnalysis:
    """Return the verdict on one set-up run, with every host and device fit."""
    alloc = [s for s in run.samples if s.phase == "alloc"]
    max_device = max((s.device_bytes for s in alloc), default=0)
    fits = [fit_signal(run, name, config) for name in recorded_signals(run)]
    host = [f for f in fits if f.side == "host"]
    device = [f for f in fits if f.side == "device"]
    by_name = {f.signal: f for f in host}

    chosen: SignalFit | None = None
    passed_over: dict[str, str] = {}
    # Where the per-CPU free lists were read, MemAvailable and MemFree are known to
    # hide allocations as large as those lists: they may show a mirror, never its absence.
    pcp_hidden = _PCP_HIDDEN if "zoneinfo.pcp_free" in by_name else frozenset()
    for name in config.priority:
        fit = by_name.get(name)
        if fit is None:
            continue
        why = why_unusable(fit, config)
        if why is None and name in config.blind and _clean(fit, config):
            why = "blind to driver-owned host pages: it cannot show that a run is clean"
        if why is None and name in pcp_hidden and _clean(fit, config):
            why = "misses memory taken from the per-CPU free lists: it cannot show that a run is clean"
        if why is None:
            chosen = fit
            break
        passed_over[name] = why

    if run.untouched_allocations or chosen is None or chosen.slope is None:
        reason = _no_signal_reason(alloc != [], passed_over)
        if run.untouched_allocations:
            # Memory the fill never reached may not be backed at all: no verdict holds.
            reason = (
                f"memory not touched: {run.untouched_allocations} allocation(s) did not read "
                "back the fill pattern"
            )
        return SetupAnalysis(
            verdict="inconclusive",
            deciding_signal=None,
            ratio=None,
            reason=reason,
            host=host,
            device=device,
            passed_over=passed_over,
            released=None,
            vmrss_would_miss=False,
            max_device_bytes=max_device,
        )

    ratio = chosen.slope / 1024.0
    verdict = classify(ratio, config)
    rss = by_name.get("proc.VmRSS")
    vmrss_would_miss = (
        verdict in ("mirror", "partial")
        and chosen.signal != "proc.VmRSS"
        and rss is not None
        and rss.ratio is not None
        and rss.ratio < config.clean_threshold
    )
    return SetupAnalysis(
        verdict=verdict,
        deciding_signal=chosen.signal,
        ratio=ratio,
        reason=_decided_reason(chosen, passed_over),
        host=host,
        device=device,
        passed_over=passed_over,
        # Nothing was taken in a clean run, so there is nothing to give back.
        released=None if verdict == "clean" else _released(chosen, max_device / GIB, config),
        vmrss_would_miss=vmrss_would_miss,
        max_device_bytes=max_device,
    )


def _clean(fit: SignalFit, config: AnalysisConfig) -> bool:
    return fit.ratio is not None and classify(fit.ratio, config) == "clean"


def _no_signal_reason(any_alloc: bool, passed_over: dict[str, str]) -> str:
    if not any_alloc:
        return "no samples were taken while device memory was allocated"
    if not passed_over:
        return "none of the prioritised host signals was recorded in every alloc sample"
    detail = "; ".join(f"{name}: {why}" for name, why in passed_over.items())
    return f"no host signal could decide ({detail})"


def _decided_reason(fit: SignalFit, passed_over: dict[str, str]) -> str:
    assert fit.slope is not None
    r2 = "n/a" if fit.r2 is None else f"{fit.r2:.3f}"
    text = (
        f"{fit.signal}: {fit.slope:.0f} MiB host per GiB device "
        f"(+/-{fit.uncertainty or 0.0:.0f}, R^2 {r2}, {fit.points} points)"
    )
    if passed_over:
        text += "; passed over " + "; ".join(f"{n} ({w})" for n, w in passed_over.items())
    return text


def _released(fit: SignalFit, max_device_gib: float, config: AnalysisConfig) -> bool | None:
    """Return whether the memory the allocations cost came back after free."""
    if fit.remaining_mib is None or fit.slope is None or fit.intercept_mib is None:
        return None
    # Measured from the fitted line's zero, so one-off costs (a context that
    # lives until exit) are not mistaken for allocations kept after free.
    taken = max(fit.slope * max_device_gib, 0.0)
    sigma = max(fit.noise_mib or 0.0, fit.residual_mib or 0.0)
    # The 1 MiB floor keeps rounding in the fit from deciding noise-free cases.
    allowance = max(config.release_fraction * taken, config.noise_sigmas * sigma, 1.0)
    return fit.remaining_mib - fit.intercept_mib <= allowance


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
