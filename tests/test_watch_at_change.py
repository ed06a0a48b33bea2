"""A watched job's windows right at each change: they may call a mirror, never clean or partial.

Timelines read every 50 ms as ``run`` reads: eight steps of 128 MiB, each
step's host side made over the two reads after its change, and another
process that allocates in ramps (about 125 MiB a read, as page faults come)
and frees at once, at seeded random moments.
"""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import analyze_samples, classify
from l0mem.watch.estimation import as_setup_run, device_series, watch_config
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize

MIB = 1 << 20
AVAILABLE = 64 << 30
PDEV = "0000:10:00.0"
LOOK = 0.05
STEP = 128 * MIB
RAMP = 125 * MIB  # a neighbour's allocation, per read


def _series(
    ratio: float,
    *,
    neighbour: list[tuple[int, int]] | None = None,
    host_side_reads: int = 2,
    steps: int = 8,
) -> Series:
    """Return the reads of a job stepping every second; ``neighbour`` is (read it starts at, MiB)."""
    starts = {at: size for at, size in neighbour or []}
    reads = 20 * (steps + 3)
    held, made, other, ramp = 0, 0.0, 0, 0
    samples = []
    for i in range(reads):
        k = i // 20
        if 1 <= k <= steps and i % 20 == 0:
            held += STEP
        # The host side follows device memory over ``host_side_reads`` reads.
        made = min(ratio * held, made + ratio * STEP / host_side_reads)
        if i in starts:
            size = starts[i] * MIB
            if size < 0:
                other = max(0, other + size)  # a free: at once
            else:
                ramp += size
        take = min(ramp, RAMP)
        other, ramp = other + take, ramp - take
        values = {
            "host.available": AVAILABLE - int(made) - other,
            f"drm.{PDEV}.vram0.total": held,
        }
        samples.append(WatchSample(round(LOOK * (i + 1), 4), values, pids=1))
    return Series(WatchSample(0.0, {"host.available": AVAILABLE}), tuple(samples), {})


def _swallowing() -> list[tuple[int, int]]:
    """Return a neighbour the widened windows of four steps take in, two each way.

    It begins to allocate right as the host side of steps 2 and 4 ends (the
    widened window runs on over it) and frees memory in the read in which
    steps 6 and 8 change device memory.
    """
    return [(42, 384), (82, 512), (121, -256), (161, -384)]


@pytest.mark.parametrize("ratio", [1.0, 2.0])
def test_a_neighbour_in_half_the_widened_windows_leaves_the_mirror_to_the_narrow_ones(
    ratio: float,
) -> None:
    series = _series(ratio, neighbour=_swallowing())
    assert _verdicts(series) == ("inconclusive", "mirror")
    summary = summarize(series)
    assert summary.verdict == "mirror", summary.analysis.reason
    assert summary.analysis.slope == pytest.approx(1024 * ratio, abs=2)
    assert "right around each change" in summary.analysis.reason


def _verdicts(series: Series) -> tuple[str, str]:
    """Return the verdicts of the widened windows and of the reads right around each change."""
    config = watch_config()
    return tuple(  # type: ignore[return-value]
        analyze_samples(
            as_setup_run(series, device_series(series), config, widen=widen).samples, config
        ).verdict
        for widen in (True, False)
    )


@pytest.mark.parametrize("ratio", [0.25, 0.5])
def test_the_narrow_windows_never_call_partial_the_widened_ones_left_open(ratio: float) -> None:
    series = _series(ratio, neighbour=_swallowing())
    assert _verdicts(series) == ("inconclusive", "partial")
    summary = summarize(series)
    assert summary.verdict == "inconclusive", summary.analysis.reason
    assert "right around each change" not in summary.analysis.reason


def test_a_slow_host_side_the_narrow_windows_cut_short_is_left_to_the_widened_ones() -> None:
    # A mirror made over six reads: the reads around a change hold a third of it.
    summary = summarize(_series(1.0, host_side_reads=6))
    assert summary.verdict == "mirror", summary.analysis.reason
    assert summary.analysis.slope == pytest.approx(1024, abs=2)
    assert "right around each change" not in summary.analysis.reason


@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("seed", range(30))
def test_a_neighbour_at_random_moments_never_turns_a_verdict_over(seed: int, ratio: float) -> None:
    rng = random.Random(seed * 7 + int(ratio * 100))
    moments, i, level = [], rng.randint(0, 20), 0
    while i < 20 * 11:
        size = rng.choice([64, 128, 256, 384, 512, 768])
        if level >= size and rng.random() < 0.5:
            moments.append((i, -size))
            level -= size
        else:
            moments.append((i, size))
            level += size
        i += rng.randint(2, 30)
    series = _series(ratio, neighbour=moments, host_side_reads=rng.choice([1, 2, 3]))
    widened, _ = _verdicts(series)
    summary = summarize(series)
    if widened != "inconclusive" and summary.verdict == "inconclusive":
        # Only the late costs' check may: a neighbour that took memory in the pauses
        # after most steps raised most steps from level to level, as a late cost would.
        assert "the level the host reached at each step" in summary.analysis.reason
    elif widened != "inconclusive":
        assert summary.verdict == widened
    elif summary.verdict != "inconclusive":
        assert summary.verdict == "mirror"
    if summary.verdict != "inconclusive":
        assert summary.verdict == classify(ratio), summary.analysis.reason


def test_where_every_widened_window_took_in_a_neighbour_the_interval_holds_the_narrow_slope_too() -> None:
    # A neighbour begins to allocate right as each step's host side ends, a different
    # amount each time: every widened window reads high, and their interval misses 1:1.
    sizes = [256, 384, 512, 320, 448, 288, 416, 352]
    series = _series(1.0, neighbour=[(20 * k + 2, size) for k, size in enumerate(sizes, 1)])
    config = watch_config()
    widened = analyze_samples(as_setup_run(series, device_series(series), config).samples, config)
    wide = widened.fit("host.available")
    assert widened.verdict == "mirror" and wide is not None and wide.low is not None
    assert wide.low > 1100  # the widened windows alone miss the truth
    summary = summarize(series)
    fit = summary.analysis.fit("host.available")
    assert summary.verdict == "mirror" and fit is not None and fit.low is not None
    assert fit.low <= 1024 <= (fit.high or 0) and fit.high == wide.high
    assert fit.slope == wide.slope
    assert "the reads right around each change give 1024" in summary.analysis.reason


@pytest.mark.parametrize("first_record", [20, 21])
def test_a_traced_job_has_a_window_for_its_first_allocation(first_record: int) -> None:
    # The tracer reports from its first record on: the reads before it are 0, not unknown,
    # or the first allocation has no read before it and no window.
    drm = _series(1.0)
    samples = []
    for i, s in enumerate(drm.samples):
        values = {"host.available": s.values["host.available"]}
        if i >= first_record:
            values["trace.0.allocated"] = s.values[f"drm.{PDEV}.vram0.total"]
            values["trace.0.resident_on_peers"] = 0
        samples.append(WatchSample(s.t, values, pids=1))
    series = Series(drm.baseline, tuple(samples), {}, tracing=True)
    xs = device_series(series)
    assert xs[:first_record] == [0] * first_record
    run = as_setup_run(series, xs, watch_config())
    assert sorted({s.step for s in run.samples if s.step is not None}) == list(range(1, 9))
    summary = summarize(series)
    assert summary.analysis.verdict == "mirror"
