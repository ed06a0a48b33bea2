"""The watch summary on synthetic series: peaks, fit, verdict, VmRSS blindness, charged device."""

from __future__ import annotations

import random

import pytest

from l0mem.estimate import DEFAULT_CONFIG, classify
from l0mem.watch.series import Series, WatchSample, host_cost, trace_values
from l0mem.watch.summary import live_ratio, summarize

GIB = 1 << 30
MIB = 1 << 20
AVAILABLE = 64 * GIB
PDEV0, PDEV1 = "0000:10:00.0", "0000:11:00.0"


def _series(
    device: list[int],
    ratio: float,
    *,
    noise: int = 0,
    rss: int = 0,
    drm: bool = True,
    gtt: bool = True,
    tracing: bool = False,
    seed: int = 1,
    shmem: bool = True,
    jumps: dict[int, int] | None = None,
) -> Series:
    """Return a series where the host pays ``ratio`` per device byte, charged as GTT on device 1."""
    rng = random.Random(seed)
    base = WatchSample(0.0, {"host.available": AVAILABLE, "meminfo.Shmem": GIB})
    samples = []
    neighbour = 0  # another process's memory, changing at the samples ``jumps`` names
    for i, d in enumerate(device):
        mirror = int(ratio * d)
        neighbour += (jumps or {}).get(i, 0)
        values = {
            "host.available": AVAILABLE - mirror - rss - neighbour - rng.randint(-noise, noise),
            "meminfo.Shmem": GIB + mirror,
            "tree.VmRSS": 50 * MIB + rss,
        }
        if not shmem:
            del values["meminfo.Shmem"]
        if drm:
            values[f"drm.{PDEV0}.vram0.total"] = d
            if gtt:
                values[f"drm.{PDEV0}.gtt.total"] = 4 * MIB
                values[f"drm.{PDEV1}.gtt.total"] = mirror
        if tracing:
            values.update(
                trace_values(
                    {"devices": [{"index": 0, "allocated": d, "resident_on": {"0": d, "1": d}}]}
                )
            )
        samples.append(WatchSample(0.5 * (i + 1), values, pids=1))
    return Series(base, tuple(samples), {}, tracing=tracing)


RAMP = [0, 0, *(k * 256 * MIB for k in range(1, 9)), 2 * GIB, 0, 0]


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0, 2.0])
def test_slope_and_verdict_follow_the_host_cost_per_device_byte(ratio: float) -> None:
    summary = summarize(_series(RAMP, ratio, noise=MIB))
    assert summary.analysis.deciding_signal == "host.available"
    assert summary.analysis.slope == pytest.approx(1024 * ratio, abs=8)
    assert summary.verdict == classify(ratio, DEFAULT_CONFIG)
    assert summary.device_source == "drm"
    assert summary.host_cost.bytes is not None
    assert summary.host_cost.bytes == pytest.approx(ratio * 2 * GIB, abs=2 * MIB)
    assert summary.device_memory.bytes == 2 * GIB
    # The host came back when the device memory did.
    assert summary.analysis.released in ((None,) if ratio == 0 else (True,))


def test_a_mirror_charged_to_the_peer_is_named_and_vmrss_would_miss_it() -> None:
    summary = summarize(_series(RAMP, 1.0))
    assert summary.verdict == "mirror"
    assert summary.charged_to == PDEV1
    assert summary.vmrss_would_miss is True
    assert summary.tree_rss.bytes == 50 * MIB  # the tree did not exist before the baseline
    peaks = {d.pdev: d for d in summary.devices}
    assert peaks[PDEV0].vram.bytes == 2 * GIB
    assert peaks[PDEV1].gtt_growth == 2 * GIB
    assert peaks[PDEV1].vram.unavailable is not None and peaks[PDEV1].vram.bytes is None
    assert summary.shmem.bytes == 2 * GIB


def test_a_mirror_in_rss_is_not_missed_by_vmrss() -> None:
    # Host cost that is the tree's own memory: VmRSS sees it.
    base = WatchSample(0.0, {"host.available": AVAILABLE, "tree.VmRSS": 0})
    samples = tuple(
        WatchSample(
            i * 0.5,
            {"host.available": AVAILABLE - d, "tree.VmRSS": d, f"drm.{PDEV0}.vram0.total": d},
        )
        for i, d in enumerate(RAMP)
    )
    summary = summarize(Series(base, samples, {}))
    assert summary.verdict == "mirror"
    assert summary.vmrss_would_miss is False


def test_without_a_device_signal_the_verdict_is_inconclusive_and_says_why() -> None:
    series = _series(RAMP, 1.0, drm=False)
    series = Series(series.baseline, series.samples, {"drm": "no DRM file open"})
    summary = summarize(series)
    assert summary.verdict == "inconclusive"
    assert summary.device_source is None
    assert "no device memory signal" in summary.analysis.reason
    assert "no DRM file open" in summary.analysis.reason
    assert summary.device_memory.bytes is None
    assert summary.device_memory.unavailable
    # The host cost is still known.
    assert summary.host_cost.bytes == 2 * GIB


