"""What a watched workload cost: peaks, the fitted host cost per device GiB, and a verdict.

Pure functions over a :class:`~l0mem.watch.series.Series`. The fit and the
verdict are the estimation's, over the series as one set-up run
(:mod:`l0mem.watch.estimation`); the summary adds the peaks, the cost per
GiB made resident, and which device the host's side was charged to.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from l0mem.estimate import DEFAULT_CONFIG, analyze_samples, disputed
from l0mem.estimate.model import AnalysisConfig, SetupAnalysis, SignalFit
from l0mem.units import fixed
from l0mem.watch.drift import against_the_drift
from l0mem.watch.estimation import (
    TREE_RSS,
    as_setup_run,
    at_the_change,
    deciding_steps,
    device_series,
    more_evidence,
    traced_from_zero,
    watch_config,
)
from l0mem.watch.late import against_late_costs
from l0mem.watch.pauses import against_the_pauses, pause_costs
from l0mem.watch.series import (
    Series,
    WatchSample,
    drm_devices,
    drm_memory,
    growth,
    host_cost,
    host_signal,
    resident_bytes,
)


@dataclasses.dataclass(frozen=True)
class Peak:
    """The largest value of one quantity over the series, or why it is unavailable."""

    bytes: int | None
    t: float | None = None
    unavailable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the peak as plain JSON data."""
        return {"bytes": self.bytes, "t": self.t, "unavailable": self.unavailable}


@dataclasses.dataclass(frozen=True)
class DevicePeaks:
    """One DRM device's peak VRAM and GTT (host-backed regions) and how much its GTT grew."""

    pdev: str
    vram: Peak
    gtt: Peak
    gtt_growth: int | None  # peak host-backed bytes more than at the baseline

    def to_dict(self) -> dict[str, Any]:
        """Return the device's peaks as plain JSON data."""
        return {
            "pdev": self.pdev,
            "vram": self.vram.to_dict(),
            "gtt": self.gtt.to_dict(),
            "gtt_growth": self.gtt_growth,
        }


@dataclasses.dataclass(frozen=True)
class WatchSummary:
    """Peaks, the host cost per device GiB with its verdict, and where the host pages were charged."""

    host_signal: str | None
    # "trace", "drm", "sysman", or None when no device memory signal exists
    device_source: str | None
    host_cost: Peak
    device_memory: Peak
    tree_rss: Peak  # growth of the tree's VmRSS beyond the baseline
    shmem: Peak
    cgroup: Peak
    devices: tuple[DevicePeaks, ...]
    analysis: SetupAnalysis
    per_resident_gib: SignalFit | None  # host cost against bytes made resident on a peer
    vmrss_would_miss: bool | None  # None when the tree's VmRSS was not read
    charged_to: str | None  # the DRM device whose host-backed regions grew most

    @property
    def verdict(self) -> str:
        """Return the verdict in the audit's terms."""
        return self.analysis.verdict

    def to_dict(self) -> dict[str, Any]:
        """Return the summary as plain JSON data."""
        return {
            "verdict": self.analysis.verdict,
            "deciding_signal": self.analysis.deciding_signal,
            "ratio": self.analysis.ratio,
            "slope_mib_per_gib": self.analysis.slope,
            "uncertainty_mib_per_gib": _uncertainty(self.analysis),
            "reason": self.analysis.reason,
            "host_signal": self.host_signal,
            "device_source": self.device_source,
            "peaks": {
                "host_cost": self.host_cost.to_dict(),
                "device_memory": self.device_memory.to_dict(),
                "tree_vmrss_growth": self.tree_rss.to_dict(),
                "shmem_growth": self.shmem.to_dict(),
                "cgroup_growth": self.cgroup.to_dict(),
            },
            "devices": [d.to_dict() for d in self.devices],
            "charged_to": self.charged_to,
            "vmrss_would_miss": self.vmrss_would_miss,
            "per_resident_gib": None
            if self.per_resident_gib is None
            else self.per_resident_gib.to_dict(),
            "analysis": self.analysis.to_dict(),
        }


def _uncertainty(analysis: SetupAnalysis) -> float | None:
    fit = analysis.fit(analysis.deciding_signal) if analysis.deciding_signal else None
    return None if fit is None else fit.uncertainty


def _peak(points: list[tuple[float, int | None]], missing: str) -> Peak:
    known = [(v, t) for t, v in points if v is not None]
    if not known:
        return Peak(None, None, missing)
    value, t = max(known, key=lambda p: p[0])
    return Peak(value, t)


def _why(series: Series, *names: str) -> str:
    """Return why the first of ``names`` (or its source) is unavailable, from the series' record."""
    for name in names:
        for key in (name, name.partition(".")[0]):
            if key in series.unavailable:
                return f"{name}: {series.unavailable[key]}"
    return f"{' / '.join(names)}: not read on this machine"


