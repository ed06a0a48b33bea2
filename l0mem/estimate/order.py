"""Distribution-free intervals: the median of some values and the order statistics around it.

Nothing here assumes the values are normal or that their noise averages
out: the interval ``[x(k), x(n+1-k)]`` of the sorted values holds the true
median with a probability the binomial law gives exactly, whatever the
values' distribution (weighted values count by their effective number).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence


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


def rank(n: int, confidence: float) -> tuple[int, float]:
    """Return the largest rank ``k`` whose ``[x(k), x(n+1-k)]`` holds the median with ``confidence``.

    Also its coverage, ``1 - 2 P(B <= k-1)`` for B ~ Binomial(n, 1/2); with too
    few values for ``confidence``, rank 1 (the whole range) at the coverage it
    has. Exact, in integers: ``2**n`` never overflows.
    """
    if n < 1:
        raise ValueError("no values")
    total = 1 << n
    choose, tail, k = 1, 1, 1  # C(n, k-1) and P(B <= k-1) * 2**n
    while k + 1 <= (n + 1) // 2:
        choose = choose * (n - k + 1) // k
        if (total - 2 * (tail + choose)) / total < confidence:
            break
        tail, k = tail + choose, k + 1
    return k, (total - 2 * tail) / total


def _quantile(pairs: Sequence[tuple[float, float]], fraction: float, strict: bool = False) -> float:
    """Return the smallest value whose cumulative weight share reaches ``fraction`` (exceeds it when ``strict``)."""
    whole = sum(w for _, w in pairs)
    seen = 0.0
    for x, w in pairs:
        seen += w
        share = seen / whole
        if share > fraction + 1e-12 or (not strict and share >= fraction - 1e-12):
            return x
    return pairs[-1][0]


def median_interval(
    values: Sequence[float], confidence: float, weights: Sequence[float] | None = None
) -> Interval:
    """Return the median of ``values`` and the narrowest order-statistic interval of ``confidence``.

    Unweighted, the interval is ``[x(k), x(n+1-k)]`` of the sorted values for
    the rank :func:`rank` gives. With ``weights`` (a window's device bytes),
    the median and the interval's ends are the values where the cumulative
    weight reaches the same shares (``1/2``; from below ``k/n``, and from
    above ``k/n`` too, so that the interval of the values negated is this
    one negated), with ``n`` the effective number of values,
    ``(sum w)^2 / sum w^2``: equal weights give the unweighted answer, a few
    large windows are not outvoted by many small ones, and a light window at
    either end bounds the interval no more than at the other.
    """
    if not values:
        raise ValueError("no values")
    w = [1.0] * len(values) if weights is None else [abs(x) for x in weights]
    if len(w) != len(values) or not all(x > 0 for x in w):
        raise ValueError("one positive weight per value")
    pairs = sorted(zip(values, w, strict=True))
    n = max(1, math.floor(sum(w) ** 2 / sum(x * x for x in w) + 1e-9))
    k, coverage = rank(n, confidence)
    median = (_quantile(pairs, 0.5) + _quantile(pairs, 0.5, strict=True)) / 2.0
    # The upper end mirrors the lower one (the smallest value past the share n-k of n, where
    # the lower is the first to reach k of n): a light window at either end weighs as little.
    low, high = _quantile(pairs, k / n), _quantile(pairs, (n - k) / n, strict=True)
    if n == 1:  # one effective value (one weight outweighs the rest): no rank covers; all of them
        low, high = pairs[0][0], pairs[-1][0]
    return Interval(median, low, high, coverage, n)


__all__ = ["Interval", "median_interval", "rank"]
