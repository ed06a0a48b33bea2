"""Analysis of synthetic sample series: slopes, verdicts, signal choice, release, remedies.

``synthetic_run`` and ``synthetic_report`` are also used by the report and
compare tests.
"""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from l0mem.audit.analysis import analyze_report, analyze_run, ensure_analysed, remedy_effects
from l0mem.audit.model import AnalysisConfig, AuditReport, Sample, SetupRun, SignalFit
from l0mem.estimate import (
    DRM_HOST_AGGREGATE,
    classify,
    cost_series,
    fit_signal,
    recorded_signals,
    why_unusable,
)

MIB = 1 << 20
GIB = 1 << 30


def synthetic_run(
    ratio: float = 1.0,
    *,
    setup: str = "sycl",
    remedy: str | None = None,
    env: dict[str, str] | None = None,
    noise_mib: float = 0.0,
    steps: int = 8,
    step_bytes: int = GIB // 2,
    idle: int = 5,
    rss_ratio: float = 0.0,
    released: bool = True,
    overhead_mib: float = 0.0,
    gpu_active: bool = False,
    cgroup: bool = False,
    seed: int = 1,
    status: str = "ok",
    reason: str | None = None,
    host_memory: bool = False,
    simulated: bool = False,
    unavailable: dict[str, str] | None = None,
) -> SetupRun:
    """Return a run whose host memory falls by ``ratio`` bytes per device byte allocated."""
    rng = random.Random(seed)
    avail0, rss0 = 20 * GIB, 300 * MIB
    samples: list[Sample] = []

    def snap(phase: str, device: int, held: float) -> None:
        jitter = int(rng.gauss(0.0, noise_mib * MIB)) if noise_mib else 0
        values = {
            "meminfo.MemAvailable": avail0 - int(held) + jitter,
            "meminfo.MemFree": avail0 // 2 - int(held) + jitter,
            "proc.VmRSS": rss0 + int(rss_ratio * device),
            "sysman.0.used": 64 * MIB + device,
        }
        if gpu_active:
            values["meminfo.GPUActive"] = int(held)
        if cgroup:
            values["cgroup.memory.current"] = GIB + int(held)
        samples.append(Sample(0.1 * len(samples), phase, device, values))  # type: ignore[arg-type]

    for _ in range(idle):
        snap("idle", 0, 0)
    for k in range(1, steps + 1):
        snap("alloc", k * step_bytes, ratio * k * step_bytes + overhead_mib * MIB)
    kept = 0.0 if released else ratio * steps * step_bytes
    snap("freed", 0, kept + overhead_mib * MIB)
    return SetupRun(
        setup=setup,
        backend="sycl" if setup.startswith("sycl") else "l0",
        status=status,  # type: ignore[arg-type]
        reason=reason,
        env=env or {},
        remedy=remedy,
        devices=[{"name": "synthetic device", "index": 0}],
        step_bytes=step_bytes,
        target_bytes=steps * step_bytes,
        samples=samples,
        host_memory=host_memory,
        simulated=simulated,
        unavailable=dict(unavailable or {}),
    )


def synthetic_report(runs: list[SetupRun], *, analysed: bool = True) -> AuditReport:
    """Return a report holding ``runs`` (analysed with the default configuration)."""
    report = AuditReport(
        l0mem_version="0.1.0",
        created="2025-01-02T03:04:05Z",
        fingerprint={"host": {"hostname": "synthetic"}, "simulated": False},
        options={"target": "4GiB"},
        runs=runs,
        complete=True,
    )
    return analyze_report(report) if analysed else report


# ---------------------------------------------------------------- slopes and verdicts


@pytest.mark.parametrize(("ratio", "verdict"), [(1.0, "mirror"), (0.5, "partial"), (0.0, "clean")])
def test_exact_series_give_exact_slope_and_verdict(ratio: float, verdict: str) -> None:
    res = analyze_run(synthetic_run(ratio))
    assert res.verdict == verdict
    assert res.deciding_signal == "meminfo.MemAvailable"
    assert res.ratio == pytest.approx(ratio, abs=1e-6)
    assert res.slope == pytest.approx(1024 * ratio, abs=1e-3)
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.points == 8 and fit.span_gib == pytest.approx(3.5)
    assert fit.noise_mib == 0.0
    assert res.max_device_bytes == 4 * GIB