def test_a_missing_host_signal_is_unavailable_not_zero() -> None:
    base = WatchSample(0.0, {})
    samples = tuple(
        WatchSample(1.0 + i, {f"drm.{PDEV0}.vram0.total": d}) for i, d in enumerate(RAMP)
    )
    series = Series(
        base, samples, {"meminfo": "cannot read /proc/meminfo", "cgroup": "no cgroup v2"}
    )
    summary = summarize(series)
    assert summary.host_cost.bytes is None
    assert "cannot read /proc/meminfo" in (summary.host_cost.unavailable or "")
    assert summary.cgroup.bytes is None and "no cgroup v2" in (summary.cgroup.unavailable or "")
    assert summary.verdict == "inconclusive"
    assert host_cost(series, samples[-1]) is None


SMALL = [0, 0, *(k * 4 * MIB for k in range(1, 9))]


# Another process takes or gives back hundreds of MiB in five of the eight steps:
# the three quiet ones are too few to stand for the run alone.
JUMPS = {2: 600 * MIB, 3: -600 * MIB, 5: 500 * MIB, 6: -500 * MIB, 8: 700 * MIB}


def test_a_noisy_host_signal_is_passed_over_for_the_drm_gtt() -> None:
    summary = summarize(_series(RAMP, 1.0, jumps=JUMPS, shmem=False))
    assert "spans two verdicts" in summary.analysis.passed_over["host.available"]
    assert summary.analysis.deciding_signal == "drm.all.host.total"
    assert summary.verdict == "mirror"


def test_a_component_the_total_cannot_check_does_not_decide() -> None:
    # Every reading astray by up to 64 MiB on 4 MiB steps: host.available cannot
    # tell whether the GTT growth is what the host lost.
    summary = summarize(_series(SMALL, 1.0, noise=64 * MIB, shmem=False, seed=3))
    assert summary.verdict == "inconclusive"
    assert "does not account for the fall" in summary.analysis.passed_over["drm.all.host.total"]


def test_noise_makes_a_small_span_inconclusive_not_a_verdict() -> None:
    summary = summarize(_series(SMALL, 1.0, noise=64 * MIB, gtt=False, shmem=False, seed=3))
    assert summary.verdict == "inconclusive"
    assert "host.available" in summary.analysis.reason
    advice = summary.analysis.next_steps
    assert advice is not None and advice.signal == "host.available"
    assert "--trace" in advice.text


def test_shmem_that_accounts_for_a_noisy_fall_decides() -> None:
    summary = summarize(_series(RAMP, 1.0, jumps=JUMPS, gtt=False))
    assert summary.verdict == "mirror"
    assert summary.analysis.deciding_signal == "meminfo.Shmem"


def test_the_traced_allocations_are_the_device_series_and_residency_is_fitted() -> None:
    summary = summarize(_series(RAMP, 1.0, drm=False, tracing=True))
    assert summary.device_source == "trace"
    assert summary.verdict == "mirror"
    assert summary.per_resident_gib is not None
    assert summary.per_resident_gib.slope == pytest.approx(1024, abs=1)


def test_live_ratio_is_host_cost_over_device_memory() -> None:
    series = _series(RAMP, 0.5)
    assert live_ratio(series, series.samples[5]) == pytest.approx(0.5)
    assert live_ratio(series, series.samples[0]) is None  # no device memory yet


def test_summary_to_dict_is_json_data() -> None:
    import json

    data = summarize(_series(RAMP, 1.0)).to_dict()
    again = json.loads(json.dumps(data))
    assert again["verdict"] == "mirror"
    assert again["peaks"]["host_cost"]["bytes"] == 2 * GIB
    assert again["devices"][1]["pdev"] == PDEV1


def test_a_read_that_caught_a_step_half_made_is_stepped_over() -> None:
    # Steps of 256 MiB, three samples each; in one step the last sample catches
    # the next mirror half made while the device count has not moved yet. The
    # next window opens on the read before it, where the host was still.
    base = WatchSample(0.0, {"host.available": AVAILABLE})
    samples, t = [], 0.0
    for k in range(1, 9):
        for j in range(3):
            device = k * 256 * MIB
            mirror = device + (128 * MIB if j == 2 and k == 3 else 0)
            t += 0.1
            samples.append(
                WatchSample(
                    t, {"host.available": AVAILABLE - mirror, f"drm.{PDEV0}.vram0.total": device}
                )
            )
    series = Series(base, tuple(samples), {})
    summary = summarize(series)
    assert summary.verdict == "mirror"
    fit = summary.analysis.fit("host.available")
    assert fit is not None and fit.method == "steps" and fit.points == 7
    assert (fit.low, fit.slope, fit.high) == (1024.0, 1024.0, 1024.0)
    assert fit.rejected == ()


