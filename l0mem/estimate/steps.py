"""Slopes from step windows: what each change of device memory cost, robust to neighbours.

A step window is a pair of samples taken right before and right after one
change of device memory (an allocation with its residency and fill, or a
free). Its ratio, the cost's change over the device memory's change, holds
whatever the host did over the run as a whole: a neighbour that takes or
gives back memory spoils only the windows it happened to act in, and the
windows come at moments it cannot follow. So:

- a window whose cost lies further from the median line than the windows'
  own spread allows (:data:`REJECT_SIGMAS` robust deviations, and never less
  than :data:`REJECT_FLOOR_MIB`) is rejected as disturbed and reported; where
  half the windows or more were disturbed, the group that agrees on one
  slope stands for the run (:mod:`l0mem.estimate.agree`);
- the slope is the median of the kept windows' ratios, each window weighted
  by the device bytes it changed;
- its interval is distribution-free: the order statistics around the median
  whose coverage under a binomial law is at least the asked confidence
  (with few windows, the widest there is, at the coverage it has);
- a steady drift of the host (another process growing or shrinking all
  along) is measured in the pauses between windows, where device memory
  does not change, and taken out of each window in proportion to its length;
  a pause read inside as well as at its ends counts only where every read
  lies on its straight line: a neighbour's jump (or a few) in a pause is no
  rate that went on through the next window.

Nothing here assumes the noise is Gaussian or that it averages out.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import statistics
from collections.abc import Sequence

from l0mem.estimate.agree import agreeing, spread_interval
from l0mem.estimate.model import Sample
from l0mem.estimate.order import Interval, median_interval
from l0mem.estimate.signals import GIB, MIB, signal_info, value

# A window further than this many robust deviations from the median line was disturbed.
REJECT_SIGMAS = 4.0
# ... and never one closer than this: a quiet machine's jitter is not a neighbour.
REJECT_FLOOR_MIB = 16.0
# Rejection stops short of this share of the windows: past it, the median must cope alone.
MAX_REJECTED = 0.25
# Up to this many windows, a group of them that agrees on one slope may stand for the run.
MAX_AGREE_WINDOWS = 32
# Scale from the median absolute deviation to a standard deviation under a normal law.
MAD_SCALE = 1.4826


@dataclasses.dataclass(frozen=True)
class Window:
    """One change of device memory and what one signal did across it."""

    step: int
    t: float  # when the window closed, seconds into the run
    seconds: float  # how long the window lasted
    device_bytes: int  # the change of device memory (negative: freed)
    cost_mib: float  # the change of the signal's cost, sense applied (drift taken out)
    start_mib: float = 0.0  # the signal's level at the window's edges, sense applied
    end_mib: float = 0.0

    @property
    def gib(self) -> float:
        """Return the change of device memory in GiB."""
        return self.device_bytes / GIB

    @property
    def ratio(self) -> float:
        """Return the window's cost in MiB per GiB of device memory changed."""
        return self.cost_mib / self.gib


# Pauses between windows needed before a drift is measured and taken out ...
MIN_PAUSES = 4
# ... and how far their rates may scatter about the median, as a share of it.
STEADY = 0.5


def windows(samples: Sequence[Sample], signal: str, *, drift: bool = True) -> list[Window]:
    """Return the step windows of ``samples`` in which ``signal`` was read at both edges.

    A window is the "before" and "after" sample of one step; an "after"
    without a "before" of its step closes a window that opened at the sample
    just before it (a watched workload's windows are consecutive samples).
    Each window's cost has the host's drift over its length taken out
    (:func:`local_drift`), unless ``drift`` is False.
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
        start, end = info.sense * v0 / MIB, info.sense * v1 / MIB
        out.append(
            Window(
                step=s.step,
                t=s.t,
                seconds=s.t - b.t,
                device_bytes=s.device_bytes - b.device_bytes,
                cost_mib=end - start,
                start_mib=start,
                end_mib=end,
            )
        )
    if not drift:
        return out
    rates = local_drift(out, reads(samples, signal))
    return [
        dataclasses.replace(w, cost_mib=w.cost_mib - rate * w.seconds)
        for w, rate in zip(out, rates, strict=True)
    ]


def reads(samples: Sequence[Sample], signal: str) -> list[tuple[float, float]]:
    """Return ``signal``'s cost (MiB, sense applied) at each time it was read, in time order."""
    info = signal_info(signal)
    if info is None:
        raise ValueError(f"unknown signal {signal!r}")
    out: dict[float, float] = {}
    for s in samples:
        v = value(s.values, signal)
        if v is not None:
            out.setdefault(s.t, info.sense * v / MIB)
    return sorted(out.items())


