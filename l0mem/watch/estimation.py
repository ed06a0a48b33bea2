"""A watched series as the estimation's run: its phases, its step windows and its verdict.

The series is handed to the estimation (:func:`l0mem.estimate.analyze_samples`,
the audit's thresholds and signal priority) as one set-up run whose "alloc"
samples are those taken while the workload held device memory, the sample
just before as its "idle" reference and those after it gave every byte back
as "freed". The tree's VmRSS plays the part the audit's own ``proc.VmRSS``
plays: last in priority, and blind to driver-owned pages. Samples taken
while device memory was changing are left out of the fit when enough
settled ones remain (:func:`~l0mem.watch.windows.settled`). Where the step
windows, widened to where the host was still, cannot decide, the reads
right around each change may still show a mirror (:func:`at_the_change`).
"""

from __future__ import annotations

import dataclasses
import itertools

from l0mem.estimate import DEFAULT_CONFIG, analyze_samples
from l0mem.estimate.bystanders import without_bystanders
from l0mem.estimate.model import (
    AnalysisConfig,
    Edge,
    NextSteps,
    Phase,
    Sample,
    SetupAnalysis,
    SignalFit,
)
from l0mem.estimate.signals import MIB
from l0mem.estimate.steps import steady_rate
from l0mem.estimate.verdicts import separated
from l0mem.units import fixed
from l0mem.watch.series import IN_FLIGHT, Series, WatchSample, host_cost
from l0mem.watch.windows import settled, step_windows


@dataclasses.dataclass(frozen=True)
class JobRun:
    """A watched series as the estimation reads it: its samples, and why signals are missing."""

    samples: list[Sample]
    unavailable: dict[str, str]


# Fewer windows than this cannot give a 95% interval of their own (l0mem.estimate.steps.rank).
WINDOWS_FOR_STEPS = 6


def more_evidence(tracing: bool) -> str:
    """Return what would give a watched job more evidence (``--trace`` only where it was not used)."""
    rest = (
        "let the workload allocate in more or larger steps, or run it when the machine is quieter"
    )
    if tracing:
        return rest
    # watch cannot trace: the advice names the command that can.
    return (
        "run it under l0mem run --trace (device memory from the allocation calls themselves), "
        + rest
    )


# The audit reads this process's RSS; a watch reads the whole tree's.
_RSS = "proc.VmRSS"
TREE_RSS = "tree.VmRSS"