@pytest.mark.parametrize(("ratio", "verdict"), [(1.0, "mirror"), (0.5, "partial"), (0.0, "clean")])
def test_noisy_series_still_classify(ratio: float, verdict: str) -> None:
    res = analyze_run(synthetic_run(ratio, noise_mib=4.0, seed=7))
    assert res.verdict == verdict
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.noise_mib is not None and fit.noise_mib > 0
    assert fit.uncertainty is not None and fit.uncertainty > 0
    assert res.ratio == pytest.approx(ratio, abs=0.02)


def test_falling_memavailable_with_flat_vmrss_is_a_mirror_vmrss_would_miss() -> None:
    res = analyze_run(synthetic_run(1.0, rss_ratio=0.0))
    assert res.verdict == "mirror"
    rss = res.fit("proc.VmRSS")
    assert rss is not None and rss.slope == pytest.approx(0.0, abs=1e-9)
    assert res.vmrss_would_miss is True


def test_vmrss_that_moves_with_the_mirror_does_not_miss_it() -> None:
    res = analyze_run(synthetic_run(1.0, rss_ratio=1.0))
    assert res.verdict == "mirror"
    assert res.vmrss_would_miss is False


def test_clean_run_is_not_a_vmrss_miss() -> None:
    assert analyze_run(synthetic_run(0.0)).vmrss_would_miss is False


def test_noise_too_high_for_the_bytes_allocated_is_inconclusive() -> None:
    # 700 MiB of idle noise over 3.5 GiB of allocation: +/-600 MiB/GiB spans 0.75.
    res = analyze_run(synthetic_run(1.0, noise_mib=700.0, seed=3))
    assert res.verdict == "inconclusive"
    assert res.deciding_signal is None and res.ratio is None
    assert res.passed_over["meminfo.MemAvailable"]
    # VmRSS is steady but blind to TTM pages: it must not turn this into "clean".
    assert "proc.VmRSS" in res.passed_over
    assert res.released is None
    assert res.next_steps is not None and res.next_steps.signal == "meminfo.MemAvailable"


def test_an_uncertainty_that_cannot_change_the_verdict_decides() -> None:
    # 300 MiB of noise over 3.5 GiB: +/-257 MiB/GiB, yet 1:1 stays a mirror either way.
    res = analyze_run(synthetic_run(1.0, noise_mib=300.0, seed=3))
    assert res.verdict == "mirror"
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.uncertainty is not None and fit.uncertainty > 200
    assert fit.interval is not None and fit.interval[0] >= 0.75 * 1024


