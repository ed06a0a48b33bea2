"""What a run that can repeat its steps (the audit) should do next: stop, step again, or climb again.

The audit allocates and frees while the estimation cannot yet give a verdict
with a slope within the precision. Most of the time one step more is what
helps: another window for the median. Where the climb contradicts the
windows, or cannot yet confirm a clean, only a whole climb more can tell a
cost of the run's own (it comes back at the same level) from another
process's motion (it seldom does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from l0mem.estimate.climbs import confirms_clean, disputed
from l0mem.estimate.decide import analyze_samples
from l0mem.estimate.model import AnalysisConfig, Sample

Move = Literal["enough", "step", "climb"]

# Enough once the slope's interval lies within this share of the slope (and no
# closer than the floor, MiB per GiB) on either side ...
PRECISION = 0.10
PRECISION_FLOOR = 50.0
# ... or once a typical free gave back less than this share of what an allocation took.
LEAKS = 0.5


def next_move(samples: Sequence[Sample], config: AnalysisConfig) -> Move:
    """Return what the run should do next to reach a verdict whose slope is within the precision."""
    result = analyze_samples(samples, config)
    fit = result.fit(result.deciding_signal) if result.deciding_signal else None
    if fit is None or fit.slope is None:
        return "climb" if any(disputed(why) for why in result.passed_over.values()) else "step"
    if result.verdict == "clean" and not confirms_clean(samples, fit, config):
        # Beside a neighbour one climb may hide a cost paid late: the next ones show it.
        return "climb"
    # A typical free gave back less than half of the least an allocation may have
    # taken: each cycle would leak. (Not of the slope alone: a neighbour that took
    # memory in the windows raises it, and the audit would stop at its word.)
    least = fit.low if fit.low is not None else fit.slope
    if fit.release_slope is not None and fit.release_slope < LEAKS * least:
        return "enough"
    wanted = max(PRECISION * abs(fit.slope), PRECISION_FLOOR)
    return "enough" if fit.method != "steps" or (fit.uncertainty or 0.0) <= wanted else "step"


__all__ = ["LEAKS", "PRECISION", "PRECISION_FLOOR", "Move", "next_move"]
