"""Small steps beside a neighbour's brief lumps: never a wrong verdict.

At 32-128 MiB steps, 16 MiB is 125-500 MiB/GiB, more than clean allows, and
a watched job has few windows (eight give the median no narrower interval
than their range): one window a neighbour moved by a few MiB spans two
verdicts alone. Such jobs may read ``inconclusive`` (most do at 32-64 MiB
steps); they never read a wrong verdict, clean or paying.
"""

from __future__ import annotations

import random

import pytest

from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.test_watch_late import truth

MIB = 1 << 20
GIB = 1 << 30


def brief_lumps_job(seed: int, ratio: float) -> Series:
    """Return a watched job whose windows a neighbour hits with brief lumps.

    Eight allocations of 32, 64 or 128 MiB a second apart, read every 8-12
    ms, the host side (``ratio`` of each step) made at once. In one or two
    of the step windows another process takes more than clean allows the
    step, under the 16 MiB rejection floor (4.5 MiB at least), right as device memory
    moves, or gives it back, and undoes it 150-400 ms later; reads jitter by
    half a MiB.
    """
    rng = random.Random(seed)
    step = rng.choice([32, 64, 128]) * MIB
    changes = [1.0 + k + rng.uniform(0.0, 0.1) for k in range(8)]
    hit = rng.sample(range(8), rng.choice([1, 2]))
    lumps = []
    for k in hit:
        size = rng.uniform(max(4.5, 1.05 * 102.4 * step / GIB), 15.0) * MIB
        lumps.append((changes[k] + 0.002, changes[k] + rng.uniform(0.15, 0.4), rng.choice([1, -1]) * size))
    end = changes[-1] + 1.5
    samples, t = [], 0.0
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    while t < end:
        t += rng.uniform(0.008, 0.012)
        device = step * sum(1 for at in changes if at <= t)
        other = sum(size for start, stop, size in lumps if start <= t < stop)
        jitter = rng.uniform(-0.5, 0.5) * MIB
        values = {
            "host.available": 64 * GIB - round(ratio * device + other + jitter),
            "sysman.0.used": device,
        }
        samples.append(WatchSample(t, values, pids=1))
    return Series(base, tuple(samples), {})


@pytest.mark.parametrize("block", range(3))
def test_clean_jobs_at_small_steps_beside_brief_lumps_are_never_partial_nor_mirror(block: int) -> None:
    verdicts = [summarize(brief_lumps_job(seed, 0.0)).verdict for seed in range(block * 20, block * 20 + 20)]
    assert set(verdicts) <= {"clean", "inconclusive"}, verdicts
    assert "clean" in verdicts


@pytest.mark.parametrize("ratio", [0.12, 0.15, 0.2, 0.3, 1.0])
def test_jobs_that_pay_are_never_clean_beside_brief_lumps(ratio: float) -> None:
    verdicts = [summarize(brief_lumps_job(seed, ratio)).verdict for seed in range(40)]
    assert set(verdicts) <= {truth(ratio), "inconclusive"}, verdicts
    assert verdicts.count(truth(ratio)) >= 10, verdicts
