"""Host sides paid after their windows, beside a neighbour giving memory back: never a clean."""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import DEFAULT_CONFIG
from l0mem.estimate.climbs import level_steps
from l0mem.estimate.steps import drift, reads, windows
from l0mem.watch.estimation import device_series, judged_samples, watch_config
from l0mem.watch.pauses import pause_costs
from l0mem.watch.series import Series, WatchSample, trace_values
from l0mem.watch.summary import summarize

MIB = 1 << 20
GIB = 1 << 30


def truth(ratio: float) -> str:
    """Return the verdict a ratio calls for (the analysis' default thresholds)."""
    return "clean" if ratio < 0.10 else ("mirror" if ratio >= 0.75 else "partial")


def late_job(
    seed: int,
    ratio: float,
    *,
    steps: int = 8,
    step: int = 128 * MIB,
    gap: float = 1.0,
    start: float = 1.0,
    host_rate: float = 1.3e9,
    late: float = 1.0,
    delay: float = 0.3,
    giving: float = 0.0,
    since: float = 0.0,
    bumps: int = 0,
    jitter: float = 0.0,
) -> Series:
    """Return a watched job whose host side is paid (in part) after each step's window.

    ``steps`` allocations of ``step`` bytes ``gap`` seconds apart from
    ``start``, freed at the end. Each step's host side (``ratio`` of it) is
    made at ``host_rate`` bytes a second: ``late`` of it starting ``delay``
    seconds after device memory moved, the rest at once. Another process
    gives back ``giving`` MiB a second from ``since`` seconds on and takes
    ``bumps`` lumps of 3-15 MiB at random moments; reads every 8-12 ms,
    each off by up to ``jitter`` MiB.
    """
    rng = random.Random(seed)
    changes = []
    at = start
    for _ in range(steps):
        changes.append(at + rng.uniform(0.0, 0.1 * gap))
        at += gap
    lumps = [(rng.uniform(start, at), rng.uniform(3.0, 15.0) * MIB) for _ in range(bumps)]
    end = changes[-1] + 1.5

    def made(t: float, since_: float, amount: float) -> float:
        if amount <= 0 or t < since_:
            return 0.0
        return min(amount, (t - since_) * host_rate)

    samples, t = [], 0.0
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    while t < end:
        t += rng.uniform(0.008, 0.012)
        freed = t >= end - 0.5
        device = 0 if freed else step * sum(1 for c in changes if c <= t)
        host = 0.0
        if not freed:
            for c in changes:
                host += made(t, c, ratio * step * (1 - late)) + made(
                    t, c + delay, ratio * step * late
                )
        other = -giving * MIB * max(0.0, t - since) + sum(b for when, b in lumps if t >= when)
        off = rng.uniform(-jitter, jitter) * MIB
        values = {"host.available": 64 * GIB - round(host + other + off), "sysman.0.used": device}
        samples.append(WatchSample(round(t, 6), values, pids=1))
    return Series(base, tuple(samples), {})


@pytest.mark.parametrize("since", [0.0, 1.0])
@pytest.mark.parametrize("giving", [20.0, 80.0])
@pytest.mark.parametrize("late", [0.5, 1.0])
@pytest.mark.parametrize("ratio", [0.3, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(2))
def test_a_cost_paid_after_its_window_beside_a_neighbour_giving_back_is_never_clean(
    seed: int, ratio: float, late: float, giving: float, since: float
) -> None:
    # Every window sees the neighbour only; the pauses' steady drift holds the
    # neighbour's rate less the job's late cost, so a climb with it taken out is
    # flat too. The pause windows, short, mostly miss the late cost: a climb with
    # their rate taken out shows it.
    job = late_job(
        seed, ratio, step=32 * MIB, gap=0.5, late=late, delay=0.24, giving=giving, since=since
    )
    summary = summarize(job)
    assert summary.verdict != "clean", summary.analysis.reason
    assert summary.verdict in (truth(ratio), "inconclusive"), summary.analysis.reason


def adversarial_job(
    seed: int,
    *,
    ratios: tuple[float, ...] = (0.0, 0.05, 0.3, 0.5, 0.8, 1.0),
    lates: tuple[float, ...] = (0.0, 0.3, 0.5, 1.0),
    givings: tuple[float, ...] = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0),
) -> tuple[Series, float]:
    """Return a random job of late host sides beside a neighbour giving back, and its ratio.

    The ratio, the share paid late and the neighbour's pace are drawn from
    ``ratios``, ``lates`` and ``givings``.
    """
    rng = random.Random(seed)
    ratio = rng.choice(ratios)
    gap = rng.choice([0.3, 0.5, 1.0])
    job = late_job(
        seed,
        ratio,
        steps=rng.randint(6, 14),
        step=rng.choice([32, 64, 128, 256, 512]) * MIB,
        gap=gap,
        start=rng.choice([0.3, 1.0]),
        host_rate=rng.choice([0.3e9, 1.3e9, 5e9]),
        late=rng.choice(lates),
        delay=rng.uniform(0.1, 0.6) * gap,
        giving=rng.choice(givings),
        since=rng.choice([0.0, 1.0]),
        bumps=rng.randint(0, 3),
        jitter=rng.choice([0.0, 0.5, 1.5]),
    )
    return job, ratio


