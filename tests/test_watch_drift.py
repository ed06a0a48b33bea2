"""Whose rate a watched job's windows take out: a neighbour's before the job, or the job's own host side."""

from __future__ import annotations

import random

import pytest

from l0mem.estimate.steps import steady_rate
from l0mem.watch.estimation import before_the_job, device_series, known_reads
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize

MIB = 1 << 20
GIB = 1 << 30
TRUTH = {0.0: "clean", 0.5: "partial", 1.0: "mirror"}


def job(
    seed: int,
    ratio: float,
    *,
    step: int = 128 * MIB,
    host_rate: float = 1.3e9,
    drift: float = 0.0,
    steps: int = 8,
) -> Series:
    """Return a watched job of ``steps`` allocations of ``step`` bytes a second apart, freed at the end.

    Its host side (``ratio`` of each step) is made at ``host_rate`` bytes a
    second from the moment device memory moves, each step's alongside the
    others'. ``drift``: another process taking (giving back, negative) that
    many MiB a second, steadily, from the first read. Reads every 8-12 ms,
    the first step a second in.
    """
    rng = random.Random(seed)
    changes = [(1.0 + k + rng.uniform(0.0, 0.1), step) for k in range(steps)]
    end = changes[-1][0] + 1.5
    samples, t = [], 0.0
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    while t < end:
        t += rng.uniform(0.008, 0.012)
        freed = t >= end - 0.5
        device = 0 if freed else sum(d for at, d in changes if at <= t)
        made = 0.0
        if not freed:  # the free gives the whole mirror back
            for at, d in changes:
                if t >= at and ratio:
                    made += ratio * d * min(1.0, (t - at) * host_rate / (ratio * d))
        other = drift * MIB * t
        values = {"host.available": 64 * GIB - round(made + other), "sysman.0.used": device}
        samples.append(WatchSample(t, values, pids=1))
    return Series(base, tuple(samples), {})


@pytest.mark.parametrize("drift", [-300.0, -600.0])
@pytest.mark.parametrize("host_rate", [0.3e9, 0.6e9])
@pytest.mark.parametrize("ratio", [0.5, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_neighbour_giving_memory_back_at_the_host_sides_pace_hides_no_mirror(
    seed: int, ratio: float, host_rate: float, drift: float
) -> None:
    # As read, the host stays still while each step's host side is made (the
    # neighbour gives back what the job takes) and falls between: every window
    # read about 0, a clean, before the rate the host fell at before the job
    # widened the windows over the host side.
    summary = summarize(job(seed, ratio, host_rate=host_rate, drift=drift))
    assert summary.verdict == TRUTH[ratio], summary.analysis.reason


@pytest.mark.parametrize(("ratio", "drift"), [(0.5, -300.0), (1.0, -300.0), (1.0, -600.0), (1.0, 0.0)])
@pytest.mark.parametrize("seed", range(3))
def test_a_host_side_slower_than_the_steps_is_never_read_low(seed: int, ratio: float, drift: float) -> None:
    # 512 MiB steps a second apart, their host side made at 0.3 GB/s: each lasts
    # longer than the pause after it. The windows took its rate in the pauses
    # out as another process's: a mirror read partial, a partial one clean.
    summary = summarize(job(seed, ratio, step=512 * MIB, host_rate=0.3e9, drift=drift))
    assert summary.verdict in (TRUTH[ratio], "inconclusive"), summary.analysis.reason
    if summary.verdict == "inconclusive":
        reason = summary.analysis.reason
        assert "job's own host side" in reason or "climb" in reason, reason
        advice = summary.analysis.next_steps
        assert advice is not None and advice.text


@pytest.mark.parametrize("ratio", sorted(TRUTH))
@pytest.mark.parametrize("seed", range(3))
def test_a_quiet_job_is_read_as_before(seed: int, ratio: float) -> None:
    summary = summarize(job(seed, ratio))
    assert summary.verdict == TRUTH[ratio], summary.analysis.reason
    assert "before the job" not in summary.analysis.reason


@pytest.mark.parametrize("ratio", [0.5, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_neighbour_growing_steadily_before_and_through_the_job_is_taken_out(seed: int, ratio: float) -> None:
    # Its rate showed before the job: taking it out of the windows is no guess.
    summary = summarize(job(seed, ratio, drift=200.0))
    assert summary.verdict == TRUTH[ratio], summary.analysis.reason


def test_the_rate_before_the_job_is_read_where_it_was_steady() -> None:
    series = job(0, 1.0, drift=-300.0)
    rate = before_the_job(series, known_reads(series, device_series(series)))
    assert rate is not None and abs(rate + 300.0) < 1.0
    quiet = job(0, 1.0)
    assert before_the_job(quiet, known_reads(quiet, device_series(quiet))) == pytest.approx(0.0, abs=0.5)


def test_no_rate_before_the_job_from_a_host_that_jumped_or_too_few_reads() -> None:
    series = job(0, 1.0)
    jumped = tuple(
        WatchSample(s.t, {**s.values, "host.available": s.values["host.available"] - (200 * MIB if s.t > 0.5 else 0)}, pids=1)
        for s in series.samples
    )
    series = Series(series.baseline, jumped, {})
    assert before_the_job(series, known_reads(series, device_series(series))) is None
    short = Series(series.baseline, tuple(s for s in series.samples if s.t > 0.8), {})
    assert before_the_job(short, known_reads(short, device_series(short))) is None


def test_steady_rate() -> None:
    line = [(t / 10, 5.0 * t / 10) for t in range(11)]
    assert steady_rate(line) == pytest.approx(5.0)
    # One read off the line by more than the jitter and an eighth of the change: no rate.
    bent = [*line[:5], (0.5, 2.5 + 4.0), *line[6:]]
    assert steady_rate(bent) is None
    # A quiet machine's jitter of a MiB is no bend.
    assert steady_rate([*line[:5], (0.5, 2.5 + 1.0), *line[6:]]) == pytest.approx(5.0)
    assert steady_rate(line[:1]) is None
    assert steady_rate([(1.0, 0.0), (1.0, 5.0)]) is None