def _no_device_reason(series: Series) -> str:
    if series.tracing:
        return "no device memory signal: the tracer saw no device allocation"
    why = series.unavailable.get("drm")
    detail = f" (drm: {why})" if why else ""
    return (
        "no device memory signal: the workload's DRM files showed no VRAM"
        + detail
        + "; --trace counts the allocations"
    )


def _series_peak(series: Series, name: str, *, falling: bool = False) -> Peak:
    points = [(s.t, growth(series, s, name, falling=falling)) for s in series.samples]
    return _peak(points, _why(series, name))


def _checked(
    series: Series,
    xs: list[int | None],
    analysis: SetupAnalysis,
    config: AnalysisConfig,
    still: list[int | None] | None = None,
) -> SetupAnalysis:
    """Return ``analysis`` checked against what its windows cannot see: the pauses, costs paid late, the drift."""
    decided = deciding_steps(analysis)
    # Both checks read the same pause windows of the deciding signal (the first one
    # keeps it deciding, or leaves nothing decided for the second).
    pauses = None if decided is None else pause_costs(series, xs, decided[0], config, still)
    analysis = against_the_pauses(series, analysis, pauses, config)
    analysis = against_late_costs(series, xs, analysis, pauses, config)
    return against_the_drift(series, xs, analysis, config)


def summarize(series: Series, config: AnalysisConfig = DEFAULT_CONFIG) -> WatchSummary:
    """Return the summary of ``series``: peaks, fit, verdict, VmRSS blindness and the charged device."""
    config = watch_config(config)
    xs = device_series(series)
    run = as_setup_run(series, xs, config)
    more = more_evidence(series.tracing)
    analysis = analyze_samples(run.samples, config, unavailable=run.unavailable, more=more)
    analysis = _checked(series, xs, at_the_change(series, xs, analysis, config), config)
    resident_xs = _resident_series(series)
    by_residency = None
    if resident_xs is not None:
        run = as_setup_run(series, resident_xs, config)
        by_residency = analyze_samples(run.samples, config, unavailable=run.unavailable, more=more)
        # Its pauses hold the allocations: those are the job's own, not a bias.
        by_residency = _checked(series, resident_xs, by_residency, config, still=xs)
    resident = _resident_fit(by_residency, _judged_signal(analysis))
    if resident_xs is not None and _apart(resident_xs, xs):
        # Judged, it may stand for the run only where the calls were steps of their own.
        analysis = _by_residency(analysis, by_residency)
    if all(x is None for x in xs) or not series.samples:
        analysis = dataclasses.replace(analysis, reason=_no_device_reason(series))
    host_name = host_signal(series)
    host = _peak(
        [(s.t, host_cost(series, s)) for s in series.samples],
        _why(series, "host.available", "meminfo.MemAvailable"),
    )
    device = _peak(
        list(zip([s.t for s in series.samples], xs, strict=True)), _no_device_reason(series)
    )
    devices = tuple(_device_peaks(series, pdev) for pdev in drm_devices(series.all))
    grown = [(d.gtt_growth, d.pdev) for d in devices if d.gtt_growth]
    charged = max(grown)[1] if grown else None
    rss = _series_peak(series, TREE_RSS)
    return WatchSummary(
        host_signal=host_name,
        device_source=None if all(x is None for x in xs) else series.device_source,
        host_cost=host,
        device_memory=device,
        tree_rss=rss,
        shmem=_series_peak(series, "meminfo.Shmem"),
        cgroup=_series_peak(series, "cgroup.memory.current"),
        devices=devices,
        analysis=analysis,
        per_resident_gib=resident,
        vmrss_would_miss=_vmrss_would_miss(analysis, config),
        charged_to=charged,
    )


def _vmrss_would_miss(analysis: SetupAnalysis, config: AnalysisConfig) -> bool | None:
    """Return whether the tree's VmRSS alone would have called a mirror or partial clean."""
    rss = analysis.fit(TREE_RSS)
    if rss is None or rss.ratio is None:
        return None
    return (
        analysis.verdict in ("mirror", "partial")
        and analysis.deciding_signal != TREE_RSS
        and rss.ratio < config.clean_threshold
    )


def _judged_signal(analysis: SetupAnalysis) -> str | None:
    """Return the signal the verdict rests on: the deciding one, else the first whose windows a climb contradicted."""
    if analysis.deciding_signal is not None:
        return analysis.deciding_signal
    return next((n for n, why in analysis.passed_over.items() if disputed(why)), None)