@pytest.mark.parametrize("block", range(4))
def test_random_late_costs_beside_a_neighbour_giving_back_are_never_a_wrong_clean(
    block: int,
) -> None:
    # A class: whatever the steps, the lag, the share paid late, the neighbour's
    # pace and lumps and the reads' jitter, a mirror or a partial one (from 0.3)
    # is never called clean, and a clean job never mirror nor partial.
    wrong = []
    for seed in range(block * 100, block * 100 + 100):
        job, ratio = adversarial_job(seed)
        verdict = summarize(job).verdict
        if verdict not in (truth(ratio), "inconclusive"):
            wrong.append((seed, ratio, verdict))
    assert not [w for w in wrong if w[2] == "clean"], wrong
    assert not [w for w in wrong if truth(w[1]) == "clean"], wrong


def _judged(job: Series) -> tuple[list, list]:
    """Return the samples the estimation judges and the device series of ``job``."""
    config = watch_config(DEFAULT_CONFIG)
    xs = device_series(job)
    return judged_samples(job, xs, config), xs


@pytest.mark.parametrize("lag", [0.1, 0.3, 0.6])
@pytest.mark.parametrize("ratio", [0.25, 0.5, 1.0])
def test_the_steps_from_level_to_level_hold_a_cost_paid_late_whole(
    ratio: float, lag: float
) -> None:
    job = late_job(3, ratio, step=64 * MIB, late=1.0, delay=lag)
    samples, _ = _judged(job)
    levels = level_steps(samples, "host.available", watch_config(DEFAULT_CONFIG), 0.0)
    assert levels is not None and levels.interval is not None
    assert levels.slope == pytest.approx(ratio * 1024, rel=0.02)
    assert levels.interval[0] <= ratio * 1024 <= levels.interval[1]


def test_the_steps_from_level_to_level_outvote_a_neighbours_lump() -> None:
    # Two lumps of another process's, in two of ten pauses: the median step is the job's.
    job = late_job(4, 0.5, steps=10, step=64 * MIB, late=1.0, delay=0.4, bumps=2)
    samples, _ = _judged(job)
    levels = level_steps(samples, "host.available", watch_config(DEFAULT_CONFIG), 0.0)
    assert levels is not None and levels.slope == pytest.approx(512, rel=0.02)


@pytest.mark.parametrize("giving", [40.0, 80.0])
def test_the_pause_windows_show_the_rate_a_late_cost_hides_from_the_drift(giving: float) -> None:
    # A whole pause takes in the late cost (3.84 MiB, small beside what the neighbour
    # gave back over it: the pause still reads steady): its rate is the neighbour's less
    # that cost. The pause windows, short, mostly miss it: their median is the neighbour's.
    job = late_job(5, 0.12, steps=10, step=32 * MIB, late=1.0, delay=0.4, giving=giving)
    samples, xs = _judged(job)
    config = watch_config(DEFAULT_CONFIG)
    pauses = pause_costs(job, xs, "host.available", config)
    assert pauses is not None and pauses.rate is not None
    assert pauses.rate.median == pytest.approx(-giving, abs=1.0)  # a cost: given back is < 0
    whole = drift(windows(samples, "host.available"), reads(samples, "host.available"))
    assert whole == pytest.approx(0.12 * 32 - giving, abs=1.0)  # 3.84 MiB paid late a second


