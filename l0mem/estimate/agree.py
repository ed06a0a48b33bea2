"""The windows that agree: the group of step windows one slope explains, where it stands out.

A neighbour that acts in half of a watched job's eight windows leaves the
other half measuring the job alone: those agree with each other to within a
quiet machine's jitter, and the disturbed ones agree with nothing. The
median's rejection (:func:`l0mem.estimate.steps.step_slope`: a multiple of
the windows' robust spread) cannot see it then, because half the windows
make that spread.

A group stands for the run only where chance cannot have made it: it holds
most of the windows (three at least) and half of the device bytes they
changed, its windows lie within ``s`` MiB of one slope (:data:`MAX_SPREAD_MIB`
at most), every other
window lies at least :data:`APART` times ``s`` from that slope (``s`` never
taken below :data:`JITTER_MIB`, the distance never below the median's own
rejection floor), and no other group of its size does the same apart from it. Noise that scatters every window makes no such group;
nor does a neighbour that did the same thing in half of them (a buffer of
one size taken and given back), which a group of half the windows would
let decide.

A driver that mirrors some allocations and not others (by size, say) makes
two groups of different sizes: the larger carries the verdict only if it
holds half of the bytes, and the climb's check (:mod:`l0mem.estimate.climbs`)
still stands against a clean the other windows contradict.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

# A quiet machine's jitter between two reads, MiB: a group is never held tighter ...
JITTER_MIB = 1.0
# ... and its windows lie this close to one slope at most: windows that spread wider
# measured more than the run (noise that scatters every window groups by chance only
# in a band this narrow, about once in 30,000 runs of eight).
MAX_SPREAD_MIB = 8.0
# How much further than the group's own spread every other window must lie.
APART = 8.0
# The fewest windows a group may stand on.
MIN_GROUP = 3


@dataclasses.dataclass(frozen=True)
class Group:
    """Windows that agree on one slope: their indices, their spread and the gap to the rest (MiB)."""

    members: frozenset[int]
    spread: float
    gap: float

    def stands_out(self, floor: float) -> bool:
        """Return whether every other window lies far enough from the group's slope (``floor`` MiB at least)."""
        return self.spread <= MAX_SPREAD_MIB and self.gap >= max(
            APART * max(self.spread, JITTER_MIB), floor
        )


def _group(costs: Sequence[float], gibs: Sequence[float], seed: int, size: int) -> Group:
    """Return the ``size`` windows closest to window ``seed``'s slope, about their own median slope."""
    n = len(costs)

    def off(slope: float) -> list[float]:
        return [abs(costs[j] - slope * gibs[j]) for j in range(n)]

    near = sorted(range(n), key=off(costs[seed] / gibs[seed]).__getitem__)[:size]
    slope = statistics.median(costs[j] / gibs[j] for j in near)
    residual = off(slope)
    members = sorted(range(n), key=residual.__getitem__)[:size]
    spread = max(residual[j] for j in members)
    rest = [residual[j] for j in range(n) if j not in members]
    return Group(frozenset(members), spread, min(rest) if rest else math.inf)


def agreeing(costs: Sequence[float], gibs: Sequence[float], floor: float) -> Group | None:
    """Return the group of windows that agree on one slope, or None where no group stands out.

    ``costs`` are the windows' costs (MiB), ``gibs`` the device memory each
    changed (GiB, never 0); a window within ``floor`` MiB of the group's
    slope is never apart from it (a quiet machine's few MiB are no neighbour).
    """
    n = len(costs)
    if n < MIN_GROUP or len(gibs) != n or not all(g for g in gibs):
        return None
    weight = [abs(g) for g in gibs]
    found: list[Group] = []
    for size in range(max(MIN_GROUP, n // 2 + 1), n):
        for seed in range(n):
            group = _group(costs, gibs, seed, size)
            if group.stands_out(floor) and 2 * sum(weight[i] for i in group.members) >= sum(weight):
                found.append(group)
    if not found:
        return None
    best = max(found, key=lambda g: (len(g.members), -g.spread))
    if any(
        len(g.members) >= len(best.members) and g.members.isdisjoint(best.members) for g in found
    ):
        return None  # two groups of one size: which one is the run's, nothing says
    return best


def spread_interval(ratios: Sequence[float], gibs: Sequence[float]) -> tuple[float, float]:
    """Return the interval that holds the slope of windows that agree: their range, widened by itself.

    Too few windows for a distribution-free interval of the asked
    confidence: each one measured the slope but for a quiet machine's
    jitter, so the slope lies within their range, and their range, widened
    by as much again (never by less than :data:`JITTER_MIB` of the smallest
    window's cost), allows for jitter that went one way in all of them.
    """
    low, high = min(ratios), max(ratios)
    margin = max(high - low, JITTER_MIB / min(abs(g) for g in gibs))
    return low - margin, high + margin


__all__ = [
    "APART",
    "JITTER_MIB",
    "MAX_SPREAD_MIB",
    "MIN_GROUP",
    "Group",
    "agreeing",
    "spread_interval",
]