def test_more_device_bytes_make_the_same_noise_conclusive() -> None:
    noisy = synthetic_run(1.0, noise_mib=250.0, seed=5, steps=4, step_bytes=GIB // 4)
    big = synthetic_run(1.0, noise_mib=250.0, seed=5, steps=8, step_bytes=4 * GIB)
    assert analyze_run(noisy).verdict == "inconclusive"
    assert analyze_run(big).verdict == "mirror"


def test_one_point_is_inconclusive() -> None:
    res = analyze_run(synthetic_run(1.0, steps=1))
    assert res.verdict == "inconclusive"
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.points == 1 and fit.slope is None and fit.r2 is None
    assert "only 1 alloc sample" in res.passed_over["meminfo.MemAvailable"]


def test_device_bytes_that_never_change_give_no_slope() -> None:
    run = synthetic_run(1.0, steps=4)
    flat = [
        dataclasses.replace(s, device_bytes=GIB) if s.phase == "alloc" else s for s in run.samples
    ]
    res = analyze_run(dataclasses.replace(run, samples=flat))
    assert res.verdict == "inconclusive"
    assert "did not vary" in res.passed_over["meminfo.MemAvailable"]


def test_no_alloc_samples_is_inconclusive_with_a_reason() -> None:
    run = synthetic_run(1.0)
    idle_only = dataclasses.replace(run, samples=[s for s in run.samples if s.phase == "idle"])
    res = analyze_run(idle_only)
    assert res.verdict == "inconclusive"
    assert "no samples" in res.reason
    assert res.host == [] and res.max_device_bytes == 0


def test_non_finite_values_make_a_signal_unrecorded() -> None:
    run = synthetic_run(1.0)
    samples = list(run.samples)
    bad = dict(samples[7].values)
    bad["meminfo.MemAvailable"] = math.nan  # type: ignore[assignment]
    samples[7] = dataclasses.replace(samples[7], values=bad)
    res = analyze_run(dataclasses.replace(run, samples=samples))
    assert "meminfo.MemAvailable" not in recorded_signals(samples)
    assert res.deciding_signal == "meminfo.MemFree"
    assert res.verdict == "mirror"


# ---------------------------------------------------------------- release


def test_released_true_when_host_memory_comes_back() -> None:
    assert analyze_run(synthetic_run(1.0, released=True)).released is True


def test_released_false_when_host_memory_stays_after_free() -> None:
    res = analyze_run(synthetic_run(1.0, released=False))
    assert res.verdict == "mirror"
    assert res.released is False
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.remaining_mib == pytest.approx(4096, abs=1e-6)


def test_one_off_overhead_does_not_change_the_slope_or_count_as_kept() -> None:
    res = analyze_run(synthetic_run(0.5, overhead_mib=200.0, released=True))
    assert res.ratio == pytest.approx(0.5, abs=1e-6)
    fit = res.fit("meminfo.MemAvailable")
    assert fit is not None and fit.intercept_mib == pytest.approx(200.0, abs=1e-6)
    assert res.released is True


def test_released_unknown_without_freed_sample() -> None:
    run = synthetic_run(1.0)
    no_free = dataclasses.replace(run, samples=[s for s in run.samples if s.phase != "freed"])
    res = analyze_run(no_free)
    assert res.verdict == "mirror" and res.released is None


# ---------------------------------------------------------------- signal choice


def test_the_total_decides_when_it_separates_the_verdicts() -> None:
    res = analyze_run(synthetic_run(1.0, gpu_active=True))
    assert res.deciding_signal == "meminfo.MemAvailable"
    assert res.verdict == "mirror"


def test_a_component_decides_where_the_total_cannot() -> None:
    res = analyze_run(synthetic_run(1.0, gpu_active=True, noise_mib=700.0, seed=3))
    assert res.deciding_signal == "meminfo.GPUActive"
    assert res.verdict == "mirror"
    assert res.passed_over["meminfo.MemAvailable"]


def test_noisy_signal_is_passed_over_for_the_next_usable_one() -> None:
    res = analyze_run(synthetic_run(1.0, noise_mib=700.0, cgroup=True, seed=3))
    assert res.deciding_signal == "cgroup.memory.current"
    assert res.verdict == "mirror"
    assert res.passed_over["meminfo.MemAvailable"]
    assert "meminfo.MemAvailable" in res.reason and "cgroup.memory.current" in res.reason


def test_device_side_signals_are_reported_separately() -> None:
    res = analyze_run(synthetic_run(0.0))
    assert [f.signal for f in res.device] == ["sysman.0.used"]
    assert res.device[0].slope == pytest.approx(1024.0, abs=1e-6)
    assert all(f.side == "host" for f in res.host)
    assert "sysman.0.used" not in {f.signal for f in res.host}


def test_drm_host_regions_are_summed_over_devices() -> None:
    # The mirror is charged half to each device's DRM file: only the sum shows 1:1.
    a, b = "drm.0000:03:00.0", "drm.0000:04:00.0"
    # The host's total falls with it, with another process's step in it: too noisy
    # to decide alone, while the DRM sum accounts for the fall at every other sample.
    total = "meminfo.MemAvailable"
    noise = [0, 0, 0, 0, 1900, 0]
    samples = [
        Sample(0.0, "idle", 0, {f"{a}.gtt.resident": 0, f"{a}.vram0.resident": 0, total: 40 * GIB})
    ]
    for k in range(1, 6):
        dev = k * GIB
        samples.append(
            Sample(
                float(k),
                "alloc",
                dev,
                {
                    f"{a}.gtt.resident": dev // 2,
                    f"{b}.gtt.resident": dev // 2,
                    f"{a}.vram0.resident": dev,
                    total: 40 * GIB - dev + noise[k] * MIB,
                },
            )
        )
    run = dataclasses.replace(synthetic_run(0.0), samples=samples)
    res = analyze_run(run)
    assert res.passed_over[total]
    assert res.deciding_signal == DRM_HOST_AGGREGATE + "resident"
    assert res.verdict == "mirror" and res.ratio == pytest.approx(1.0)
    per_device = res.fit(f"{a}.gtt.resident")
    assert per_device is not None and per_device.ratio == pytest.approx(0.5)
    assert [f.signal for f in res.device] == [f"{a}.vram0.resident"]
    # Without any total of the host's memory a component shows where pages went, not
    # that the host lost them: it does not decide.
    alone = dataclasses.replace(
        run,
        samples=[
            dataclasses.replace(s, values={k: v for k, v in s.values.items() if k != total})
            for s in samples
        ],
    )
    res = analyze_run(alone)
    assert res.verdict == "inconclusive"
    assert "no total" in res.passed_over[DRM_HOST_AGGREGATE + "resident"]


def test_poor_linear_fit_cannot_decide_a_mirror() -> None:
    fit = SignalFit(
        signal="meminfo.MemAvailable",
        side="host",
        points=8,
        slope=900.0,
        intercept_mib=0.0,
        r2=0.5,
        noise_mib=0.0,
        residual_mib=1.0,
        uncertainty=1.0,
        span_gib=4.0,
        peak_mib=3600.0,
        remaining_mib=0.0,
    )
    assert "poor linear fit" in (why_unusable(fit) or "")
    assert why_unusable(dataclasses.replace(fit, r2=0.99)) is None
    # A flat cost has no R^2 to speak of and is still a usable "clean".
    assert why_unusable(dataclasses.replace(fit, slope=0.0, r2=None)) is None


def test_thresholds_are_parameters() -> None:
    run = synthetic_run(0.5)
    assert analyze_run(run).verdict == "partial"
    assert analyze_run(run, AnalysisConfig(mirror_threshold=0.4)).verdict == "mirror"
    assert (
        analyze_run(run, AnalysisConfig(clean_threshold=0.6, mirror_threshold=0.9)).verdict
        == "clean"
    )
    assert classify(0.1) == "partial" and classify(0.0999) == "clean" and classify(0.75) == "mirror"


def test_priority_is_a_parameter() -> None:
    res = analyze_run(synthetic_run(1.0), AnalysisConfig(priority=("meminfo.MemFree",)))
    assert res.deciding_signal == "meminfo.MemFree"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clean_threshold": 0.8, "mirror_threshold": 0.75},
        {"min_points": 1},
        {"confidence": 1.0},
        {"min_r2": 1.5},
        {"priority": ()},
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="analysis"):
        AnalysisConfig(**kwargs)  # type: ignore[arg-type]


