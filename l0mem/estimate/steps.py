"""Slopes from step windows: what each change of device memory cost, robust to neighbours.

A step window is a pair of samples taken right before and right after one
change of device memory (an allocation with its residency and fill, or a
free). Its ratio, the cost's change over the device memory's change, holds
whatever the host did over the run as a whole: a neighbour that takes or
gives back memory spoils only the windows it happened to act in, and the
windows come at moments it cannot follow. So:

- a window whose cost lies further from the median line than the windows'
  own spread allows (:data:`REJECT_SIGMAS` robust deviations, and never less
  than :data:`REJECT_FLOOR_MIB`) is rejected as disturbed and reported;
- the slope is the median of the kept windows' ratios;
- its interval is distribution-free: the order statistics around the median
  whose coverage under a binomial law is at least the asked confidence
  (with few windows, the widest there is, at the coverage it has).

Nothing here assumes the noise is Gaussian or that it averages out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from l0mem.estimate.model import Sample
from l0mem.estimate.signals import GIB, MIB, signal_info, value

# A window further than this many robust deviations from the median line was disturbed.
REJECT_SIGMAS = 4.0
# ... and never one closer than this: a quiet machine's jitter is not a neighbour.
REJECT_FLOOR_MIB = 16.0
# Rejection stops short of this share of the windows: past it, the median must cope alone.
MAX_REJECTED = 0.25
# Scale from the median absolute deviation to a standard deviation under a normal law.
MAD_SCALE = 1.4826


@dataclasses.dataclass(frozen=True)
class Window:
    """One change of device memory and what one signal did across it."""

    step: int
    t: float  # when the window closed, seconds into the run
    seconds: float  # how long the window lasted
    device_bytes: int  # the change of device memory (negative: freed)
    cost_mib: float  # the change of the signal's cost, sense applied

    @property
    def gib(self) -> float:
        """Return the change of device memory in GiB."""
        return self.device_bytes / GIB

    @property
    def ratio(self) -> float:
        """Return the window's cost in MiB per GiB of device memory changed."""
        return self.cost_mib / self.gib


def windows(samples: Sequence[Sample], signal: str) -> list[Window]:
    """Return the step windows of ``samples`` in which ``signal`` was read at both edges.

    A window is the "before" and "after" sample of one step; an "after"
    without a "before" of its step closes a window that opened at the sample
    just before it (a watched workload's windows are consecutive samples).
    """
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    before: dict[int, Sample] = {}
    out: list[Window] = []
    prev: Sample | None = None
    for s in samples:
        last, prev = prev, s
        if s.step is None:
            continue
        if s.edge == "before":
            before[s.step] = s
            continue
        b = before.pop(s.step, last)
        if b is None or s.device_bytes == b.device_bytes:
            continue
        v0, v1 = value(b.values, signal), value(s.values, signal)
        if v0 is None or v1 is None:
            continue
        out.append(
            Window(
                step=s.step,
                t=s.t,
                seconds=s.t - b.t,
                device_bytes=s.device_bytes - b.device_bytes,
                cost_mib=info.sense * (v1 - v0) / MIB,
            )
        )
    return out


@dataclasses.dataclass(frozen=True)
class Interval:
    """A median with a distribution-free interval around it."""

    median: float
    low: float
    high: float
    coverage: float  # the probability the interval holds the true median
    n: int

    @property
    def half_width(self) -> float:
        """Return the wider side of the interval."""
        return max(self.median - self.low, self.high - self.median)


def _binomial_tail(n: int, k: int) -> float:
    """Return P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


def median_interval(values: Sequence[float], confidence: float) -> Interval:
    """Return the median of ``values`` and the narrowest order-statistic interval of ``confidence``.

    The interval is ``[x(k), x(n+1-k)]`` of the sorted values for the largest
    rank ``k`` whose coverage ``1 - 2 P(B <= k-1)`` is still at least
    ``confidence``; with too few values for that, the whole range at the
    coverage it has.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    k = 1
    while k + 1 <= (n + 1) // 2 and 1.0 - 2.0 * _binomial_tail(n, k) >= confidence:
        k += 1
    coverage = 1.0 - 2.0 * _binomial_tail(n, k - 1)
    return Interval(statistics.median(xs), xs[k - 1], xs[n - k], coverage, n)


@dataclasses.dataclass(frozen=True)
class StepSlope:
    """The slope one signal shows over a run's step windows (alloc windows, or free windows)."""

    interval: Interval  # MiB per GiB
    noise_mib: float  # robust spread of the kept windows' costs about the median line
    kept: tuple[Window, ...]
    rejected: tuple[Window, ...]

    @property
    def slope(self) -> float:
        """Return the median ratio in MiB per GiB."""
        return self.interval.median

    @property
    def total_mib(self) -> float:
        """Return the cost over every window, a rejected one counted at the median ratio."""
        return sum(w.cost_mib for w in self.kept) + sum(self.slope * w.gib for w in self.rejected)


def robust_spread(residuals: Sequence[float]) -> float:
    """Return the median absolute deviation of ``residuals`` from 0, scaled to a standard deviation."""
    return MAD_SCALE * statistics.median(abs(r) for r in residuals) if residuals else 0.0


def step_slope(found: Sequence[Window], confidence: float) -> StepSlope | None:
    """Return the slope over ``found`` with disturbed windows rejected, or None without windows."""
    if not found:
        return None
    center = statistics.median(w.ratio for w in found)
    residuals = [w.cost_mib - center * w.gib for w in found]
    limit = max(REJECT_SIGMAS * robust_spread(residuals), REJECT_FLOOR_MIB)
    order = sorted(range(len(found)), key=lambda i: -abs(residuals[i]))
    cap = int(MAX_REJECTED * len(found))
    out = {i for i in order[:cap] if abs(residuals[i]) > limit}
    kept = tuple(w for i, w in enumerate(found) if i not in out)
    rejected = tuple(w for i, w in enumerate(found) if i in out)
    interval = median_interval([w.ratio for w in kept], confidence)
    spread = robust_spread([w.cost_mib - interval.median * w.gib for w in kept])
    return StepSlope(interval, spread, kept, rejected)


def windows_needed(slope: StepSlope, distance: float, confidence: float) -> int | None:
    """Return how many kept windows would make the interval narrower than ``distance`` MiB/GiB.

    From the large-sample width of a median's interval,
    ``z * sqrt(pi/2) * sigma / sqrt(n)``, with ``sigma`` the kept windows'
    robust spread in MiB/GiB; None when ``distance`` is not positive (the
    slope sits on a verdict's threshold: no number of windows separates).
    """
    if not distance > 0:
        return None
    sigma = robust_spread([w.ratio - slope.slope for w in slope.kept])
    if sigma == 0:
        return len(slope.kept) + 1
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    need = math.ceil((z * math.sqrt(math.pi / 2.0) * sigma / distance) ** 2)
    return max(need, len(slope.kept) + 1)


__all__ = [
    "MAX_REJECTED",
    "REJECT_FLOOR_MIB",
    "REJECT_SIGMAS",
    "Interval",
    "StepSlope",
    "Window",
    "median_interval",
    "robust_spread",
    "step_slope",
    "windows",
    "windows_needed",
]
