"""The parts of an audit report: samples, analysis settings and fits, verdicts, set-up runs.

Every class is a frozen dataclass with ``to_dict()`` (plain JSON data) and
``from_dict()`` (strict validation through :mod:`l0mem.audit.jsonfields`);
:mod:`l0mem.audit.model` puts them together into the whole report.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, cast, get_args

from l0mem.audit.jsonfields import (
    array,
    boolean,
    choice,
    fail,
    field,
    int_map,
    integer,
    items,
    join,
    json_obj,
    number,
    obj,
    opt_boolean,
    opt_number,
    opt_string,
    str_map,
    string,
)

Phase = Literal["idle", "alloc", "freed"]
Backend = Literal["l0", "sycl"]
Status = Literal["ok", "skipped", "stopped-early", "interrupted", "failed"]
Verdict = Literal["mirror", "partial", "clean", "inconclusive"]
Side = Literal["host", "device"]

PHASES: tuple[str, ...] = get_args(Phase)
BACKENDS: tuple[str, ...] = get_args(Backend)
STATUSES: tuple[str, ...] = get_args(Status)
VERDICTS: tuple[str, ...] = get_args(Verdict)
SIDES: tuple[str, ...] = get_args(Side)

# How the reasons that decide an audit's exit code begin. Each is spelt here only:
# the safety floor refusing a step (l0mem.audit.guard), an allocation refused for
# lack of device memory (l0mem.audit.child), a discovery child that failed or hung
# (l0mem.audit.process).
REASON_GUARD = "safety guard:"
REASON_DEVICE_FULL = "device memory ran out"
REASON_DISCOVERY = "device discovery"
# A child a signal stopped: "interrupted (SIGINT)" (the user), "stopped by SIGTERM".
REASON_INTERRUPTED = "interrupted ("
REASON_STOPPED = "stopped by "

# Statuses that must say why (a skip or a failure without a reason is useless in a report).
_NEEDS_REASON = ("skipped", "failed")

# Signal priority for the verdict: direct GPU page accounting first, RSS last
# because TTM pages never show in a process's RSS. ``drm.all.host.<key>`` is the
# sum over every DRM client and host-backed region (see l0mem.audit.analysis).
DEFAULT_PRIORITY: tuple[str, ...] = (
    "meminfo.GPUActive",
    "vmstat.nr_gpu_active",
    "cgroup.gpu_active",
    "host.available",
    "meminfo.MemAvailable",
    "cgroup.memory.current",
    "drm.all.host.resident",
    "drm.all.host.total",
    "meminfo.MemFree",
    "proc.VmRSS",
)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One snapshot of every signal, taken at ``t`` seconds into the set-up run."""

    t: float
    phase: Phase
    device_bytes: int  # device memory allocated so far by the set-up
    values: dict[str, int]  # signal name -> bytes (absent signal: absent key)

    def to_dict(self) -> dict[str, Any]:
        """Return the sample as plain JSON data."""
        return {
            "t": self.t,
            "phase": self.phase,
            "device_bytes": self.device_bytes,
            "values": dict(self.values),
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "sample") -> Sample:
        """Return the sample held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)
        return cls(
            t=number(field(d, "t", path), join(path, "t")),
            phase=cast(Phase, choice(field(d, "phase", path), join(path, "phase"), PHASES)),
            device_bytes=integer(
                field(d, "device_bytes", path), join(path, "device_bytes"), minimum=0
            ),
            values=int_map(field(d, "values", path), join(path, "values")),
        )


@dataclasses.dataclass(frozen=True)
class AnalysisConfig:
    """Thresholds and signal priority that turn fitted slopes into verdicts."""

    mirror_threshold: float = 0.75  # host/device ratio at or above this: mirror
    clean_threshold: float = 0.10  # below this: clean; in between: partial
    max_uncertainty: float = 0.05  # widest tolerated slope uncertainty, as a ratio
    noise_sigmas: float = 3.0  # how many noise standard deviations make the uncertainty
    min_points: int = 3  # fewest alloc samples a fit may rest on
    min_r2: float = 0.9  # a non-clean slope must fit at least this well
    release_fraction: float = 0.10  # host memory still held after free, as a fraction
    priority: tuple[str, ...] = DEFAULT_PRIORITY
    # Signals blind to driver-owned host pages: they can show a mirror but never
    # prove its absence, so they do not decide a "clean" verdict.
    blind: tuple[str, ...] = ("proc.VmRSS",)

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
        if not self.priority:
            raise ValueError("analysis: priority must name at least one signal")

    def to_dict(self) -> dict[str, Any]:
        """Return the configuration as plain JSON data."""
        d = dataclasses.asdict(self)
        d["priority"] = list(self.priority)
        d["blind"] = list(self.blind)
        return d

    @classmethod
    def from_dict(cls, data: object, path: str = "analysis") -> AnalysisConfig:
        """Return the configuration held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            p = join(path, f.name)
            v = field(d, f.name, path)
            if f.name in ("priority", "blind"):
                kw[f.name] = tuple(string(s, f"{p}[{i}]") for i, s in enumerate(array(v, p)))
            elif f.name == "min_points":
                kw[f.name] = integer(v, p)
            else:
                kw[f.name] = number(v, p)
        try:
            return cls(**kw)
        except ValueError as exc:
            raise fail(path, str(exc).removeprefix("analysis: ")) from None