def watch_config(config: AnalysisConfig = DEFAULT_CONFIG) -> AnalysisConfig:
    """Return the audit's analysis settings with the process tree's VmRSS in place of the audit's own."""

    def swap(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(TREE_RSS if n == _RSS else n for n in names)

    return dataclasses.replace(config, priority=swap(config.priority), blind=swap(config.blind))


def device_series(series: Series) -> list[int | None]:
    """Return the workload's device memory beyond the baseline at each sample (None: unknown).

    Traced, the reads before the tracer's first record are 0, not unknown:
    it records every call that allocates, so none had been made. Without
    them the first allocation would have no read before it, and no window.
    """
    xs = [series.device_growth(s) for s in series.samples]
    return traced_from_zero(xs) if series.tracing else xs


def traced_from_zero(xs: list[int | None]) -> list[int | None]:
    """Return a traced quantity's reads with those before the tracer's first record as 0."""
    first = next((i for i, x in enumerate(xs) if x is not None), 0)
    return [0] * first + xs[first:]


def known_reads(series: Series, xs: list[int | None]) -> list[tuple[int, WatchSample, int]]:
    """Return (index, sample, device memory) of each sample the windows are made of.

    Those whose device memory ``xs`` is known, but for a reading taken while
    a traced call moved memory: it pairs the wrong values.
    """
    return [
        (i, s, x)
        for i, (s, x) in enumerate(zip(series.samples, xs, strict=True))
        if x is not None and not s.values.get(IN_FLIGHT)
    ]


# The host's rate before the job began says nothing from fewer reads than this, or
# over less time: a neighbour's rate needs a stretch to show it was steady.
BEFORE_READS = 5
BEFORE_SECONDS = 0.5


def before_the_job(series: Series, known: list[tuple[int, WatchSample, int]]) -> float | None:
    """Return the rate (MiB a second) the host's cost moved at before device memory first grew, or None.

    Before the job took any device memory, what moved the host was other
    processes: where it moved steadily (:func:`~l0mem.estimate.steps.steady_rate`)
    over :data:`BEFORE_READS` reads and :data:`BEFORE_SECONDS` or more, that is
    a neighbour's rate, and it tells what part of a rate seen later is theirs.
    None where the reads are too few or too short, or the host jumped.
    ``known`` are the reads the windows are made of (:func:`known_reads`).
    """
    read: list[tuple[float, float]] = []
    base = host_cost(series, series.baseline)
    if base is not None:
        read.append((series.baseline.t, base / MIB))
    for _, s, x in known:
        if x != 0:
            break
        cost = host_cost(series, s)
        if cost is not None:
            read.append((s.t, cost / MIB))
    if len(read) < BEFORE_READS or read[-1][0] - read[0][0] < BEFORE_SECONDS:
        return None
    return steady_rate(read)


def edge_costs(series: Series, known: list[tuple[int, WatchSample, int]]) -> tuple[list[int | None], float]:
    """Return the host's cost at each of ``known`` reads and the rate before the job (bytes a second, 0: none).

    What the step windows' edges are moved over (:func:`~l0mem.watch.windows.step_windows`).
    """
    rate = before_the_job(series, known)
    return [host_cost(series, s) for _, s, _ in known], (rate or 0.0) * MIB


def as_setup_run(
    series: Series,
    xs: list[int | None],
    config: AnalysisConfig = DEFAULT_CONFIG,
    *,
    widen: bool = True,
) -> JobRun:
    """Return the series as the estimation's run, whose device bytes are ``xs``.

    The reference ("idle") is the last sample before device memory first grew
    (the baseline if it grew at once); "freed" are the samples after the last
    one holding device memory; "alloc" those in between. Where device memory
    changed between two samples, they are a step window
    (:func:`~l0mem.watch.windows.step_windows`, its edges moved out to where
    the host's cost was still), and the estimation measures from those;
    without enough of them, a line is fitted over the alloc samples, only the
    settled ones when there are enough of them. Samples
    whose device memory is unknown are left out. Without ``widen``, each
    window is the reads right around its change (:func:`at_the_change`).
    """
    still = settled(xs)
    found = known_reads(series, xs)
    known = [(s, x, still[i]) for i, s, x in found]
    held = [i for i, (_, x, _) in enumerate(known) if x > 0]
    samples: list[Sample] = []
    if held:
        first, last = held[0], held[-1]
        levels = [x for _, x, _ in known]
        times = [s.t for s, _, _ in known]
        cost, rate = edge_costs(series, found) if widen else (None, 0.0)
        marks = step_windows(levels, times if widen else None, cost, rate)
        if sum(1 for a, b in itertools.pairwise(levels) if b > a) < WINDOWS_FOR_STEPS:
            # Too few windows for the windows' own interval: the line, over settled samples.
            marks = {}
        # From the read before the first growth, or the first window's edge where it moved earlier.
        start = min(first - 1 if first > 0 else first, min(marks, default=first))
        if first == 0:
            samples.append(Sample(series.baseline.t, "idle", 0, dict(series.baseline.values)))
        during = known[first : last + 1]
        calm: list[tuple[WatchSample, int, bool]] = [
            (s, x, ok) for s, x, ok in during if ok and x > 0
        ]
        keep_all = bool(marks) or not (
            len({x for _, x, _ in calm}) >= 2 and len(calm) >= config.min_points
        )
        for i in range(start, len(known)):
            s, x, ok = known[i]
            # As the audit's: device memory held is alloc; none, once some was, freed (a
            # job that frees everything and allocates again climbs again).
            phase: Phase = "idle" if i < first else ("alloc" if i <= last and x > 0 else "freed")
            if phase == "alloc" and not keep_all and not (ok and x > 0):
                continue
            if start < i < first and i not in marks:
                continue  # the first step's host side under way: no idle level

            edges: list[tuple[int | None, Edge | None]] = [*marks.get(i, [])] or [(None, None)]
            for step, edge in edges:
                samples.append(Sample(s.t, phase, x, dict(s.values), step, edge))
    else:
        samples.append(Sample(series.baseline.t, "idle", 0, dict(series.baseline.values)))
        samples += [Sample(s.t, "idle", 0, dict(s.values)) for s, _, _ in known]
    return JobRun(samples, dict(series.unavailable))


def at_the_change(
    series: Series, xs: list[int | None], analysis: SetupAnalysis, config: AnalysisConfig
) -> SetupAnalysis:
    """Return ``analysis`` checked against the reads right around each change of device memory.

    A window widened to where the host was still also takes in another
    process's memory that moved right beside the change (a neighbour that
    began to allocate as the step's host side ended), always the step's
    way. The reads right around each change hold less of any neighbour, and
    never more of the step's host side than the widened window holds: they
    can only cut a slow host side short. So:

    - where the widened windows could not decide, a mirror the narrow ones
      show stands (never a clean or partial: that may be a host side cut
      short), and the reason says so;
    - where both decide the same verdict on the same signal but the narrow
      windows' slope lies outside the widened interval, the interval is
      widened to hold both (the truth lies between a host side cut short and
      one with a neighbour's memory in it), and the reason gives both.
    """
    wide = analysis.fit(analysis.deciding_signal) if analysis.deciding_signal else None
    if analysis.verdict != "inconclusive" and (wide is None or wide.method != "steps"):
        return analysis
    run = as_setup_run(series, xs, config, widen=False)
    more = more_evidence(series.tracing)
    narrow = analyze_samples(run.samples, config, unavailable=run.unavailable, more=more)
    fit = narrow.fit(narrow.deciding_signal) if narrow.deciding_signal else None
    if fit is None or fit.method != "steps" or fit.slope is None:
        return analysis
    if analysis.verdict == "inconclusive":
        if narrow.verdict != "mirror":
            return analysis
        return dataclasses.replace(
            narrow,
            reason=(
                f"{narrow.reason}; from the reads right around each change: the windows "
                "widened to where the host was still took in other processes' memory and "
                "could not decide"
            ),
        )
    assert wide is not None and wide.low is not None and wide.high is not None
    if narrow.verdict != analysis.verdict or fit.signal != wide.signal:
        return analysis
    if wide.low <= fit.slope <= wide.high or fit.low is None or fit.high is None:
        return analysis
    low, high = min(wide.low, fit.low), max(wide.high, fit.high)
    both = dataclasses.replace(
        wide,
        low=low,
        high=high,
        uncertainty=max(high - (wide.slope or 0.0), (wide.slope or 0.0) - low),
    )
    return dataclasses.replace(
        analysis,
        host=[both if f is wide else f for f in analysis.host],
        reason=(
            f"{analysis.reason}; the reads right around each change give {fixed(fit.slope)} "
            f"({fixed(fit.low)} to {fixed(fit.high)}): other processes' memory moved beside the "
            f"changes, or the host's side outlasted a read; the interval {fixed(low)} to "
            f"{fixed(high)} holds both"
        ),
    )


def judged_samples(
    series: Series, xs: list[int | None], config: AnalysisConfig = DEFAULT_CONFIG
) -> list[Sample]:
    """Return the samples the estimation judges: the series as a set-up run, other processes' memory a component shows taken out."""
    samples = as_setup_run(series, xs, config).samples
    return without_bystanders(samples, config.totals, config.clean_threshold)[0]


def deciding_steps(analysis: SetupAnalysis) -> tuple[str, SignalFit] | None:
    """Return the deciding signal and its fit where step windows decided with an interval, else None."""
    signal = analysis.deciding_signal
    fit = analysis.fit(signal) if signal else None
    if signal is None or fit is None or fit.method != "steps" or fit.interval is None:
        return None
    return signal, fit


def undecided(
    analysis: SetupAnalysis, signal: str, fit: SignalFit, why: str, more: str
) -> SetupAnalysis:
    """Return ``analysis`` made inconclusive: its deciding ``signal`` could not decide, for ``why``."""
    advice = NextSteps(
        text=f"{signal}: {why}; {more}",
        signal=signal,
        noise_mib=None,
        windows=fit.points,
        windows_needed=None,
        size_needed_bytes=None,
        missing={},
    )
    return dataclasses.replace(
        analysis,
        verdict="inconclusive",
        deciding_signal=None,
        ratio=None,
        # The signals after this one in priority were not tried: it had decided.
        reason=f"{signal} could not decide: {why}",
        passed_over={**analysis.passed_over, signal: why},
        released=None,
        vmrss_would_miss=False,
        next_steps=advice,
    )


def holding(
    analysis: SetupAnalysis,
    signal: str,
    fit: SignalFit,
    other: tuple[float, float],
    seen: str,
    more: str,
    config: AnalysisConfig,
) -> SetupAnalysis:
    """Return ``analysis`` with ``fit``'s interval widened to hold ``other`` too, undecided where it then spans two verdicts."""
    assert fit.interval is not None and fit.slope is not None
    low, high = min(fit.interval[0], other[0]), max(fit.interval[1], other[1])
    if (low, high) == fit.interval:
        return analysis
    wide = dataclasses.replace(
        fit, low=low, high=high, uncertainty=max(high - fit.slope, fit.slope - low)
    )
    seen = f"{seen}; the interval widened to {fixed(low)} to {fixed(high)} MiB/GiB"
    host = [wide if f is fit else f for f in analysis.host]
    if separated(wide, config) == analysis.verdict:
        return dataclasses.replace(analysis, host=host, reason=f"{analysis.reason}; {seen}")
    return undecided(
        dataclasses.replace(analysis, host=host), signal, fit, f"{seen}, across two verdicts", more
    )


__all__ = [
    "TREE_RSS",
    "WINDOWS_FOR_STEPS",
    "JobRun",
    "as_setup_run",
    "at_the_change",
    "before_the_job",
    "deciding_steps",
    "device_series",
    "edge_costs",
    "holding",
    "judged_samples",
    "known_reads",
    "more_evidence",
    "traced_from_zero",
    "undecided",
    "watch_config",
]
