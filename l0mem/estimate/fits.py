"""One signal's fit over a run: from its step windows where it has them, else a line.

:func:`fit_signal` is the one entry: a run with enough step windows for an
interval of the configured confidence (six at 95%) gets
:mod:`l0mem.estimate.steps`' median slope and interval; a run with fewer (a
workload that allocates in four steps) or none (an old report) gets a
least-squares line whose uncertainty is its noise over the span it covers.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from l0mem.estimate.model import AnalysisConfig, Sample, SignalFit
from l0mem.estimate.signals import cost_series, signal_info, value
from l0mem.estimate.steps import StepSlope, step_slope, windows


@dataclasses.dataclass(frozen=True)
class Line:
    """A least-squares line with how well it fits."""

    slope: float
    intercept: float
    r2: float | None
    residual: float | None


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> Line | None:
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
    return Line(slope, intercept, r2, residual)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Return the median of the slopes between every two points with different x, or None."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    ]
    return statistics.median(slopes) if slopes else None


def climb(samples: Sequence[Sample]) -> list[Sample]:
    """Return the run up to its peak: the idle samples and the alloc ones until the last at the peak.

    Without window marks, so that a fit over them is a line: the level the
    host reached as device memory grew, whatever happened in any window.
    """
    alloc = [i for i, s in enumerate(samples) if s.phase == "alloc"]
    if not alloc:
        return []
    peak = max(samples[i].device_bytes for i in alloc)
    last = max(i for i in alloc if samples[i].device_bytes == peak)
    return [
        dataclasses.replace(s, step=None, edge=None)
        for i, s in enumerate(samples)
        if s.phase == "idle" or (s.phase == "alloc" and i <= last)
    ]


def climbs(samples: Sequence[Sample]) -> list[list[Sample]]:
    """Return each climb of the run: device memory from none up to the last sample at that climb's peak.

    A climb begins where device memory last was none (the idle samples for the
    first, the freed ones for later climbs, both read as idle) and ends at its
    peak; a run that frees everything and allocates again climbs again. Without
    window marks, as :func:`climb`.
    """
    found: list[list[Sample]] = []
    base: list[Sample] = []
    up: list[Sample] = []

    def close() -> None:
        if up:
            peak = max(s.device_bytes for s in up)
            last = max(i for i, s in enumerate(up) if s.device_bytes == peak)
            found.append([*base, *up[: last + 1]])

    for s in samples:
        plain = dataclasses.replace(s, step=None, edge=None)
        if s.phase == "alloc":
            up.append(plain)
            continue
        if up:
            close()
            up, base = [], []
        base.append(dataclasses.replace(plain, phase="idle"))
    close()
    return found


def step_slopes(
    samples: Sequence[Sample], signal: str, config: AnalysisConfig
) -> tuple[StepSlope | None, StepSlope | None]:
    """Return the slope over the windows that allocated and over those that freed (None: none)."""
    found = windows(samples, signal)
    grow = step_slope([w for w in found if w.device_bytes > 0], config.confidence)
    shrink = step_slope([w for w in found if w.device_bytes < 0], config.confidence)
    return grow, shrink


def _kept(grow: StepSlope, shrink: StepSlope | None) -> float | None:
    """Return what the allocation windows took less what the freeing windows gave back, MiB.

    Only when the frees undid every allocation window (a run stopped half way
    down freed the rest without windows): None otherwise.
    """
    if shrink is None:
        return None
    moved = sum(
        w.device_bytes for w in (*grow.kept, *grow.rejected, *shrink.kept, *shrink.rejected)
    )
    # Frees give back a positive cost over negative device bytes: the sum is what stayed.
    return grow.total_mib + shrink.total_mib if moved == 0 else None


def fit_signal(
    samples: Sequence[Sample],
    signal: str,
    config: AnalysisConfig | None = None,
    *,
    drift: float = 0.0,
    trend: bool = True,
) -> SignalFit:
    """Return the fit of ``signal``'s memory cost against device bytes over a run's samples.

    ``drift`` (MiB of cost per second, :func:`l0mem.estimate.steps.drift`) is
    taken out of a line's costs, as the windows take it out of theirs. A
    line's interval also holds its slope with a steady trend in time taken
    out (:func:`with_drift`), unless ``trend`` is False (a climb, which is
    there to see what moved with time).
    """
    config = config or AnalysisConfig()
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    series = cost_series(samples, signal, drift)
    idle = [c for phase, _, c in series if phase == "idle"]
    alloc = [(x, c) for phase, x, c in series if phase == "alloc"]
    # What the run kept: the freed samples after its last climb (a run that climbs
    # again freed everything in between).
    ends = max((i for i, (phase, _, _) in enumerate(series) if phase == "alloc"), default=-1)
    freed = [c for i, (phase, _, c) in enumerate(series) if phase == "freed" and i > ends]
    xs = [x for x, _ in alloc]
    ys = [c for _, c in alloc]
    line = least_squares(xs, ys)
    span = max(xs) - min(xs) if xs else 0.0
    base = SignalFit(
        signal=signal,
        side=info.side,
        points=len(alloc),
        slope=None,
        intercept_mib=None,
        r2=None if line is None else line.r2,
        noise_mib=None,
        residual_mib=None if line is None else line.residual,
        uncertainty=None,
        span_gib=span,
        peak_mib=max(ys) if ys else None,
        remaining_mib=freed[-1] if freed else None,
    )
    grow, shrink = step_slopes(samples, signal, config)
    # Too few windows for an interval of the asked confidence: the line over every sample.
    if grow is not None and grow.interval.coverage >= config.confidence:
        iv = grow.interval
        # The line through the climb's samples at the windows' slope: for plots and release
        # (the way down would pull a kept mirror's level into it).
        up = [(x, c) for phase, x, c in cost_series(climb(samples), signal) if phase == "alloc"]
        intercept = statistics.median(c - iv.median * x for x, c in up) if up else None
        return dataclasses.replace(
            base,
            points=iv.n,
            slope=iv.median,
            intercept_mib=intercept,
            noise_mib=grow.noise_mib,
            uncertainty=iv.half_width,
            method="steps",
            low=iv.low,
            high=iv.high,
            coverage=iv.coverage,
            rejected=tuple(w.step for w in grow.rejected),
            release_slope=None if shrink is None else shrink.slope,
            kept_mib=_kept(grow, shrink),
        )
    noise = statistics.stdev(idle) if len(idle) >= 2 else None
    fitted = line_fit(base, noise, xs, ys, config)
    ts = [s.t for s in samples if s.phase == "alloc" and value(s.values, signal) is not None]
    if not trend or len(ts) != len(xs):
        return fitted
    return with_drift(fitted, noise, xs, ys, ts, config)


# A steady trend in time is there where taking it out leaves this share of a line's
# residual spread or less (three quarters of its variance explained).
TREND_RESIDUAL = 0.5


def detrended(
    xs: Sequence[float], ys: Sequence[float], ts: Sequence[float]
) -> tuple[float, float | None, float] | None:
    """Return the slope of costs ``ys`` over device GiB ``xs`` with a straight line in time ``ts`` taken out of both.

    Also the residual spread (MiB) and the span device memory still covers
    once its own trend in time is out (GiB). None where either does not
    vary with time or nothing is left.
    """
    in_x, in_y = least_squares(ts, xs), least_squares(ts, ys)
    if in_x is None or in_y is None:
        return None
    rx = [x - in_x.intercept - in_x.slope * t for x, t in zip(xs, ts, strict=True)]
    ry = [y - in_y.intercept - in_y.slope * t for y, t in zip(ys, ts, strict=True)]
    sxx = sum(x * x for x in rx)
    if not sxx > 1e-18:
        return None
    slope = sum(x * y for x, y in zip(rx, ry, strict=True)) / sxx
    n = len(xs)
    ss = sum((y - slope * x) ** 2 for x, y in zip(rx, ry, strict=True))
    residual = math.sqrt(ss / (n - 3)) if n > 3 else None
    return slope, residual, max(rx) - min(rx)


def with_drift(
    fit: SignalFit,
    noise: float | None,
    xs: Sequence[float],
    ys: Sequence[float],
    ts: Sequence[float],
    config: AnalysisConfig,
) -> SignalFit:
    """Return a line ``fit`` whose interval also holds the slope with a steady drift in time taken out.

    A line over a run whose device memory only grew cannot tell a cost that
    follows device memory from another process that kept growing (or
    shrinking) all along: both rise with time. The slope with a straight
    line in time taken out of costs and device memory alike
    (:func:`detrended`) is what the device memory explains beyond any steady
    drift, its uncertainty the noise over the span device memory still
    covers then (a staircase keeps about a step of it, a smooth climb
    little). Only where the trend explains much of what the line left
    (its residual spread falls to :data:`TREND_RESIDUAL` of the line's or
    less) does the interval widen to hold both: a steady motion may be the
    run's own (a host side made slower than its steps) as well as another
    process's. Without such a trend the line stands as it was.
    """
    if fit.slope is None or fit.uncertainty is None or fit.residual_mib is None:
        return fit
    found = detrended(xs, ys, ts)
    if found is None:
        return fit
    slope, residual, span = found
    if residual is None or not span > 0.0 or residual > TREND_RESIDUAL * fit.residual_mib:
        return fit
    sigma = max(noise or 0.0, residual)
    uncertainty = config.noise_sigmas * sigma / span
    low = min(fit.slope - fit.uncertainty, slope - uncertainty)
    high = max(fit.slope + fit.uncertainty, slope + uncertainty)
    return dataclasses.replace(
        fit, low=low, high=high, uncertainty=max(high - fit.slope, fit.slope - low)
    )


def line_fit(
    base: SignalFit,
    noise: float | None,
    xs: Sequence[float],
    ys: Sequence[float],
    config: AnalysisConfig,
) -> SignalFit:
    """Return ``base`` with the least-squares line through costs ``ys`` (MiB) at device GiB ``xs``.

    Its uncertainty is the noise (the idle costs' spread, MiB, or the line's
    residual, whichever is larger) over the span the points cover.
    """
    line = least_squares(xs, ys)
    span = max(xs) - min(xs) if xs else 0.0
    uncertainty = None
    if line is not None and span > 0.0:
        # Host signals are system-wide: their noise comes from other processes and
        # drifts rather than averaging out, so it is not divided by sqrt(points).
        sigma = max(noise or 0.0, line.residual or 0.0)
        uncertainty = config.noise_sigmas * sigma / span
    return dataclasses.replace(
        base,
        points=len(xs),
        slope=None if line is None else line.slope,
        intercept_mib=None if line is None else line.intercept,
        r2=None if line is None else line.r2,
        residual_mib=None if line is None else line.residual,
        noise_mib=noise,
        uncertainty=uncertainty,
        span_gib=span,
        peak_mib=max(ys) if ys else None,
    )


__all__ = [
    "Line",
    "climb",
    "climbs",
    "detrended",
    "fit_signal",
    "least_squares",
    "line_fit",
    "step_slopes",
    "theil_sen",
    "with_drift",
]