def test_cost_series_applies_sense_and_idle_reference() -> None:
    run = synthetic_run(1.0, steps=2, step_bytes=GIB)
    series = cost_series(run.samples, "meminfo.MemAvailable")
    assert [p for p, _, _ in series] == ["idle"] * 5 + ["alloc", "alloc", "freed"]
    assert [round(c) for _, _, c in series[5:]] == [1024, 2048, 0]
    with pytest.raises(ValueError, match="unknown signal"):
        cost_series(run.samples, "nonsense")
    assert fit_signal(run.samples, "proc.VmRSS").slope == pytest.approx(0.0)


# ---------------------------------------------------------------- reports and remedies


def test_analyze_report_records_config_and_skips_skipped_runs() -> None:
    config = AnalysisConfig(mirror_threshold=0.9)
    skipped = dataclasses.replace(
        synthetic_run(setup="l0-multi", steps=0, idle=0),
        status="skipped",
        reason="needs two devices",
        samples=[],
    )
    report = analyze_report(synthetic_report([synthetic_run(0.8), skipped], analysed=False), config)
    assert report.analysis == config
    assert report.runs[0].result is not None and report.runs[0].result.verdict == "partial"
    assert report.runs[1].result is None


def test_ensure_analysed_keeps_existing_results() -> None:
    done = analyze_run(synthetic_run(0.0))
    run = dataclasses.replace(synthetic_run(1.0), result=done)
    other = synthetic_run(1.0, setup="l0")
    report = ensure_analysed(synthetic_report([run, other], analysed=False))
    assert report.runs[0].result is done
    assert report.runs[1].result is not None and report.runs[1].result.verdict == "mirror"


