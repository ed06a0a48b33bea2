"""Small steps beside a neighbour's brief lumps: a window off by less than 16 MiB may still be disturbed.

At 32-128 MiB steps, 16 MiB is 125-500 MiB/GiB, more than clean allows. A
watched job has few windows (eight give the median no narrower interval
than their whole range), so one window a neighbour moved by a few MiB spanned
two verdicts alone while it lay under the fixed rejection floor. The floor is
now half of what clean allows the step (4 MiB at least), and the class is
held both ways: the windows of clean jobs say clean, and jobs that pay 12%
or more are never called clean. The same jobs' pauses (the lumps' undoing,
the reads' jitter over 20-40 ms windows) left the pause windows' rate
uncertain by a few MiB/s, a late cost as large as a small step's clean
allowance, and a clean is held to that: the rate is now also read over
eighths of the pauses (:func:`l0mem.watch.pauses.paced_rates`), and a clean
is held where both measures allow.
"""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import steps as steps_module
from l0mem.watch import pauses as pauses_module
from l0mem.watch.estimation import device_series, watch_config
from l0mem.watch.pauses import pause_costs
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.test_watch_late import late_job

MIB = 1 << 20
GIB = 1 << 30


def brief_lumps_job(seed: int, ratio: float, step_mib: int | None = None) -> tuple[Series, int]:
    """Return a watched job whose windows a neighbour hits with brief lumps, and its step (bytes).

    Eight allocations of ``step_mib`` (else 32, 64 or 128) MiB a second apart, read every 8-12
    ms, the host side (``ratio`` of each step) made at once. In one or two
    of the step windows another process takes more than clean allows the
    step, under the fixed 16 MiB (4.5 MiB at least), right as device memory
    moves, or gives it back, and undoes it 150-400 ms later; reads jitter by
    half a MiB.
    """
    rng = random.Random(seed)
    step = rng.choice([32, 64, 128]) * MIB
    step = step if step_mib is None else step_mib * MIB
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
    return Series(base, tuple(samples), {}), step


def _windows_say_clean(job: Series) -> bool:
    """Return whether the step windows' interval of ``host.available`` lies in clean."""
    fits = [f for f in summarize(job).analysis.host if f.signal == "host.available"]
    return bool(fits) and fits[0].interval is not None and fits[0].interval[1] < 0.1 * 1024


@pytest.mark.parametrize("block", range(3))
def test_the_windows_of_clean_jobs_at_small_steps_say_clean_beside_brief_lumps(block: int) -> None:
    jobs = [brief_lumps_job(seed, 0.0)[0] for seed in range(block * 20, block * 20 + 20)]
    assert sum(_windows_say_clean(job) for job in jobs) >= 19
    verdicts = [summarize(job).verdict for job in jobs]
    assert set(verdicts) <= {"clean", "inconclusive"}, verdicts


def test_clean_jobs_at_128_mib_steps_read_clean_beside_brief_lumps() -> None:
    verdicts = [summarize(brief_lumps_job(seed, 0.0, 128)[0]).verdict for seed in range(20)]
    assert verdicts.count("clean") >= 18, verdicts
    assert set(verdicts) <= {"clean", "inconclusive"}, verdicts


@pytest.mark.parametrize("ratio", [0.12, 0.15, 0.2, 0.3, 1.0])
def test_jobs_that_pay_are_never_clean_beside_brief_lumps(ratio: float) -> None:
    truth = "mirror" if ratio >= 0.75 else "partial"
    verdicts = [summarize(brief_lumps_job(seed, ratio)[0]).verdict for seed in range(40)]
    assert set(verdicts) <= {truth, "inconclusive"}, verdicts
    assert verdicts.count(truth) >= 30, verdicts


def test_with_the_fixed_floor_those_windows_span_two_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The class above exists: with 16 MiB the only floor, the one window a few MiB
    # off spans two verdicts.
    monkeypatch.setattr(steps_module, "JITTER_FLOOR_MIB", steps_module.REJECT_FLOOR_MIB)
    # (27 of 60 and 12 of 20 when written, against 60 and 20 with the floor.)
    jobs = [brief_lumps_job(seed, 0.0)[0] for seed in range(60)]
    assert sum(_windows_say_clean(job) for job in jobs) <= 40
    verdicts = [summarize(brief_lumps_job(seed, 0.0, 128)[0]).verdict for seed in range(20)]
    assert verdicts.count("clean") <= 15, verdicts


@pytest.mark.parametrize("seed", range(10))
def test_the_floor_is_half_what_clean_allows_the_step(seed: int) -> None:
    _, step = brief_lumps_job(seed, 0.0)
    window = steps_module.Window(step=1, t=1.0, seconds=0.04, device_bytes=step, cost_mib=0.0)
    floor = steps_module.reject_floor([window], 102.4)
    assert floor == max(4.0, min(16.0, 0.5 * 102.4 * step / GIB))
    assert steps_module.reject_floor([window], None) == 16.0


def test_clean_jobs_at_small_steps_read_clean_with_the_paced_rate() -> None:
    # The lumps' undoing in the pauses and the reads' jitter left the pause windows'
    # rate uncertain by a few MiB/s; over eighths of the pauses it is known closer.
    verdicts = [summarize(brief_lumps_job(seed, 0.0)[0]).verdict for seed in range(60)]
    assert verdicts.count("clean") >= 54, verdicts


def test_without_the_paced_rate_those_clean_jobs_read_inconclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    # (33 of 60 clean when written, against 57 with it.)
    monkeypatch.setattr(pauses_module, "paced_rates", lambda *args, **kwargs: [])
    verdicts = [summarize(brief_lumps_job(seed, 0.0)[0]).verdict for seed in range(60)]
    assert verdicts.count("clean") <= 45, verdicts


@pytest.mark.parametrize("giving", [0.0, 10.0, 40.0])
@pytest.mark.parametrize("seed", range(4))
def test_the_paced_rate_holds_the_neighbours_rate_not_the_late_cost(seed: int, giving: float) -> None:
    # A 0.5 mirror of 64 MiB steps, wholly late, beside a neighbour giving back
    # steadily, reads jittering by half a MiB: over eighths of the pauses the rate
    # is the neighbour's (the late cost's eighth left out), and known closer than
    # over the pause windows.
    job = late_job(seed, 0.5, step=64 * MIB, late=1.0, delay=0.4, giving=giving, jitter=0.5)
    found = pause_costs(job, device_series(job), "host.available", watch_config())
    assert found is not None and found.rate is not None and found.paced is not None
    assert found.paced.low <= -giving + 1.0 and -giving - 1.0 <= found.paced.high
    assert found.paced.high - found.paced.low < (found.rate.high - found.rate.low) / 2
