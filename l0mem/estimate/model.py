"""The estimation's data: samples, settings, per-signal fits and the judged result.

Every class is a frozen dataclass with ``to_dict()`` (plain JSON data) and
``from_dict()`` (strict validation through :mod:`l0mem.jsonfields`). Fields
added after the first schema are optional on reading, so reports written
before them still read (docs/report-schema.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, cast, get_args

from l0mem.jsonfields import (
    array,
    boolean,
    choice,
    fail,
    field,
    int_map,
    integer,
    items,
    join,
    number,
    obj,
    opt_boolean,
    opt_number,
    opt_string,
    str_map,
    string,
)

Phase = Literal["idle", "alloc", "freed"]
Edge = Literal["before", "after"]
Verdict = Literal["mirror", "partial", "clean", "inconclusive"]
Side = Literal["host", "device"]
Method = Literal["steps", "line"]

PHASES: tuple[str, ...] = get_args(Phase)
EDGES: tuple[str, ...] = get_args(Edge)
VERDICTS: tuple[str, ...] = get_args(Verdict)
SIDES: tuple[str, ...] = get_args(Side)
METHODS: tuple[str, ...] = get_args(Method)

# Signal priority for the verdict: direct GPU page accounting first, RSS last
# because TTM pages never show in a process's RSS. ``drm.all.host.<key>`` is the
# sum over every DRM client and host-backed region (see l0mem.estimate.signals).
DEFAULT_PRIORITY: tuple[str, ...] = (
    "meminfo.GPUActive",
    "vmstat.nr_gpu_active",
    "cgroup.gpu_active",
    "host.available",
    "meminfo.MemAvailable",
    "cgroup.memory.current",
    "drm.all.host.resident",
    "drm.all.host.total",
    "meminfo.Shmem",
    "meminfo.MemFree",
    "proc.VmRSS",
)

# What the whole host has left: every page anyone takes shows here, so these
# alone can show that a run took nothing. Everything else in the priority is a
# component of the loss (l0mem.estimate.decide).
DEFAULT_TOTALS: tuple[str, ...] = ("host.available", "meminfo.MemAvailable", "meminfo.MemFree")


@dataclasses.dataclass(frozen=True)
class Sample:
    """One snapshot of every signal, taken at ``t`` seconds into the run.

    ``step`` and ``edge`` mark the two samples taken right before and right
    after one change of device memory (a step window); other samples carry
    neither.
    """

    t: float
    phase: Phase
    device_bytes: int  # device memory allocated so far
    values: dict[str, int]  # signal name -> bytes (absent signal: absent key)
    step: int | None = None
    edge: Edge | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the sample as plain JSON data."""
        d: dict[str, Any] = {
            "t": self.t,
            "phase": self.phase,
            "device_bytes": self.device_bytes,
            "values": dict(self.values),
        }
        if self.step is not None:
            d["step"] = self.step
            d["edge"] = self.edge
        return d

    @classmethod
    def from_dict(cls, data: object, path: str = "sample") -> Sample:
        """Return the sample held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)
        step = d.get("step")
        edge = None
        if step is not None:
            step = integer(step, join(path, "step"), minimum=0)
            edge = cast(Edge, choice(field(d, "edge", path), join(path, "edge"), EDGES))
        return cls(
            t=number(field(d, "t", path), join(path, "t")),
            phase=cast(Phase, choice(field(d, "phase", path), join(path, "phase"), PHASES)),
            device_bytes=integer(
                field(d, "device_bytes", path), join(path, "device_bytes"), minimum=0
            ),
            values=int_map(field(d, "values", path), join(path, "values")),
            step=step,
            edge=edge,
        )


@dataclasses.dataclass(frozen=True)
class AnalysisConfig:
    """Thresholds and signal priority that turn measured slopes into verdicts."""

    mirror_threshold: float = 0.75  # host/device ratio at or above this: mirror
    clean_threshold: float = 0.10  # below this: clean; in between: partial
    # Unused since report schema 1.2 (a verdict asks whether the slope's interval
    # separates the verdicts, not how wide it is); written so 1.1 readers still read.
    max_uncertainty: float = 0.05
    noise_sigmas: float = 3.0  # line fits: noise standard deviations in the uncertainty
    min_points: int = 3  # fewest samples (or step windows) a slope may rest on
    min_r2: float = 0.9  # line fits: a non-clean slope must fit at least this well
    release_fraction: float = 0.10  # host memory still held after free, as a fraction
    priority: tuple[str, ...] = DEFAULT_PRIORITY
    # Signals that can show a mirror but never prove its absence, so they do not
    # decide a "clean" verdict: every component of the host's loss (a reader of
    # report schema 1.1, which knows no totals, honours this list too).
    blind: tuple[str, ...] = tuple(n for n in DEFAULT_PRIORITY if n not in DEFAULT_TOTALS)
    confidence: float = 0.95  # the least coverage of a step-window slope interval
    totals: tuple[str, ...] = DEFAULT_TOTALS
    # The machine's GPU kernel drivers (xe, i915): a component decides only where
    # one of them puts a mirror's pages (l0mem.estimate.signals.carries). None
    # known: any component that accounts for the host's loss.
    stacks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Reject thresholds that cannot classify anything."""
        if not 0.0 <= self.clean_threshold < self.mirror_threshold:
            raise ValueError(
                "analysis: need 0 <= clean_threshold < mirror_threshold, got "
                f"{self.clean_threshold} and {self.mirror_threshold}"
            )
        if self.max_uncertainty <= 0 or self.noise_sigmas <= 0:
            raise ValueError("analysis: max_uncertainty and noise_sigmas must be > 0")
        if self.min_points < 2:
            raise ValueError(f"analysis: min_points must be >= 2, got {self.min_points}")
        if not 0.0 <= self.min_r2 <= 1.0 or not 0.0 <= self.release_fraction <= 1.0:
            raise ValueError("analysis: min_r2 and release_fraction must lie in [0, 1]")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"analysis: confidence must lie in [0.5, 1), got {self.confidence}")
        if not self.priority:
            raise ValueError("analysis: priority must name at least one signal")

    def to_dict(self) -> dict[str, Any]:
        """Return the configuration as plain JSON data."""
        d = dataclasses.asdict(self)
        for key in _NAME_LISTS:
            d[key] = list(getattr(self, key))
        return d

    @classmethod
    def from_dict(cls, data: object, path: str = "analysis") -> AnalysisConfig:
        """Return the configuration held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            p = join(path, f.name)
            if f.name in _ADDED and f.name not in d:
                continue  # written before the field existed: its default
            v = field(d, f.name, path)
            if f.name in _NAME_LISTS:
                kw[f.name] = tuple(string(s, f"{p}[{i}]") for i, s in enumerate(array(v, p)))
            elif f.name == "min_points":
                kw[f.name] = integer(v, p)
            else:
                kw[f.name] = number(v, p)
        try:
            return cls(**kw)
        except ValueError as exc:
            raise fail(path, str(exc).removeprefix("analysis: ")) from None


_NAME_LISTS = ("priority", "blind", "totals", "stacks")
# Added in report schema 1.2 (step windows; stacks later in 1.2, optional).
_ADDED = frozenset({"confidence", "totals", "stacks"})


@dataclasses.dataclass(frozen=True)
class SignalFit:
    """One signal's memory cost against device memory: slope, its interval and the evidence.

    Slopes are MiB of memory per GiB of device memory (1024 is 1:1); costs are
    MiB relative to the reference with the signal's sense applied, so a
    positive number always means more memory used. ``method`` says how the
    slope was found: ``steps`` is the median of the step windows' ratios
    with a distribution-free interval of at least the configured confidence
    (:mod:`l0mem.estimate.steps`); ``line`` a least-squares line over the
    samples, for runs without step windows.
    """

    signal: str
    side: Side
    points: int  # samples (line) or step windows (steps) the slope rests on
    slope: float | None  # MiB per GiB; None when the data cannot define one
    intercept_mib: float | None
    r2: float | None  # line fits; None when the cost never varied
    noise_mib: float | None  # typical disturbance of one measurement, MiB
    residual_mib: float | None  # line fits: std of the residuals; None with < 3 points
    uncertainty: float | None  # MiB per GiB the slope may be off by (the wider side)
    span_gib: float  # range of device memory the fit covers
    peak_mib: float | None  # largest cost during allocation
    remaining_mib: float | None  # cost at the last sample after free
    method: Method = "line"
    low: float | None = None  # the slope's interval, MiB per GiB
    high: float | None = None
    coverage: float | None = None  # the interval's confidence
    rejected: tuple[int, ...] = ()  # step windows a neighbour disturbed, left out
    release_slope: float | None = None  # MiB per GiB given back per GiB freed (steps)
    kept_mib: float | None = None  # what the allocation windows took less what the frees gave back

    @property
    def ratio(self) -> float | None:
        """Return the slope as host bytes per device byte (1.0 is a full mirror)."""
        return None if self.slope is None else self.slope / 1024.0

    @property
    def interval(self) -> tuple[float, float] | None:
        """Return the slope's interval in MiB per GiB, or None."""
        if self.low is not None and self.high is not None:
            return (self.low, self.high)
        if self.slope is None or self.uncertainty is None:
            return None
        return (self.slope - self.uncertainty, self.slope + self.uncertainty)

    def to_dict(self) -> dict[str, Any]:
        """Return the fit as plain JSON data."""
        d = dataclasses.asdict(self)
        d["rejected"] = list(self.rejected)
        return d

    @classmethod
    def from_dict(cls, data: object, path: str = "fit") -> SignalFit:
        """Return the fit held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)

        def num(key: str) -> float | None:
            return opt_number(field(d, key, path), join(path, key))

        def later(key: str) -> float | None:  # fields of schema 1.2
            return opt_number(d.get(key), join(path, key))

        rejected = array(d.get("rejected", []), join(path, "rejected"))
        return cls(
            signal=string(field(d, "signal", path), join(path, "signal")),
            side=cast(Side, choice(field(d, "side", path), join(path, "side"), SIDES)),
            points=integer(field(d, "points", path), join(path, "points"), minimum=0),
            slope=num("slope"),
            intercept_mib=num("intercept_mib"),
            r2=num("r2"),
            noise_mib=num("noise_mib"),
            residual_mib=num("residual_mib"),
            uncertainty=num("uncertainty"),
            span_gib=number(field(d, "span_gib", path), join(path, "span_gib")),
            peak_mib=num("peak_mib"),
            remaining_mib=num("remaining_mib"),
            method=cast(Method, choice(d.get("method", "line"), join(path, "method"), METHODS)),
            low=later("low"),
            high=later("high"),
            coverage=later("coverage"),
            rejected=tuple(
                integer(v, f"{join(path, 'rejected')}[{i}]", minimum=0)
                for i, v in enumerate(rejected)
            ),
            release_slope=later("release_slope"),
            kept_mib=later("kept_mib"),
        )


@dataclasses.dataclass(frozen=True)
class NextSteps:
    """Why a run was inconclusive, from what it measured, and what would decide it."""

    text: str  # one or two sentences for the user
    signal: str | None  # the signal the noise was seen on
    noise_mib: float | None  # typical disturbance of one step window, MiB
    windows: int  # step windows (or samples) measured
    windows_needed: int | None  # windows that would decide at that noise; None: unknown
    size_needed_bytes: int | None  # a device size that would decide at that noise
    missing: dict[str, str]  # component signals this machine lacks -> why
    seconds_needed: float | None = (
        None  # more allocate/free cycles that would take, at the run's pace
    )

    def to_dict(self) -> dict[str, Any]:
        """Return the advice as plain JSON data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object, path: str = "next_steps") -> NextSteps:
        """Return the advice held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)

        def opt_int(key: str) -> int | None:
            v = field(d, key, path)
            return None if v is None else integer(v, join(path, key), minimum=0)

        return cls(
            text=string(field(d, "text", path), join(path, "text")),
            signal=opt_string(field(d, "signal", path), join(path, "signal")),
            noise_mib=opt_number(field(d, "noise_mib", path), join(path, "noise_mib")),
            windows=integer(field(d, "windows", path), join(path, "windows"), minimum=0),
            windows_needed=opt_int("windows_needed"),
            size_needed_bytes=opt_int("size_needed_bytes"),
            missing=str_map(field(d, "missing", path), join(path, "missing")),
            seconds_needed=opt_number(d.get("seconds_needed"), join(path, "seconds_needed")),
        )


@dataclasses.dataclass(frozen=True)
class SetupAnalysis:
    """The verdict on one run and the fits it rests on."""

    verdict: Verdict
    deciding_signal: str | None  # None when no signal was usable
    ratio: float | None  # host bytes per device byte by the deciding signal
    reason: str  # why this verdict and this signal, in one sentence
    host: list[SignalFit]
    device: list[SignalFit]
    passed_over: dict[str, str]  # prioritised signal -> why it did not decide
    released: bool | None  # host memory came back after free; None when unknown or clean
    vmrss_would_miss: bool  # VmRSS alone would have called this run clean
    max_device_bytes: int
    next_steps: NextSteps | None = None  # set when the verdict is inconclusive

    def fit(self, signal: str) -> SignalFit | None:
        """Return the host or device fit of ``signal``, or None."""
        return next((f for f in [*self.host, *self.device] if f.signal == signal), None)

    @property
    def slope(self) -> float | None:
        """Return the deciding signal's slope in MiB per GiB, or None."""
        fit = self.fit(self.deciding_signal) if self.deciding_signal else None
        return None if fit is None else fit.slope

    def to_dict(self) -> dict[str, Any]:
        """Return the analysis as plain JSON data."""
        return {
            "verdict": self.verdict,
            "deciding_signal": self.deciding_signal,
            "ratio": self.ratio,
            "reason": self.reason,
            "host": [f.to_dict() for f in self.host],
            "device": [f.to_dict() for f in self.device],
            "passed_over": dict(self.passed_over),
            "released": self.released,
            "vmrss_would_miss": self.vmrss_would_miss,
            "max_device_bytes": self.max_device_bytes,
            "next_steps": None if self.next_steps is None else self.next_steps.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "result") -> SetupAnalysis:
        """Return the analysis held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)

        def get(key: str) -> tuple[Any, str]:
            return field(d, key, path), join(path, key)

        raw_next = d.get("next_steps")
        return cls(
            verdict=cast(Verdict, choice(*get("verdict"), VERDICTS)),
            deciding_signal=opt_string(*get("deciding_signal")),
            ratio=opt_number(*get("ratio")),
            reason=string(*get("reason"), empty=True),
            host=items(*get("host"), SignalFit.from_dict),
            device=items(*get("device"), SignalFit.from_dict),
            passed_over=str_map(*get("passed_over")),
            released=opt_boolean(*get("released")),
            vmrss_would_miss=boolean(*get("vmrss_would_miss")),
            max_device_bytes=integer(*get("max_device_bytes"), minimum=0),
            next_steps=None
            if raw_next is None
            else NextSteps.from_dict(raw_next, join(path, "next_steps")),
        )


__all__ = [
    "DEFAULT_PRIORITY",
    "DEFAULT_TOTALS",
    "EDGES",
    "METHODS",
    "PHASES",
    "SIDES",
    "VERDICTS",
    "AnalysisConfig",
    "Edge",
    "Method",
    "NextSteps",
    "Phase",
    "Sample",
    "SetupAnalysis",
    "Side",
    "SignalFit",
    "Verdict",
]