def residency_job(seed: int, ratio: float, late: float) -> Series:
    """Return a traced job that allocates 8 x 128 MiB first, then makes each resident on a peer.

    The host side (``ratio`` of each residency) is paid at the call, ``late``
    of it 0.1 s after; the allocations cost the host nothing.
    """
    rng = random.Random(seed)
    allocs = [0.5 + k * 0.5 + rng.uniform(0, 0.025) for k in range(8)]
    calls = [allocs[-1] + 0.5 + k * 0.5 + rng.uniform(0, 0.025) for k in range(8)]
    end = calls[-1] + 1.0
    samples, t = [], 0.0
    while t < end:
        t += rng.uniform(0.008, 0.012)
        step = 128 * MIB
        host = sum(ratio * step * ((1 - late) * (t >= c) + late * (t >= c + 0.1)) for c in calls)
        device = [
            {
                "index": 0,
                "allocated": step * sum(c <= t for c in allocs),
                "resident_on": {"1": step * sum(c <= t for c in calls)},
            }
        ]
        values = {"host.available": 64 * GIB - round(host), **trace_values({"devices": device})}
        samples.append(WatchSample(round(t, 6), values, pids=1))
    return Series(WatchSample(0.0, {"host.available": 64 * GIB}), tuple(samples), {}, tracing=True)


@pytest.mark.parametrize("late", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_mirror_paid_at_residency_calls_is_never_clean(seed: int, late: float) -> None:
    # The allocations' windows see nothing: they say clean. Where the residency
    # calls' own verdict could not be read (paid late), that clean is not given.
    summary = summarize(residency_job(seed, 1.0, late))
    assert summary.verdict in ("mirror", "inconclusive"), summary.analysis.reason
    if late == 0.0:
        assert summary.verdict == "mirror", summary.analysis.reason


@pytest.mark.parametrize("ratio", [0.0, 0.5])
def test_a_climb_back_to_no_device_memory_and_up_again_is_read(ratio: float) -> None:
    # 3 x 128 MiB, all freed, then 4 x 96 MiB: the climb to the peak passes level 0.
    rng = random.Random(1)
    plan, at = [], 0.5
    for size in (128, 128, 128, -384, 96, 96, 96, 96):
        plan.append((at, size * MIB))
        at += 0.5
    plan.append((at + 0.5, -384 * MIB))
    samples, t = [], 0.0
    while t < at + 1.2:
        t += rng.uniform(0.008, 0.012)
        held = sum(d for when, d in plan if when <= t)
        values = {"host.available": 64 * GIB - round(ratio * held), "sysman.0.used": held}
        samples.append(WatchSample(round(t, 6), values, pids=1))
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    summary = summarize(Series(base, tuple(samples), {}))
    assert summary.verdict == truth(ratio), summary.analysis.reason


@pytest.mark.parametrize("ratio", [0.3, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_a_slow_host_side_beside_a_jumping_neighbour_is_never_clean(
    seed: int, ratio: float
) -> None:
    # 512 MiB steps a second apart, their host side made at 0.3 GB/s (longer than the
    # gap for a mirror), beside a neighbour jumping by up to 300 MiB either way: one
    # step from level to level read far below clean held every clean before.
    rng = random.Random(seed)
    jumps, t = [], 0.0
    while t < 10.0:
        t += rng.expovariate(0.3)
        jumps.append((t, rng.choice([-1, 1]) * rng.uniform(60.0, 300.0) * MIB))
    base = late_job(seed, ratio, steps=6, step=512 * MIB, host_rate=0.3e9, late=0.0, jitter=1.5)
    samples = tuple(
        WatchSample(
            s.t,
            {
                **s.values,
                "host.available": s.values["host.available"]
                - round(sum(b for w, b in jumps if s.t >= w)),
            },
            s.pids,
        )
        for s in base.samples
    )
    summary = summarize(Series(base.baseline, samples, {}))
    assert summary.verdict != "clean", summary.analysis.reason


def test_the_late_classes_benchmark_prints_every_class(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import late_classes

    assert late_classes.main(["--jobs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == list(late_classes.CLASSES)
    assert all(int(line.split()[1]) == 2 for line in lines[1:])