def _resident_series(series: Series) -> list[int | None] | None:
    """Return the traced bytes made resident on a peer beyond the baseline at each sample, or None.

    Windows at each residency call, as at each allocation: a workload that
    allocates first and makes its memory resident on a peer later pays the
    host at the residency calls, outside every allocation's window.
    """
    if not series.tracing:
        return None
    base = resident_bytes(series.baseline.values) or 0
    xs = traced_from_zero(
        [
            None if (now := resident_bytes(s.values)) is None else max(0, now - base)
            for s in series.samples
        ]
    )
    return xs if any(xs) else None


def _apart(resident: list[int | None], allocated: list[int | None]) -> bool:
    """Return whether the residency calls stand apart enough to be judged as steps of their own.

    Most of them came while the allocated bytes held still (made resident
    with its allocation, a buffer is the allocations' window's, and judged
    there); most of them had a still read before the next (a drift is
    measured in those pauses: calls at every read leave none); and no more
    bytes were made resident than allocated (memory resident on several
    peers would halve the cost per byte).
    """
    changes = [
        i
        for i in range(1, len(resident))
        if resident[i] is not None
        and resident[i - 1] is not None
        and resident[i] != resident[i - 1]
    ]
    if not changes:
        return False
    alone = sum(allocated[i] == allocated[i - 1] for i in changes)
    paused = sum(b - a >= 2 for a, b in itertools.pairwise(changes))
    peak = max((x for x in resident if x is not None), default=0)
    return (
        2 * alone > len(changes)
        and 2 * paused >= len(changes) - 1
        and peak <= max((x for x in allocated if x is not None), default=0)
    )


def _resident_fit(by_residency: SetupAnalysis | None, signal: str | None) -> SignalFit | None:
    """Return the fit against the bytes made resident: of ``signal``, else of the residency's own deciding signal."""
    if by_residency is None:
        return None
    fit = by_residency.fit(signal or by_residency.deciding_signal or "")
    return fit if fit is not None and fit.slope is not None else None


def _by_residency(analysis: SetupAnalysis, by_residency: SetupAnalysis | None) -> SetupAnalysis:
    """Return ``analysis``, or the residency's verdict when the allocations looked clean or undecided but it is not.

    A workload may allocate first and make its memory resident on a peer
    later: the host pays at the residency call, outside every allocation's
    window (the climb then contradicts those windows, or a neighbour leaves
    them undecided). The tracer sees those calls; where the bytes made
    resident show a mirror, that is the answer, never "clean"; where they
    could not be read, a clean from the allocations is not given either.
    """
    if (
        analysis.verdict == "clean"
        and by_residency is not None
        and by_residency.verdict == "inconclusive"
    ):
        # The allocations cannot see what the residency calls cost: where those
        # could not be read, neither can a clean be given.
        return dataclasses.replace(
            by_residency,
            reason=f"the allocations said clean, but the residency calls, where the host "
            f"may pay instead, could not say: {by_residency.reason}",
        )
    if (
        analysis.verdict not in ("clean", "inconclusive")
        or by_residency is None
        or by_residency.verdict not in ("mirror", "partial")
    ):
        return analysis
    resident = by_residency.fit(by_residency.deciding_signal or "")
    assert resident is not None and resident.slope is not None
    if resident.method != "steps":
        return analysis  # a line over a few calls: no window's interval, no climb to check it
    low, high = resident.interval or (resident.slope, resident.slope)
    reason = (
        f"{resident.signal}: {fixed(resident.slope)} MiB host per GiB made resident on a peer "
        f"({fixed(low)} to {fixed(high)}); the host paid at the residency calls, not at the "
        f"allocations (the allocations said: {analysis.reason})"
    )
    return dataclasses.replace(by_residency, reason=reason, released=None, next_steps=None)


def _device_peaks(series: Series, pdev: str) -> DevicePeaks:
    def peak(host: bool) -> Peak:
        points = [(s.t, drm_memory(s.values, pdev, host=host)) for s in series.samples]
        return _peak(points, f"no {'GTT or system' if host else 'VRAM'} region in {pdev}'s fdinfo")

    gtt = peak(True)
    base = drm_memory(series.baseline.values, pdev, host=True) or 0
    return DevicePeaks(
        pdev=pdev,
        vram=peak(False),
        gtt=gtt,
        gtt_growth=None if gtt.bytes is None else gtt.bytes - base,
    )


def live_ratio(series: Series, sample: WatchSample) -> float | None:
    """Return host cost over device memory beyond the baseline at ``sample``, or None."""
    cost = host_cost(series, sample)
    grown = series.device_growth(sample)
    if cost is None or not grown:
        return None
    return cost / grown


__all__ = [
    "TREE_RSS",
    "DevicePeaks",
    "Peak",
    "WatchSummary",
    "as_setup_run",
    "at_the_change",
    "device_series",
    "live_ratio",
    "summarize",
    "watch_config",
]