def _agree(a: float, b: float) -> bool:
    """Return whether two rates agree within :data:`STEADY` of the larger."""
    return abs(a - b) <= STEADY * max(abs(a), abs(b))


# A read inside a pause lies on its straight line within this many MiB ...
STEADY_JITTER_MIB = 2.0
# ... or within this share of the pause's whole change, where that is more.
STEADY_SHARE = 1 / 8
# Reads this close to a pause's ends (seconds) are its ends: a window's edge read twice.
_EDGE = 1e-6


def steady_rate(read: Sequence[tuple[float, float]]) -> float | None:
    """Return the rate (MiB a second) of ``read`` (time, cost MiB) where it was steady, else None.

    Steady: every read lies on the straight line between the first and the
    last within :data:`STEADY_JITTER_MIB`, or :data:`STEADY_SHARE` of the
    whole change where that is more. A step, or a few, is another process's
    (or the run's own), not a rate that carried on. None also for fewer than
    two reads or no time between them.
    """
    if len(read) < 2 or read[-1][0] - read[0][0] <= 0:
        return None
    (t0, c0), (t1, c1) = read[0], read[-1]
    rate = (c1 - c0) / (t1 - t0)
    tolerance = max(STEADY_JITTER_MIB, abs(c1 - c0) * STEADY_SHARE)
    if any(abs(c - (c0 + rate * (t - t0))) > tolerance for t, c in read[1:-1]):
        return None
    return rate


def _pause_rate(
    a: Window, b: Window, inside: Sequence[tuple[float, float]]
) -> float | None:
    """Return the rate over the pause from window ``a`` to window ``b``, or None where it was no drift.

    ``inside`` are the reads taken within the pause, its ends included. With
    reads between the ends, the pause counts only where it was steady
    (:func:`steady_rate`). Read at its ends only, a pause cannot be told apart.
    """
    start, end = a.t, b.t - b.seconds
    if end - start <= 0:
        return None
    between = [(t, c) for t, c in inside if start + _EDGE < t < end - _EDGE]
    return steady_rate([(start, a.end_mib), *between, (end, b.start_mib)])


def _pauses(
    found: Sequence[Window], read: Sequence[tuple[float, float]]
) -> dict[tuple[int, int], float]:
    """Return, by the pair of windows (indices into ``found``) around it, each steady pause's rate."""
    order = sorted(range(len(found)), key=lambda i: found[i].t)
    times = [t for t, _ in read]
    out: dict[tuple[int, int], float] = {}
    for a, b in itertools.pairwise(order):
        lo = bisect.bisect_left(times, found[a].t)
        hi = bisect.bisect_right(times, found[b].t - found[b].seconds)
        rate = _pause_rate(found[a], found[b], read[lo:hi])
        if rate is not None:
            out[(a, b)] = rate
    return out


def local_drift(
    found: Sequence[Window], read: Sequence[tuple[float, float]] = ()
) -> list[float]:
    """Return, per window, the drift (MiB of cost per second) to take out of it.

    Where the pauses right before and right after a window agree on a rate
    (another process growing or shrinking through the window: it carried
    that rate too), their mean; else the run's steady drift (:func:`drift`),
    or 0 (a neighbour that jumped in one of the pauses says nothing of the
    window between them). ``read`` are the signal's reads over the run
    (:func:`reads`): a pause with reads inside counts only where it was
    steady.
    """
    pauses = _pauses(found, read)
    steady = _steady(list(pauses.values()))
    order = sorted(range(len(found)), key=lambda i: found[i].t)
    rate: dict[int, float] = {}
    for k, i in enumerate(order):
        before = pauses.get((order[k - 1], i)) if k > 0 else None
        after = pauses.get((i, order[k + 1])) if k + 1 < len(order) else None
        if before is not None and after is not None and _agree(before, after):
            rate[i] = (before + after) / 2.0
        else:
            rate[i] = steady
    return [rate[i] for i in range(len(found))]