@dataclasses.dataclass(frozen=True)
class SignalFit:
    """Least-squares fit of one signal's memory cost against device bytes allocated.

    Slopes are MiB of memory per GiB of device memory (1024 is 1:1); costs are
    MiB relative to the idle reference with the signal's sense applied, so a
    positive number always means more memory used.
    """

    signal: str
    side: Side
    points: int  # alloc samples the fit rests on
    slope: float | None  # MiB per GiB; None when the data cannot define one
    intercept_mib: float | None
    r2: float | None  # None when the cost never varied
    noise_mib: float | None  # std of the cost over the idle samples; None with < 2
    residual_mib: float | None  # std of the fit residuals; None with < 3 points
    uncertainty: float | None  # MiB per GiB the slope may be off by
    span_gib: float  # range of device memory the fit covers
    peak_mib: float | None  # largest cost during allocation
    remaining_mib: float | None  # cost at the last sample after free

    @property
    def ratio(self) -> float | None:
        """Return the slope as host bytes per device byte (1.0 is a full mirror)."""
        return None if self.slope is None else self.slope / 1024.0

    def to_dict(self) -> dict[str, Any]:
        """Return the fit as plain JSON data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object, path: str = "fit") -> SignalFit:
        """Return the fit held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)

        def num(key: str) -> float | None:
            return opt_number(field(d, key, path), join(path, key))

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
        )


@dataclasses.dataclass(frozen=True)
class SetupAnalysis:
    """The verdict on one set-up run and the fits it rests on."""

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
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "result") -> SetupAnalysis:
        """Return the analysis held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)

        def get(key: str) -> tuple[Any, str]:
            return field(d, key, path), join(path, key)

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
        )


def _cpu_device(devices: list[dict[str, Any]]) -> bool:
    """Return True when a run's devices include a CPU (what reports before 1.1 imply)."""
    return any(d.get("device_type") == "cpu" or d.get("type") == "CPU" for d in devices)


