"""The verdict on a run: which signal decides, whether its interval separates the verdicts.

A verdict is given only when the deciding signal's whole interval lies in
one verdict's range (clean below ``clean_threshold``, mirror from
``mirror_threshold``, partial between): the question is never how noisy a
signal was, only whether the noise could change the answer.

Signals are of two kinds. A **total** (``host.available``, MemAvailable,
MemFree) shows every page anyone takes: it alone can show that a run took
nothing. A **component** (GPUActive, ``nr_gpu_active``, the cgroup's GPU
pages, DRM fdinfo host regions, Shmem, VmRSS) shows where some pages went:
i915 backs its system-memory objects with shmem, so they show in Shmem;
xe's TTM pages show in GPUActive / ``nr_gpu_active`` from kernel 7.1 and in
no component before; l0mem's simulator shows its memfd mirror in Shmem and
its anonymous mirror in none. A component may decide only a mirror or a
partial mirror, only when the totals could not decide, and only when its
interval meets the first usable total's: it then accounts for the host's
loss that the same steps caused, with the precision a neighbour cannot take
from it. A wrong clean is the worst answer, so no component ever says clean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from l0mem.estimate.advice import next_steps
from l0mem.estimate.bystanders import without_bystanders
from l0mem.estimate.climbs import outside
from l0mem.estimate.fits import climb, fit_signal, theil_sen
from l0mem.estimate.model import (
    AnalysisConfig,
    Sample,
    SetupAnalysis,
    SignalFit,
)
from l0mem.estimate.signals import GIB, carries, cost_series, recorded_signals
from l0mem.estimate.steps import step_slope, windows
from l0mem.estimate.verdicts import classify, separated, why_unusable
from l0mem.units import fixed

_PCP_HIDDEN = frozenset({"meminfo.MemAvailable", "meminfo.MemFree"})
# What a user can do for more evidence, when the caller does not say.
MORE_EVIDENCE = "measure again with more steps or a larger size, or when the machine is quieter"


def _spans(fit: SignalFit) -> str:
    low, high = fit.interval or (math.nan, math.nan)
    return f"its interval {fixed(low)} to {fixed(high)} MiB/GiB spans two verdicts"


def _meets(a: SignalFit, b: SignalFit) -> bool:
    ia, ib = a.interval, b.interval
    return ia is not None and ib is not None and ia[0] <= ib[1] and ib[0] <= ia[1]


def unexplained(
    samples: Sequence[Sample], total: str, component: str, config: AnalysisConfig
) -> float | None:
    """Return how much of the total's fall, in MiB per GiB, the component leaves unexplained.

    Over the step windows both signals were read in: the median of the
    differences, so that a window a neighbour disturbed (it moves the total
    alone) is outvoted. Without windows: the slope of the difference over the
    climb's samples. None when neither can be had.
    """
    of_total = {w.step: w for w in windows(samples, total)}
    paired = [
        dataclasses.replace(w, cost_mib=of_total[w.step].cost_mib - w.cost_mib)
        for w in windows(samples, component)
        if w.step in of_total and w.device_bytes > 0
    ]
    found = step_slope(paired, config.confidence)
    if found is not None and found.interval.coverage >= config.confidence:
        return found.slope
    a, b = cost_series(climb(samples), total), cost_series(climb(samples), component)
    if len(a) != len(b):
        return None
    pts = [(x, ca - cb) for (pa, x, ca), (_, _, cb) in zip(a, b, strict=True) if pa == "alloc"]
    # Theil-Sen: a sample a neighbour moved tilts a least-squares line, not the median slope.
    return theil_sen([x for x, _ in pts], [y for _, y in pts])


def _accounts(
    samples: Sequence[Sample], fit: SignalFit, total: SignalFit, config: AnalysisConfig
) -> str | None:
    """Return why component ``fit`` does not account for the total's fall, or None when it does."""
    low, high = total.interval or (math.nan, math.nan)
    if not _meets(fit, total):
        return f"does not account for the fall of {total.signal} ({fixed(low)} to {fixed(high)} MiB/GiB)"
    rest = unexplained(samples, total.signal, fit.signal, config)
    if rest is None or abs(rest) > config.clean_threshold * 1024.0:
        typical = "an unknown share" if rest is None else f"{fixed(rest)} MiB/GiB"
        return f"does not account for the fall of {total.signal}: {typical} of it went elsewhere"
    return None