def test_remedy_effects_say_which_remedy_removed_the_mirror() -> None:
    runs = [
        synthetic_run(1.0, setup="sycl"),
        synthetic_run(0.0, setup="sycl", remedy="affinity", env={"ZE_AFFINITY_MASK": "0"}),
        synthetic_run(1.0, setup="sycl", remedy="no-defer", env={"NEOReadDebugKeys": "1"}),
        dataclasses.replace(
            synthetic_run(setup="sycl", remedy="usm-resident"),
            status="failed",
            reason="child crashed",
        ),
        synthetic_run(0.0, setup="l0"),
        synthetic_run(0.0, setup="l0", remedy="affinity"),
    ]
    report = synthetic_report(runs)
    failed = report.run("sycl", "usm-resident")
    assert failed is not None
    report = dataclasses.replace(
        report,
        runs=[dataclasses.replace(r, result=None) if r is failed else r for r in report.runs],
    )
    effects = {e.remedy: e for e in remedy_effects(report)}
    assert set(effects) == {"affinity", "no-defer", "usm-resident"}
    assert all(e.setup == "sycl" and e.baseline_verdict == "mirror" for e in effects.values())
    assert effects["affinity"].removed is True and effects["affinity"].verdict == "clean"
    assert effects["affinity"].env == {"ZE_AFFINITY_MASK": "0"}
    assert effects["no-defer"].removed is False
    assert effects["usm-resident"].removed is None and effects["usm-resident"].status == "failed"
    assert effects["affinity"].to_dict()["removed"] is True


def test_no_remedy_effects_without_a_mirror() -> None:
    report = synthetic_report([synthetic_run(0.0), synthetic_run(0.0, remedy="affinity")])
    assert remedy_effects(report) == []


# ---------------------------------------------------------------- per-CPU free lists


def _with_pcp(run: SetupRun, *, available_noise_mib: float) -> SetupRun:
    """Return ``run`` with zoneinfo and a noisy host.available added, MemAvailable left as is."""
    rng = random.Random(7)
    samples = []
    for s in run.samples:
        values = dict(s.values)
        values["zoneinfo.pcp_free"] = 400 * MIB
        values["host.available"] = (
            20 * GIB - s.device_bytes + int(rng.gauss(0.0, available_noise_mib * MIB))
        )
        samples.append(dataclasses.replace(s, values=values))
    return dataclasses.replace(run, samples=samples)


def test_memavailable_cannot_call_a_run_clean_when_per_cpu_lists_hide_memory() -> None:
    # MemAvailable says nothing moved (the allocation came from the per-CPU lists),
    # and the corrected signal is too noisy to decide: the verdict must not be clean.
    run = _with_pcp(synthetic_run(0.0), available_noise_mib=2000.0)
    res = analyze_run(run)
    assert res.verdict != "clean"
    assert "per-CPU" in res.passed_over["meminfo.MemAvailable"]


def test_memavailable_still_decides_without_per_cpu_readings() -> None:
    res = analyze_run(synthetic_run(0.0))
    assert res.verdict == "clean"
    assert res.deciding_signal == "meminfo.MemAvailable"


def test_memavailable_never_decides_where_the_per_cpu_lists_were_read() -> None:
    # The lists swing on a busy host and bias every window of MemAvailable alike:
    # where host.available (which counts them) cannot decide, neither may it.
    run = _with_pcp(synthetic_run(1.0), available_noise_mib=2000.0)
    res = analyze_run(run)
    assert res.deciding_signal != "meminfo.MemAvailable"
    assert "host.available decides instead" in res.passed_over["meminfo.MemAvailable"]


def test_released_is_not_judged_for_a_clean_run() -> None:
    # A clean run took nothing, so drift after free must not read as memory kept.
    run = synthetic_run(0.0)
    drifted = [
        dataclasses.replace(
            s,
            values={
                k: v - 30 * MIB if k.startswith("meminfo.Mem") else v for k, v in s.values.items()
            },
        )
        if s.phase == "freed"
        else s
        for s in run.samples
    ]
    res = analyze_run(dataclasses.replace(run, samples=drifted))
    assert res.verdict == "clean"
    assert res.released is None