@dataclasses.dataclass(frozen=True)
class SetupRun:
    """One set-up measured in its own child process (or skipped, or failed)."""

    setup: str  # l0, l0-multi, l0-peer-resident, l0-dmabuf, sycl, sycl-single, ...
    backend: Backend
    status: Status
    reason: str | None  # why skipped, stopped, interrupted or failed
    env: dict[str, str]  # extra environment of a remedy run; {} otherwise
    remedy: str | None  # remedy name, None for the plain set-up
    devices: list[dict[str, Any]]  # descriptions of the devices used
    step_bytes: int
    target_bytes: int
    samples: list[Sample]
    result: SetupAnalysis | None = None
    # Device memory is host memory (a CPU or integrated device): about 1:1 is expected.
    host_memory: bool = False
    simulated: bool = False  # measured on the simulated Level Zero driver, not hardware
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)  # signal -> why absent
    # Allocations whose fill did not read back: untouched memory cannot show a mirror.
    untouched_allocations: int = 0

    @property
    def key(self) -> tuple[str, str | None]:
        """Return (setup, remedy): what identifies this run within and across reports."""
        return (self.setup, self.remedy)

    @property
    def label(self) -> str:
        """Return the set-up name with the remedy in brackets when there is one."""
        return self.setup if self.remedy is None else f"{self.setup} [{self.remedy}]"

    @property
    def no_room(self) -> bool:
        """Return True when the run stopped because no host or device memory was left for a step."""
        why = self.reason or ""
        return self.status == "stopped-early" and why.startswith((REASON_GUARD, REASON_DEVICE_FULL))

    @property
    def stop_signal(self) -> str | None:
        """Return the name of the signal that stopped the run (``SIGTERM``), or None."""
        why = self.reason or ""
        if why.startswith(REASON_INTERRUPTED):
            return why[len(REASON_INTERRUPTED) :].split(")", 1)[0]
        if why.startswith(REASON_STOPPED):
            return why[len(REASON_STOPPED) :].split(maxsplit=1)[0].rstrip(";,")
        return None

    @property
    def discovery_failed(self) -> bool:
        """Return True when the run was skipped because discovering its devices failed."""
        return self.status == "skipped" and (self.reason or "").startswith(REASON_DISCOVERY + " (")

    @property
    def mirrors(self) -> bool:
        """Return True when the verdict is mirror or partial on memory that is not host memory."""
        # On a CPU or integrated device 1:1 is the expected positive control, not a mirror.
        verdict = None if self.result is None else self.result.verdict
        return verdict in ("mirror", "partial") and not self.host_memory

    def to_dict(self) -> dict[str, Any]:
        """Return the run as plain JSON data."""
        return {
            "setup": self.setup,
            "backend": self.backend,
            "status": self.status,
            "reason": self.reason,
            "env": dict(self.env),
            "remedy": self.remedy,
            "devices": [dict(d) for d in self.devices],
            "step_bytes": self.step_bytes,
            "target_bytes": self.target_bytes,
            "samples": [s.to_dict() for s in self.samples],
            "result": None if self.result is None else self.result.to_dict(),
            "host_memory": self.host_memory,
            "simulated": self.simulated,
            "unavailable": dict(self.unavailable),
            "untouched_allocations": self.untouched_allocations,
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "run", simulated: bool = False) -> SetupRun:
        """Return the run held in ``data``; raise ReportFormatError if malformed.

        ``simulated`` is what a report older than schema 1.1 (no per-run flag) implies.
        """
        d = obj(data, path)

        def get(key: str) -> tuple[Any, str]:
            return field(d, key, path), join(path, key)

        status = cast(Status, choice(*get("status"), STATUSES))
        reason = opt_string(*get("reason"))
        if status in _NEEDS_REASON and reason is None:
            raise fail(join(path, "reason"), f"a {status} run must give a reason")
        raw_result = get("result")
        devices = items(*get("devices"), json_obj)

        def optional(key: str, default: Any, parse: Any) -> Any:
            # Fields added in schema 1.1: reports written before it lack them.
            return default if key not in d else parse(d[key], join(path, key))

        return cls(
            setup=string(*get("setup")),
            backend=cast(Backend, choice(*get("backend"), BACKENDS)),
            status=status,
            reason=reason,
            env=str_map(*get("env")),
            remedy=opt_string(*get("remedy")),
            devices=devices,
            step_bytes=integer(*get("step_bytes"), minimum=0),
            target_bytes=integer(*get("target_bytes"), minimum=0),
            samples=items(*get("samples"), Sample.from_dict),
            result=None if raw_result[0] is None else SetupAnalysis.from_dict(*raw_result),
            host_memory=optional("host_memory", _cpu_device(devices), boolean),
            simulated=optional("simulated", simulated, boolean),
            unavailable=optional("unavailable", {}, str_map),
            untouched_allocations=optional(
                "untouched_allocations", 0, lambda v, p: integer(v, p, minimum=0)
            ),
        )
