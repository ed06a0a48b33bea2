"""A line's slope beside a steady trend in time, slopes no run can have, and device memory too small to judge."""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import DEFAULT_CONFIG, analyze_samples
from l0mem.estimate.fits import detrended
from l0mem.estimate.model import Phase, Sample

MIB = 1 << 20
GIB = 1 << 30
TRUTH = {0.0: "clean", 0.5: "partial", 1.0: "mirror"}


def staircase(
    seed: int,
    ratio: float,
    *,
    steps: int = 4,
    step: int = 128 * MIB,
    gap: float = 0.3,
    drift: float = 0.0,
    jitter: float = 0.5,
) -> list[Sample]:
    """Return a run read every 20 ms: idle for half a second, then ``steps`` allocations ``gap`` s apart.

    The host pays ``ratio`` of each step at once; another process takes
    ``drift`` MiB a second all along (negative: gives back); each read
    jitters by up to ``jitter`` MiB. No step windows: the estimation fits a line.
    """
    rng = random.Random(seed)
    out: list[Sample] = []
    t, device = 0.0, 0
    end = 0.5 + steps * gap
    while t < end:
        k = int((t - 0.5) // gap) + 1 if t >= 0.5 else 0
        device = min(k, steps) * step
        cost = ratio * device + drift * MIB * t + rng.uniform(-jitter, jitter) * MIB
        phase: Phase = "alloc" if device else "idle"
        out.append(Sample(round(t, 4), phase, device, {"host.available": 64 * GIB - round(cost)}))
        t += 0.02
    return out


@pytest.mark.parametrize("drift", [100.0, 200.0, 400.0])
@pytest.mark.parametrize("ratio", [0.0, 0.5])
@pytest.mark.parametrize("seed", range(3))
def test_a_line_beside_a_neighbour_growing_steadily_is_no_mirror(seed: int, ratio: float, drift: float) -> None:
    # The neighbour's growth rises with device memory as the run climbs: the line
    # alone read it as the run's (a mirror for a partial or clean run).
    res = analyze_samples(staircase(seed, ratio, drift=drift), DEFAULT_CONFIG)
    assert res.verdict in (TRUTH[ratio], "inconclusive"), res.reason


@pytest.mark.parametrize("drift", [-100.0, -200.0, -400.0])
@pytest.mark.parametrize("ratio", [0.5, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_line_beside_a_neighbour_giving_memory_back_is_never_clean(seed: int, ratio: float, drift: float) -> None:
    res = analyze_samples(staircase(seed, ratio, drift=drift), DEFAULT_CONFIG)
    assert res.verdict in (TRUTH[ratio], "inconclusive"), res.reason


@pytest.mark.parametrize("ratio", sorted(TRUTH))
@pytest.mark.parametrize("seed", range(3))
def test_a_quiet_staircase_is_read_by_its_line(seed: int, ratio: float) -> None:
    res = analyze_samples(staircase(seed, ratio), DEFAULT_CONFIG)
    assert res.verdict == TRUTH[ratio], res.reason
    fit = res.fit("host.available")
    assert fit is not None and fit.method == "line"
    assert fit.low is None and fit.high is None  # no trend: the line's own interval


def test_detrended_finds_the_slope_a_steady_trend_hid() -> None:
    samples = [s for s in staircase(0, 0.5, drift=300.0, jitter=0.0) if s.phase == "alloc"]
    xs = [s.device_bytes / GIB for s in samples]
    ys = [(64 * GIB - s.values["host.available"]) / MIB for s in samples]
    ts = [s.t for s in samples]
    found = detrended(xs, ys, ts)
    assert found is not None
    slope, residual, span = found
    assert slope == pytest.approx(512.0, abs=5.0)
    assert residual is not None and residual < 1.0
    assert 0.1 < span < 0.5  # about a step of the staircase is left once its trend is out
    # A smooth climb (device memory a line in time) leaves nothing to fit.
    assert detrended(ts, ys, ts) is None


def test_a_slope_far_below_zero_decides_no_clean() -> None:
    # Every window shows the host gaining 40 MiB as 128 MiB of device memory are
    # taken: another process gave memory back meanwhile, which can hide a cost.
    out: list[Sample] = []
    t, device, cost = 0.0, 0, 0
    out.append(Sample(t, "idle", 0, {"host.available": 64 * GIB}))
    for k in range(1, 9):
        t += 0.3
        out.append(Sample(t, "alloc" if device else "idle", device, {"host.available": 64 * GIB - cost}, k, "before"))
        device += 128 * MIB
        cost -= 40 * MIB
        t += 0.02
        out.append(Sample(t, "alloc", device, {"host.available": 64 * GIB - cost}, k, "after"))
    res = analyze_samples(out, DEFAULT_CONFIG)
    assert res.verdict == "inconclusive", res.reason
    assert "gained memory" in res.passed_over["host.available"]


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_device_memory_of_a_few_bytes_decides_nothing(ratio: float) -> None:
    # A host counted in pages: one page over two bytes is a ratio of thousands.
    res = analyze_samples(staircase(0, ratio, step=1, jitter=0.0), DEFAULT_CONFIG)
    assert res.verdict == "inconclusive", res.reason
    assert "bytes only" in res.passed_over["host.available"]
