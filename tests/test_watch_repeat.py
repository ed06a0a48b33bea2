"""A workload run again (``run --repeat``): its climbs judged together outvote a churning neighbour."""

from __future__ import annotations

import random

import pytest

from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.test_watch_late import truth

MIB = 1 << 20
GIB = 1 << 30


def repeated_job(
    seed: int,
    ratio: float,
    runs: int,
    *,
    steps: int = 8,
    step: int = 64 * MIB,
    gap: float = 0.5,
    lumps: int = 2,
    late: float = 0.0,
    delay: float = 0.3,
) -> Series:
    """Return a workload run ``runs`` times, one run after another, beside a churning neighbour.

    Each run waits 0.6 s, allocates ``steps`` of ``step`` bytes ``gap``
    seconds apart and frees them all a gap after the last; its host side is
    ``ratio`` of each step, ``late`` of it paid ``delay`` seconds after the
    step. In every run another process takes or gives back ``lumps`` lumps of
    200-700 MiB at random moments (and keeps them); reads every 8-12 ms, each
    off by up to 0.5 MiB.
    """
    rng = random.Random(seed)
    samples: list[WatchSample] = []
    t, other = 0.0, 0.0
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    for _ in range(runs):
        start = t + 0.6
        changes = [start + k * gap + rng.uniform(0.0, 0.05) for k in range(steps)]
        end = changes[-1] + gap
        moves = [
            (rng.uniform(start, end), rng.choice([-1, 1]) * rng.uniform(200, 700) * MIB)
            for _ in range(lumps)
        ]
        while t < end + 0.3:
            t += rng.uniform(0.008, 0.012)
            held = [c for c in changes if c <= t] if t < end else []
            host = sum(ratio * step * ((1 - late) + (late if t >= c + delay else 0.0)) for c in held)
            moved = other + sum(m for at, m in moves if at <= t)
            off = rng.uniform(-0.5, 0.5) * MIB
            values = {
                "host.available": 64 * GIB - round(host + moved + off),
                "sysman.0.used": step * len(held),
            }
            samples.append(WatchSample(round(t, 6), values, pids=1))
        other += sum(m for _, m in moves)
    return Series(base, tuple(samples), {})


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_three_runs_beside_a_churning_neighbour_are_right_where_one_often_is_not(
    ratio: float,
) -> None:
    # One run: the neighbour's lumps land in some steps and the run's one climb
    # cannot tell them from its own (8 of 20 clean runs, 5 of 20 partial and 3 of 20
    # mirrors inconclusive, measured). Three: a cost of the run's own comes back at
    # the same step of every climb, the neighbour's lump moves one step of one.
    once = [summarize(repeated_job(seed, ratio, 1)).verdict for seed in range(8)]
    thrice = [summarize(repeated_job(seed, ratio, 3)).verdict for seed in range(8)]
    assert thrice == [truth(ratio)] * 8, thrice
    assert all(v in (truth(ratio), "inconclusive") for v in once), once


@pytest.mark.parametrize("late", [0.5, 1.0])
@pytest.mark.parametrize("ratio", [0.15, 0.3, 1.0])
def test_three_runs_of_a_host_side_paid_late_are_never_clean(ratio: float, late: float) -> None:
    for seed in range(3):
        summary = summarize(repeated_job(seed, ratio, 3, late=late))
        assert summary.verdict != "clean", (seed, summary.analysis.reason)
        assert summary.verdict != "mirror" or truth(ratio) == "mirror"