def choose(
    samples: Sequence[Sample], by_name: Mapping[str, SignalFit], config: AnalysisConfig
) -> tuple[SignalFit | None, SignalFit | None, dict[str, str]]:
    """Return (deciding fit or None, the total components are checked against, why others did not decide)."""
    pcp_hidden = _PCP_HIDDEN if "zoneinfo.pcp_free" in by_name else frozenset()
    totals = [n for n in config.priority if n in config.totals]
    components = [n for n in config.priority if n not in config.totals]
    total: SignalFit | None = None
    passed_over: dict[str, str] = {}
    for name in [*totals, *components]:
        fit = by_name.get(name)
        if fit is None:
            continue
        why = why_unusable(fit, config)
        is_total = name in config.totals
        if (
            is_total
            and total is None
            and fit.interval is not None
            and fit.points >= config.min_points
        ):
            # Components are checked against the first total that measured anything at all.
            total = fit
        if why is None and not is_total and not carries(name, config.stacks):
            why = f"not where {' or '.join(config.stacks)} puts a mirror's host pages"
        verdict = separated(fit, config) if why is None else None
        if why is not None:
            pass
        elif verdict is None:
            why = _spans(fit)
        elif verdict == "clean" and not is_total:
            why = "one component of the host's loss: it cannot show that a run is clean"
        elif verdict == "clean" and name in config.blind:
            why = "blind to driver-owned host pages: it cannot show that a run is clean"
        elif name in pcp_hidden:
            # The per-CPU lists swing by hundreds of MiB on a busy host: what they hide
            # biases every window the same way, and host.available reads them too.
            why = "misses memory taken from the per-CPU free lists: host.available decides instead"
        elif verdict == "clean" and total is not fit and _reaches_past_clean(total, config):
            assert total is not None
            why = (
                f"{total.signal} reaches past clean: a later total cannot show that a run is clean"
            )
        elif not is_total and total is None:
            why = "no total of the host's memory could check that it accounts for the loss"
        elif not is_total and total is not None:
            why = _accounts(samples, fit, total, config)
        if why is None:
            why = outside(samples, fit, verdict, config)  # type: ignore[arg-type]
        if why is None and verdict == "clean" and _gained(fit, config):
            why = _GAINED
        if why is None:
            return fit, total, passed_over
        passed_over[name] = why
    return None, total, passed_over


# Why a slope far below zero decides nothing.
_GAINED = (
    "the host gained memory as device memory grew, more than clean allows it to lose: "
    "something gave memory back meanwhile (another process, or host buffers of the run's "
    "own), and that hides what the run cost"
)


def _gained(fit: SignalFit, config: AnalysisConfig) -> bool:
    """Return whether ``fit``'s slope lies further below zero than the clean threshold lies above it.

    Allocating device memory gives the host nothing back: such a slope is
    what else moved the host meanwhile, another process or the run's own
    host buffers freed as its device memory grew, and a mirror as large as
    what it gave back would read the same. It says as little of a clean as
    of a mirror.
    """
    return fit.slope is not None and fit.slope < -config.clean_threshold * 1024.0


def _reaches_past_clean(total: SignalFit | None, config: AnalysisConfig) -> bool:
    interval = None if total is None else total.interval
    return interval is not None and interval[1] >= config.clean_threshold * 1024.0


def analyze_samples(
    samples: Sequence[Sample],
    config: AnalysisConfig | None = None,
    *,
    untouched: int = 0,
    unavailable: Mapping[str, str] | None = None,
    more: str = MORE_EVIDENCE,
) -> SetupAnalysis:
    """Return the verdict on one run's samples, with every host and device fit.

    ``untouched`` counts allocations whose fill did not read back (no verdict
    holds then); ``unavailable`` says why signals are absent, and ``more``
    what the user can do for more evidence, for an inconclusive run's advice.
    """
    config = config or AnalysisConfig()
    samples, bystanders = without_bystanders(samples, config.totals, config.clean_threshold)
    alloc = [s for s in samples if s.phase == "alloc"]
    max_device = max((s.device_bytes for s in samples), default=0)
    fits = [fit_signal(samples, name, config) for name in recorded_signals(samples)]
    host = [f for f in fits if f.side == "host"]
    device = [f for f in fits if f.side == "device"]
    by_name = {f.signal: f for f in host}
    chosen, total, passed_over = choose(samples, by_name, config)

    if untouched or chosen is None or chosen.slope is None:
        reason = _no_signal_reason(alloc != [], passed_over)
        if untouched:
            # Memory the fill never reached may not be backed at all: no verdict holds.
            reason = (
                f"memory not touched: {untouched} allocation(s) did not read back the fill pattern"
            )
        advice = next_steps(
            samples,
            total,
            by_name,
            config,
            unavailable or {},
            more,
            untouched=untouched,
            why=None if total is None else passed_over.get(total.signal),
        )
        return SetupAnalysis(
            verdict="inconclusive",
            deciding_signal=None,
            ratio=None,
            reason=reason,
            host=host,
            device=device,
            passed_over=passed_over,
            released=None,
            vmrss_would_miss=False,
            max_device_bytes=max_device,
            next_steps=advice,
        )

    ratio = chosen.slope / 1024.0
    verdict = classify(ratio, config)
    rss = by_name.get("proc.VmRSS")
    vmrss_would_miss = (
        verdict in ("mirror", "partial")
        and chosen.signal != "proc.VmRSS"
        and rss is not None
        and rss.ratio is not None
        and rss.ratio < config.clean_threshold
    )
    return SetupAnalysis(
        verdict=verdict,
        deciding_signal=chosen.signal,
        ratio=ratio,
        reason=decided_reason(chosen, passed_over) + _taken_out(bystanders.get(chosen.signal)),
        host=host,
        device=device,
        passed_over=passed_over,
        # Nothing was taken in a clean run, so there is nothing to give back.
        released=None if verdict == "clean" else released(chosen, max_device / GIB, config),
        vmrss_would_miss=vmrss_would_miss,
        max_device_bytes=max_device,
    )


