"""The pauses' check on a watched job: seeded jobs read every 10 ms beside a host that keeps moving one way."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from l0mem.watch import summary as summary_module
from l0mem.watch.estimation import device_series, watch_config
from l0mem.watch.pauses import MIN_PAUSES, pause_costs
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from l0mem.watch.windows import SETTLE_HORIZON, pause_windows, step_windows, window_spans
from tests.support.churn import churned

MIB = 1 << 20
GIB = 1 << 30
STEP = 128 * MIB
TRUTH = {0.0: "clean", 0.5: "partial", 1.0: "mirror"}


def job(seed: int, ratio: float, *, churn: bool, steps: int = 8, drift: float = 0.0) -> Series:
    """Return a watched job of ``steps`` 128 MiB allocations a second apart, all freed at the end.

    Its host side (``ratio`` of each step) is made at 1.3 GB/s from the
    moment device memory moves. With ``churn``, another process keeps
    taking memory the whole time: 200-600 MiB/s in bursts of a few reads,
    with a jump of up to 60 MiB either way on a third of the reads and a
    large give-back now and then, so that windows widened over its rises
    read high together. ``drift``: another process taking that many bytes a
    second, steadily. Reads every 8-12 ms.
    """
    rng = random.Random(seed)
    changes = [(1.0 + k + rng.uniform(0.0, 0.1), STEP) for k in range(steps)]
    end = changes[-1][0] + 1.5
    changes.append((end - 0.5, -steps * STEP))
    rate = rng.uniform(200.0, 600.0) * MIB
    samples, other, t = [], 0.0, 0.0
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    while t < end:
        dt = rng.uniform(0.008, 0.012)
        t += dt
        other += drift * dt
        if churn:
            other = churned(rng, other, rate, dt, give_back=True)
        device = sum(d for at, d in changes if at <= t)
        made = 0.0
        for at, d in changes:
            if d > 0 and t >= at:
                made += ratio * d * min(1.0, (t - at) / (ratio * d / 1.3e9 + 1e-9))
        if t >= changes[-1][0]:
            made = 0.0  # the free gives the whole mirror back
        values = {"host.available": 64 * GIB - round(made + other), "sysman.0.used": device}
        samples.append(WatchSample(t, values, pids=1))
    return Series(base, tuple(samples), {})


@pytest.mark.parametrize("ratio", sorted(TRUTH))
@pytest.mark.parametrize("seed", range(40))
def test_a_host_that_keeps_taking_memory_never_makes_a_wrong_verdict(seed: int, ratio: float) -> None:
    summary = summarize(job(seed, ratio, churn=True))
    assert summary.verdict in (TRUTH[ratio], "inconclusive"), (seed, summary.analysis.reason)
    if summary.verdict == "inconclusive":
        advice = summary.analysis.next_steps
        assert advice is not None and advice.text


def test_without_the_pauses_check_that_host_makes_wrong_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The class above exists: the windows alone call some of these jobs wrongly
    # (four of the 120 when written), every window read high the same way.
    monkeypatch.setattr(
        summary_module, "against_the_pauses", lambda series, analysis, pauses, config: analysis
    )
    wrong = sum(
        summarize(job(seed, ratio, churn=True)).verdict not in (TRUTH[ratio], "inconclusive")
        for seed in range(40)
        for ratio in TRUTH
    )
    assert wrong >= 2


@pytest.mark.parametrize("rate", [300, 600])
@pytest.mark.parametrize("ratio", sorted(TRUTH))
@pytest.mark.parametrize("seed", range(5))
def test_a_steady_climb_of_another_process_never_makes_a_wrong_verdict(
    seed: int, ratio: float, rate: int
) -> None:
    # Faster than the windows' test of stillness: every window widens over it until
    # they run into each other, and each reads the climb of a whole pause (a mirror
    # of a clean job, without this check). No pause is left to measure it by.
    summary = summarize(job(seed, ratio, churn=False, drift=rate * MIB))
    assert summary.verdict in (TRUTH[ratio], "inconclusive"), summary.analysis.reason
    if summary.verdict == "inconclusive":
        assert "ran into each other" in summary.analysis.reason


@pytest.mark.parametrize("ratio", sorted(TRUTH))
@pytest.mark.parametrize("seed", range(10))
def test_on_a_quiet_host_the_pauses_change_nothing(seed: int, ratio: float) -> None:
    series = job(seed, ratio, churn=False)
    summary = summarize(series)
    assert summary.verdict == TRUTH[ratio], summary.analysis.reason
    assert "pauses" not in summary.analysis.reason
    found = pause_costs(series, device_series(series), "host.available", watch_config())
    assert found is not None and found.cost is not None and found.count >= MIN_PAUSES
    assert found.cost.low <= 0.0 <= found.cost.high


@pytest.mark.parametrize("seed", range(40))
def test_pause_windows_lie_between_the_step_windows_and_apart(seed: int) -> None:
    series = job(seed, rng_ratio(seed), churn=True)
    xs = [x or 0 for x in device_series(series)]
    ts = [s.t for s in series.samples]
    cost = [64 * GIB - s.values["host.available"] for s in series.samples]
    spans = window_spans(step_windows(xs, ts, cost))
    reach = statistics.median(ts[a] - ts[b] for b, a in spans)
    found = pause_windows(ts, cost, spans, STEP, reach)
    assert found
    taken = sorted([*spans, *found])
    for (_, closed), (opens, _) in itertools.pairwise(taken):
        assert closed < opens  # no two windows share a read
    for before, after in found:
        assert before < after
        assert xs[before] == xs[after]  # device memory held still
        assert ts[after] - ts[before] <= 2 * SETTLE_HORIZON
        assert spans[0][1] < before and after < spans[-1][0]


def rng_ratio(seed: int) -> float:
    """Return one of the ratios, by seed."""
    return sorted(TRUTH)[seed % len(TRUTH)]

