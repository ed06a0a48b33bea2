"""The audit's data: samples, set-up runs, their analysis, and the whole report.

Every class is a frozen dataclass with ``to_dict()`` (plain JSON data) and
``from_dict()`` (strict validation). Malformed input raises one
:class:`ReportFormatError` whose one-line message names the bad field path,
e.g. ``runs[2].samples[0].phase: expected one of 'idle', 'alloc', 'freed', got 'x'``.
Keys a reader does not know are ignored, so a minor schema revision can add
optional fields without breaking older readers (see docs/report-schema.md).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping
from typing import Any, Literal, cast, get_args

SCHEMA_NAME = "l0mem.audit"
SCHEMA_MAJOR = 1
# 1.1 added the optional run fields host_memory, simulated and unavailable.
SCHEMA_MINOR = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"

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


class ReportFormatError(ValueError):
    """A report (or part of one) is malformed; the message is one line naming the field."""


# ---------------------------------------------------------------- validation helpers


def _fail(path: str, what: str) -> ReportFormatError:
    return ReportFormatError(f"{path or '<root>'}: {what}")


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _obj(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected an object, got {_kind(value)}")
    return cast(Mapping[str, Any], value)


def _field(data: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in data:
        raise _fail(_join(path, key), "missing field")
    return data[key]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _str(value: object, path: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {_kind(value)}")
    if not empty and not value:
        raise _fail(path, "must not be empty")
    return value


def _opt_str(value: object, path: str) -> str | None:
    return None if value is None else _str(value, path)


def _int(value: object, path: str, *, minimum: int | None = None) -> int:
    # bool is an int subclass; true/false in a byte count is a bug, not a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise _fail(path, f"must be >= {minimum}, got {value}")
    return value


def _num(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise _fail(path, f"must be finite, got {value}")
    return float(value)


def _opt_num(value: object, path: str) -> float | None:
    return None if value is None else _num(value, path)


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true or false, got {_kind(value)}")
    return value


def _opt_bool(value: object, path: str) -> bool | None:
    return None if value is None else _bool(value, path)


def _choice(value: object, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise _fail(path, f"expected one of {allowed}, got {value!r}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {_kind(value)}")
    return value


def _str_map(value: object, path: str) -> dict[str, str]:
    data = _obj(value, path)
    return {k: _str(v, f"{path}[{k!r}]", empty=True) for k, v in data.items()}


def _int_map(value: object, path: str) -> dict[str, int]:
    data = _obj(value, path)
    return {_str(k, path): _int(v, f"{path}[{k!r}]", minimum=0) for k, v in data.items()}


def _json_value(value: object, path: str) -> Any:
    """Check that ``value`` is plain JSON data (free-form parts of the report)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return _num(value, path)
    if isinstance(value, list):
        return [_json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _fail(path, f"object keys must be strings, got {_kind(k)}")
            out[k] = _json_value(v, f"{path}[{k!r}]")
        return out
    raise _fail(path, f"not JSON data: {_kind(value)}")


def _json_obj(value: object, path: str) -> dict[str, Any]:
    return cast(dict[str, Any], _json_value(_obj(value, path), path))


def _items(value: object, path: str, parse: Any) -> list[Any]:
    return [parse(item, f"{path}[{i}]") for i, item in enumerate(_list(value, path))]


# ---------------------------------------------------------------- data classes


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
        d = _obj(data, path)
        return cls(
            t=_num(_field(d, "t", path), _join(path, "t")),
            phase=cast(Phase, _choice(_field(d, "phase", path), _join(path, "phase"), PHASES)),
            device_bytes=_int(
                _field(d, "device_bytes", path), _join(path, "device_bytes"), minimum=0
            ),
            values=_int_map(_field(d, "values", path), _join(path, "values")),
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
        d = _obj(data, path)
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            p = _join(path, f.name)
            v = _field(d, f.name, path)
            if f.name in ("priority", "blind"):
                kw[f.name] = tuple(_str(s, f"{p}[{i}]") for i, s in enumerate(_list(v, p)))
            elif f.name == "min_points":
                kw[f.name] = _int(v, p)
            else:
                kw[f.name] = _num(v, p)
        try:
            return cls(**kw)
        except ValueError as exc:
            raise _fail(path, str(exc).removeprefix("analysis: ")) from None


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
        d = _obj(data, path)

        def num(key: str) -> float | None:
            return _opt_num(_field(d, key, path), _join(path, key))

        return cls(
            signal=_str(_field(d, "signal", path), _join(path, "signal")),
            side=cast(Side, _choice(_field(d, "side", path), _join(path, "side"), SIDES)),
            points=_int(_field(d, "points", path), _join(path, "points"), minimum=0),
            slope=num("slope"),
            intercept_mib=num("intercept_mib"),
            r2=num("r2"),
            noise_mib=num("noise_mib"),
            residual_mib=num("residual_mib"),
            uncertainty=num("uncertainty"),
            span_gib=_num(_field(d, "span_gib", path), _join(path, "span_gib")),
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
        d = _obj(data, path)

        def get(key: str) -> tuple[Any, str]:
            return _field(d, key, path), _join(path, key)

        return cls(
            verdict=cast(Verdict, _choice(*get("verdict"), VERDICTS)),
            deciding_signal=_opt_str(*get("deciding_signal")),
            ratio=_opt_num(*get("ratio")),
            reason=_str(*get("reason"), empty=True),
            host=_items(*get("host"), SignalFit.from_dict),
            device=_items(*get("device"), SignalFit.from_dict),
            passed_over=_str_map(*get("passed_over")),
            released=_opt_bool(*get("released")),
            vmrss_would_miss=_bool(*get("vmrss_would_miss")),
            max_device_bytes=_int(*get("max_device_bytes"), minimum=0),
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

    @property
    def key(self) -> tuple[str, str | None]:
        """Return (setup, remedy): what identifies this run within and across reports."""
        return (self.setup, self.remedy)

    @property
    def label(self) -> str:
        """Return the set-up name with the remedy in brackets when there is one."""
        return self.setup if self.remedy is None else f"{self.setup} [{self.remedy}]"

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
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "run", simulated: bool = False) -> SetupRun:
        """Return the run held in ``data``; raise ReportFormatError if malformed.

        ``simulated`` is what a report older than schema 1.1 (no per-run flag) implies.
        """
        d = _obj(data, path)

        def get(key: str) -> tuple[Any, str]:
            return _field(d, key, path), _join(path, key)

        status = cast(Status, _choice(*get("status"), STATUSES))
        reason = _opt_str(*get("reason"))
        if status in _NEEDS_REASON and reason is None:
            raise _fail(_join(path, "reason"), f"a {status} run must give a reason")
        raw_result = get("result")
        devices = _items(*get("devices"), _json_obj)

        def optional(key: str, default: Any, parse: Any) -> Any:
            # Fields added in schema 1.1: reports written before it lack them.
            return default if key not in d else parse(d[key], _join(path, key))

        return cls(
            setup=_str(*get("setup")),
            backend=cast(Backend, _choice(*get("backend"), BACKENDS)),
            status=status,
            reason=reason,
            env=_str_map(*get("env")),
            remedy=_opt_str(*get("remedy")),
            devices=devices,
            step_bytes=_int(*get("step_bytes"), minimum=0),
            target_bytes=_int(*get("target_bytes"), minimum=0),
            samples=_items(*get("samples"), Sample.from_dict),
            result=None if raw_result[0] is None else SetupAnalysis.from_dict(*raw_result),
            host_memory=optional("host_memory", _cpu_device(devices), _bool),
            simulated=optional("simulated", simulated, _bool),
            unavailable=optional("unavailable", {}, _str_map),
        )


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """Everything one ``l0mem audit`` produced: machine fingerprint, options and runs."""

    l0mem_version: str
    created: str  # ISO 8601, UTC
    fingerprint: dict[str, Any]  # host / devices / loader / sycl parts; "simulated": bool
    options: dict[str, Any]
    runs: list[SetupRun]
    complete: bool  # False for partial reports (Ctrl-C, safety guard)
    analysis: AnalysisConfig | None = None  # the configuration the results were made with
    schema: str = SCHEMA

    @property
    def simulated(self) -> bool:
        """Return True when the numbers come from the simulated driver, not hardware."""
        return self.fingerprint.get("simulated") is True

    def run(self, setup: str, remedy: str | None = None) -> SetupRun | None:
        """Return the run of ``setup`` (under ``remedy``), or None."""
        return next((r for r in self.runs if r.key == (setup, remedy)), None)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON data."""
        return {
            "schema": self.schema,
            "l0mem_version": self.l0mem_version,
            "created": self.created,
            "complete": self.complete,
            "fingerprint": self.fingerprint,
            "options": self.options,
            "analysis": None if self.analysis is None else self.analysis.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "") -> AuditReport:
        """Return the report held in ``data``; raise ReportFormatError if malformed."""
        d = _obj(data, path)
        schema = _str(_field(d, "schema", path), _join(path, "schema"))
        major, _ = parse_schema(schema, _join(path, "schema"))
        if major != SCHEMA_MAJOR:
            raise _fail(
                _join(path, "schema"),
                f"unsupported schema version {schema!r} (this l0mem reads {SCHEMA_NAME}/"
                f"{SCHEMA_MAJOR}.x)",
            )

        def get(key: str) -> tuple[Any, str]:
            return _field(d, key, path), _join(path, key)

        created = _str(*get("created"))
        check_utc_timestamp(created, get("created")[1])
        fingerprint = _json_obj(*get("fingerprint"))
        # Before schema 1.1 only the report said "simulated", and only Level Zero
        # runs could be: the SYCL runtime never drives the simulated driver.
        old_sim = fingerprint.get("simulated") is True

        def run(item: object, p: str) -> SetupRun:
            backend = item.get("backend") if isinstance(item, Mapping) else None
            return SetupRun.from_dict(item, p, simulated=old_sim and backend == "l0")

        runs = _items(*get("runs"), run)
        seen: set[tuple[str, str | None]] = set()
        for i, r in enumerate(runs):
            if r.key in seen:
                raise _fail(f"{_join(path, 'runs')}[{i}]", f"second run of {r.label!r}")
            seen.add(r.key)
        raw_analysis = get("analysis")
        return cls(
            schema=schema,
            l0mem_version=_str(*get("l0mem_version")),
            created=created,
            complete=_bool(*get("complete")),
            fingerprint=fingerprint,
            options=_json_obj(*get("options")),
            analysis=None if raw_analysis[0] is None else AnalysisConfig.from_dict(*raw_analysis),
            runs=runs,
        )


def parse_schema(schema: str, path: str = "schema") -> tuple[int, int]:
    """Return (major, minor) of an ``l0mem.audit/<major>[.<minor>]`` schema string."""
    name, sep, version = schema.partition("/")
    if name != SCHEMA_NAME or not sep:
        raise _fail(path, f"not an l0mem audit report (schema {schema!r}, expected {SCHEMA!r})")
    major, _, minor = version.partition(".")
    if not major.isdigit() or (minor and not minor.isdigit()):
        raise _fail(path, f"malformed schema version in {schema!r}")
    return int(major), int(minor or 0)


def check_utc_timestamp(text: str, path: str = "created") -> datetime.datetime:
    """Return the datetime of an ISO 8601 UTC timestamp; raise ReportFormatError otherwise."""
    try:
        # fromisoformat on Python 3.10 does not take the "Z" suffix.
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _fail(path, f"not an ISO 8601 timestamp: {text!r}") from None
    if when.utcoffset() != datetime.timedelta(0):
        raise _fail(path, f"timestamp must be in UTC: {text!r}")
    return when


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC timestamp (second resolution)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")