def _taken_out(names: Sequence[str] | None) -> str:
    if not names:
        return ""
    return f"; other processes' {' and '.join(names)} taken out of it (l0mem.estimate.bystanders)"


def _no_signal_reason(any_alloc: bool, passed_over: dict[str, str]) -> str:
    if not any_alloc:
        return "no samples were taken while device memory was allocated"
    if not passed_over:
        return "none of the prioritised host signals was recorded in every alloc sample"
    return undecided_reason(passed_over)


def undecided_reason(
    passed_over: Mapping[str, str], shown: int | None = None, more: str = "more"
) -> str:
    """Return why no host signal decided: each one passed over and why.

    ``shown``: only the first ``shown`` of them, then how many ``more`` there
    are (an answer short enough to read first, the rest in its details).
    """
    items = list(passed_over.items())
    listed = items if shown is None else items[:shown]
    detail = "; ".join(f"{name}: {why}" for name, why in listed)
    if len(listed) < len(items):
        detail += f"; {len(items) - len(listed)} {more}"
    return f"no host signal could decide ({detail})"


def decided_reason(fit: SignalFit, passed_over: Mapping[str, str]) -> str:
    """Return the one sentence that says what decided: signal, slope, interval and evidence."""
    assert fit.slope is not None
    low, high = fit.interval or (fit.slope, fit.slope)
    if fit.method == "steps":
        cov = 0.0 if fit.coverage is None else fit.coverage
        dropped = f", {len(fit.rejected)} disturbed and left out" if fit.rejected else ""
        text = (
            f"{fit.signal}: {fixed(fit.slope)} MiB host per GiB device ({fixed(low)} to {fixed(high)} "
            f"at {cov:.0%}, {fit.points} step windows{dropped})"
        )
    else:
        r2 = "n/a" if fit.r2 is None else f"{fit.r2:.3f}"
        text = (
            f"{fit.signal}: {fixed(fit.slope)} MiB host per GiB device "
            f"(+/-{fixed(fit.uncertainty or 0.0)}, R^2 {r2}, {fit.points} points)"
        )
    if passed_over:
        text += "; passed over " + "; ".join(f"{n} ({w})" for n, w in passed_over.items())
    return text


def released(fit: SignalFit, max_device_gib: float, config: AnalysisConfig) -> bool | None:
    """Return whether the memory the allocations cost came back after free."""
    if fit.slope is None:
        return None
    taken = max(fit.slope * max_device_gib, 0.0)
    if fit.method == "steps" and fit.kept_mib is not None:
        # What the frees gave back against what the allocations took, window by window:
        # a disturbed window counts at its kind's median, so no neighbour decides it.
        if fit.kept_mib <= max(config.release_fraction * taken, 1.0):
            return True
        # Not within the windows; a driver that frees later (a free worker) still
        # gave it back if the level after the freed samples' settling says so.
        return _released_by_level(fit, taken, config) is True
    return _released_by_level(fit, taken, config)


def _released_by_level(fit: SignalFit, taken: float, config: AnalysisConfig) -> bool | None:
    """Return whether the cost at the last freed sample is back near the line's zero, or None."""
    if fit.remaining_mib is None or fit.intercept_mib is None:
        return None
    # Measured from the fitted line's zero, so one-off costs (a context that
    # lives until exit) are not mistaken for allocations kept after free.
    # A line's noise is its idle spread and residual; the windows' is their own spread
    # (a line through the way down of a kept mirror would excuse any level).
    residual = 0.0 if fit.method == "steps" else (fit.residual_mib or 0.0)
    sigma = max(fit.noise_mib or 0.0, residual)
    # The 1 MiB floor keeps rounding in the fit from deciding noise-free cases.
    allowance = max(config.release_fraction * taken, config.noise_sigmas * sigma, 1.0)
    return fit.remaining_mib - fit.intercept_mib <= allowance


__all__ = [
    "MORE_EVIDENCE",
    "analyze_samples",
    "choose",
    "classify",
    "decided_reason",
    "released",
    "separated",
    "undecided_reason",
    "why_unusable",
]
