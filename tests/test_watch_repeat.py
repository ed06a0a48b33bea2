"""A workload run again (``run --repeat``): its climbs judged together outvote a churning neighbour."""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import DEFAULT_CONFIG
from l0mem.estimate.climbs import climb_line
from l0mem.estimate.fits import climbs, fit_signal
from l0mem.watch.estimation import device_series, judged_samples, watch_config
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
def test_three_runs_beside_a_churning_neighbour_are_right_more_often_than_one(
    ratio: float,
) -> None:
    # One run: the neighbour's lumps land in some steps and the run's one climb
    # cannot tell them from its own. Three: a cost of the run's own comes back at
    # the same step of every climb, the neighbour's lump moves one step of one
    # (measured over 20 seeds: clean 12 -> 16, partial 15 -> 19, mirror 17 -> 20).
    once = [summarize(repeated_job(seed, ratio, 1)).verdict for seed in range(10)]
    thrice = [summarize(repeated_job(seed, ratio, 3)).verdict for seed in range(10)]
    assert all(v in (truth(ratio), "inconclusive") for v in once + thrice), (once, thrice)
    assert thrice.count(truth(ratio)) >= 9, thrice
    assert thrice.count(truth(ratio)) > once.count(truth(ratio)), (once, thrice)


@pytest.mark.parametrize("late", [0.5, 1.0])
@pytest.mark.parametrize("ratio", [0.12, 0.3, 1.0])
def test_three_runs_of_a_host_side_paid_late_are_never_clean(ratio: float, late: float) -> None:
    # Seeds 11, 12 and 19 read clean while the runs' climbs were taken for one (the
    # last run's levels against the idle level before the first): a review's cases.
    for seed in (0, 1, 2, 11, 12, 19):
        summary = summarize(repeated_job(seed, ratio, 3, late=late))
        assert summary.verdict != "clean", (seed, summary.analysis.reason)
        assert summary.verdict != "mirror" or truth(ratio) == "mirror"


def test_a_job_that_frees_everything_and_allocates_again_climbs_again() -> None:
    # As the audit's climbs: device memory back to none between runs is freed, and
    # each run's climb is judged as one of several through the same levels.
    job = repeated_job(0, 0.5, 3, lumps=0)
    config = watch_config(DEFAULT_CONFIG)
    samples = judged_samples(job, device_series(job), config)
    found = climbs(samples)
    assert len(found) == 3
    assert all(max(s.device_bytes for s in c) == 8 * 64 * MIB for c in found)
    line = climb_line(samples, "host.available", config, 0.0)
    assert line.climbs == 3
    assert line.line.slope == pytest.approx(512.0, rel=0.05)


def test_what_a_job_kept_is_read_after_its_last_climb_only() -> None:
    # Freed between two runs, then stopped holding memory: nothing was seen kept.
    job = repeated_job(1, 1.0, 2, lumps=0)
    cut = Series(job.baseline, job.samples[: len(job.samples) * 3 // 4], {})
    config = watch_config(DEFAULT_CONFIG)
    samples = judged_samples(cut, device_series(cut), config)
    assert samples[-1].device_bytes > 0
    assert fit_signal(samples, "host.available", config).remaining_mib is None