@pytest.mark.parametrize("flagged", [True, False])
def test_a_reading_during_a_traced_call_is_left_out_of_the_fit(flagged: bool) -> None:
    # Steps of one sample each (nothing settles): a reading taken while the
    # residency call made the mirror sits half a step below the line.
    device = [0, 0, *(k * 256 * MIB for k in range(1, 9)), 0]
    series = _series(device, 1.0, drm=False, tracing=True)
    half_made = series.samples[5]
    values = dict(half_made.values)
    values["host.available"] += 128 * MIB
    values["trace.in_flight"] = 1 if flagged else 0
    samples = list(series.samples)
    samples[5] = WatchSample(half_made.t, values, pids=1)
    summary = summarize(Series(series.baseline, tuple(samples), {}, tracing=True))
    assert summary.verdict == "mirror", summary.analysis.reason
    assert summary.analysis.slope == pytest.approx(1024, abs=1)
    fit = summary.analysis.fit("host.available")
    assert fit is not None
    if flagged:
        assert fit.rejected == ()  # left out before any window was made of it
    else:
        # Unflagged, the two windows it closes and opens lie half a step off the
        # others: rejected as disturbed, and named.
        assert len(fit.rejected) == 2


def test_memory_made_resident_after_its_allocation_is_never_clean() -> None:
    # Eight allocations of 128 MiB, 0.5 s apart, with no host cost; then all of it made
    # resident on the peer, 128 MiB every 0.5 s, each time mirrored 1:1.
    summary = summarize(_resident_later(8, 128 * MIB, 3, 1.0))
    assert summary.verdict == "mirror", summary.analysis.reason
    assert summary.analysis.slope == pytest.approx(1024, abs=1)
    assert "made resident on a peer" in summary.analysis.reason


@pytest.mark.parametrize("seed", range(5))
def test_memory_made_resident_later_is_judged_when_the_allocations_cannot_be(seed: int) -> None:
    # As above, but another process takes a few MiB in two of the allocations' windows: they
    # cannot decide (their interval spans clean and partial; no climb says anything), and
    # the residency calls still show the mirror. Where the allocations' verdict named no
    # signal, that was left unsaid.
    rng = random.Random(seed)
    taken = {(2, 0): rng.randrange(11, 15), (5, 0): rng.randrange(11, 15)}
    summary = summarize(_resident_later(8, 128 * MIB, 3, 1.0, while_allocating=taken))
    assert summary.verdict == "mirror", summary.analysis.reason
    assert "made resident on a peer" in summary.analysis.reason
    assert summary.per_resident_gib is not None


def _resident_later(
    calls: int,
    size: int,
    reads: int,
    cost: float,
    peers: int = 1,
    other: int = 0,
    while_allocating: dict[tuple[int, int], int] | None = None,
) -> Series:
    """Return a traced job: eight 128 MiB allocations, then ``calls`` residency calls of ``size``.

    Each residency costs ``cost`` per byte made resident (per peer), ``reads``
    reads apart; ``other`` MiB of another process's memory come at every
    read of the residency phase, and ``while_allocating[(k, i)]`` MiB at read
    ``i`` after allocation ``k``.
    """
    base = WatchSample(0.0, {"host.available": AVAILABLE})
    samples, t, allocated, resident, taken = [], 0.0, 0, 0, 0
    plan = [("allocate", 8, 3), ("reside", calls, reads)]
    for phase, steps, per in plan:
        for k in range(steps):
            for i in range(per):
                t += 0.5 / 3
                if phase == "reside":
                    taken += other * MIB
                else:
                    taken += (while_allocating or {}).get((k, i), 0) * MIB
                devices = [
                    {
                        "index": 0,
                        "allocated": allocated,
                        "resident_on": {str(p): resident for p in range(1, peers + 1)},
                    }
                ]
                values = {
                    "host.available": AVAILABLE - int(cost * resident * peers) - taken,
                    **trace_values({"devices": devices}),
                }
                samples.append(WatchSample(round(t, 4), values, pids=1))
            if phase == "allocate":
                allocated += 128 * MIB
            else:
                resident += size
    return Series(base, tuple(samples), {}, tracing=True)


@pytest.mark.parametrize("calls", [3, 4, 5])
def test_a_few_residency_calls_never_overrule_the_allocations(calls: int) -> None:
    # Fewer than six calls: a line, with no window's interval and no climb to check it. A
    # neighbour growing through them would read as the calls' cost.
    summary = summarize(_resident_later(calls, GIB // calls, 3, 0.0, other=40))
    assert summary.verdict in ("clean", "inconclusive"), summary.analysis.reason
    assert "made resident on a peer" not in summary.analysis.reason


def test_residency_calls_at_every_read_never_overrule_the_allocations() -> None:
    # No read between two calls: no pause to measure another process's steady growth in.
    summary = summarize(_resident_later(32, 32 * MIB, 1, 0.0, other=4))
    assert "made resident on a peer" not in summary.analysis.reason


def test_memory_resident_on_two_peers_is_not_judged_per_byte_made_resident() -> None:
    # 1 GiB made resident on two peers is 2 GiB of residency: per byte of it, a 1:1
    # mirror would read as a half.
    summary = summarize(_resident_later(8, 128 * MIB, 3, 1.0, peers=2))
    assert summary.verdict != "partial", summary.analysis.reason