def drift(found: Sequence[Window], read: Sequence[tuple[float, float]] = ()) -> float:
    """Return the host's steady drift, MiB of cost per second, from the pauses between windows.

    Between two windows device memory does not change, so what the signal did
    there is other processes': when the pauses agree on a rate (their robust
    spread within :data:`STEADY` of it), that rate is a drift every window
    also carried for its length. 0 with fewer than :data:`MIN_PAUSES` steady
    pauses or rates that scatter (a neighbour that jumps now and then).
    """
    return _steady(list(_pauses(found, read).values()))


def _steady(rates: Sequence[float]) -> float:
    """Return the rate the pauses' ``rates`` agree on, or 0 where they are few or scatter."""
    if len(rates) < MIN_PAUSES:
        return 0.0
    rate = statistics.median(rates)
    # Steady means the pauses agree: a neighbour that jumps now and then makes their
    # rates scatter, and a median of scattered rates is no drift to take out.
    scatter = robust_spread([r - rate for r in rates])
    return rate if scatter <= STEADY * abs(rate) else 0.0


@dataclasses.dataclass(frozen=True)
class StepSlope:
    """The slope one signal shows over a run's step windows (alloc windows, or free windows)."""

    interval: Interval  # MiB per GiB
    noise_mib: float  # robust spread of the kept windows' costs about the median line
    kept: tuple[Window, ...]
    rejected: tuple[Window, ...]
    limit_mib: float = math.inf  # how far from the median line a window may lie undisturbed

    @property
    def slope(self) -> float:
        """Return the median ratio in MiB per GiB."""
        return self.interval.median

    @property
    def total_mib(self) -> float:
        """Return the cost over every window, each disturbed one counted at the median ratio.

        Disturbed here is every window further from the median line than
        ``limit_mib``, not only those the slope left out (at most a quarter):
        a sum must not carry any neighbour's step.
        """
        return sum(
            w.cost_mib
            if abs(w.cost_mib - self.slope * w.gib) <= self.limit_mib
            else self.slope * w.gib
            for w in (*self.kept, *self.rejected)
        )


def robust_spread(residuals: Sequence[float]) -> float:
    """Return the median absolute deviation of ``residuals`` from 0, scaled to a standard deviation."""
    return MAD_SCALE * statistics.median(abs(r) for r in residuals) if residuals else 0.0


def step_slope(found: Sequence[Window], confidence: float) -> StepSlope | None:
    """Return the slope over ``found`` with disturbed windows rejected, or None without windows."""
    if not found:
        return None
    center = median_interval([w.ratio for w in found], confidence, [w.gib for w in found]).median
    residuals = [w.cost_mib - center * w.gib for w in found]
    limit = max(REJECT_SIGMAS * robust_spread(residuals), REJECT_FLOOR_MIB)
    order = sorted(range(len(found)), key=lambda i: -abs(residuals[i]))
    cap = int(MAX_REJECTED * len(found))
    out = {i for i in order[:cap] if abs(residuals[i]) > limit}
    # A watched job's few windows: half of them may be disturbed, and then the
    # spread is theirs. (Many windows: the median copes, and the audit climbs again.)
    astray = any(abs(residuals[i]) > REJECT_FLOOR_MIB for i in range(len(found)) if i not in out)
    group = (
        agreeing([w.cost_mib for w in found], [w.gib for w in found], REJECT_FLOOR_MIB)
        if astray and len(found) <= MAX_AGREE_WINDOWS
        else None
    )
    if group is not None and len(found) - len(out) > len(group.members):
        # The windows that agree on one slope are the ones that measured the run.
        out, limit = set(range(len(found))) - group.members, group.gap / 2.0
    kept = tuple(w for i, w in enumerate(found) if i not in out)
    rejected = tuple(w for i, w in enumerate(found) if i in out)
    interval = median_interval([w.ratio for w in kept], confidence, [w.gib for w in kept])
    # The range widened by itself holds only for windows that agree: the kept ones
    # must all be the group's (the median's rejection may have kept others).
    agree = group is not None and set(range(len(found))) - out <= group.members
    if agree and out and interval.coverage < confidence:
        low, high = spread_interval([w.ratio for w in kept], [w.gib for w in kept])
        interval = dataclasses.replace(interval, low=low, high=high, coverage=confidence)
    spread = robust_spread([w.cost_mib - interval.median * w.gib for w in kept])
    return StepSlope(interval, spread, kept, rejected, limit)


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
    "StepSlope",
    "Window",
    "drift",
    "local_drift",
    "reads",
    "robust_spread",
    "steady_rate",
    "step_slope",
    "windows",
    "windows_needed",
]
