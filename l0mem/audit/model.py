"""The audit's data: samples, set-up runs, their analysis, and the whole report.

Every class is a frozen dataclass with ``to_dict()`` (plain JSON data) and
``from_dict()`` (strict validation). Malformed input raises one
:class:`ReportFormatError` whose one-line message names the bad field path,
e.g. ``runs[2].samples[0].phase: expected one of 'idle', 'alloc', 'freed', got 'x'``.
Keys a reader does not know are ignored, so a minor schema revision can add
optional fields without breaking older readers (see docs/report-schema.md).

The report and its schema version are here; its parts (:class:`Sample`,
:class:`SetupRun`, the analysis classes) are :mod:`l0mem.audit.runs` and the
field checks :mod:`l0mem.jsonfields`, all importable from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from l0mem.audit.runs import BACKENDS, STATUSES, Backend, SetupRun, Status
from l0mem.estimate.model import (
    DEFAULT_PRIORITY,
    PHASES,
    SIDES,
    VERDICTS,
    AnalysisConfig,
    NextSteps,
    Phase,
    Sample,
    SetupAnalysis,
    Side,
    SignalFit,
    Verdict,
)
from l0mem.jsonfields import (
    ReportFormatError,
    array,
    boolean,
    check_utc_timestamp,
    fail,
    field,
    items,
    join,
    json_obj,
    obj,
    opt_boolean,
    opt_string,
    str_map,
    string,
    utc_now,
)

# "none": a run skipped before it had a device measured on nothing.
Platform = Literal["hardware", "simulator", "no-hardware", "none"]


def _on_gpu_driver(run: SetupRun) -> bool:
    """Return True when a run used a Level Zero device or a SYCL GPU (not a CPU device)."""
    return run.backend == "l0" or any(d.get("device_type") == "gpu" for d in run.devices)


SCHEMA_NAME = "l0mem.audit"
SCHEMA_MAJOR = 1
# 1.1 added the optional run fields host_memory, simulated and unavailable; 1.2
# the step windows (samples' step and edge), the fits' intervals and the advice
# of an inconclusive result (next_steps).
SCHEMA_MINOR = 2
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"


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
    # What each remedy costs peer copies (l0mem.audit.costs.RemedyCost.to_dict()); optional.
    remedy_costs: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def simulated(self) -> bool:
        """Return True when the numbers come from the simulated driver, not hardware."""
        return self.fingerprint.get("simulated") is True

    @property
    def no_hardware(self) -> str | None:
        """Return why no GPU executed the work (Intel's driver in a no-hardware mode), or None.

        Decided when the report was made, from the driver environment in the
        fingerprint (:func:`l0mem.driverenv.no_hardware_reason`); reports made
        before l0mem recorded it have none.
        """
        reason = self.fingerprint.get("no_hardware")
        return reason if isinstance(reason, str) and reason else None

    @property
    def platform(self) -> Platform:
        """Return what the numbers come from: "simulator", "no-hardware" or "hardware"."""
        if self.simulated:
            return "simulator"
        return "no-hardware" if self.no_hardware else "hardware"

    def run_platform(self, run: SetupRun) -> Platform:
        """Return what one run measured on: the simulator, a driver without hardware, hardware, or none."""
        if run.status == "skipped" and not run.devices:
            return "none"
        if run.simulated:
            return "simulator"
        if self.no_hardware and _on_gpu_driver(run):
            return "no-hardware"
        return "hardware"

    @property
    def unmeasured(self) -> str | None:
        """Return why the report holds no measured set-up (no run, or every one skipped), else None.

        An audit whose every device discovery failed writes ``"runs": []``
        (exit 6); one whose every set-up was skipped, only skipped runs (exit 3).
        """
        if not self.runs:
            return 'its "runs" is empty: the audit measured nothing'
        if all(r.status == "skipped" for r in self.runs):
            return "every set-up in it was skipped"
        return None

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
            "remedy_costs": [dict(c) for c in self.remedy_costs],
        }

    @classmethod
    def from_dict(cls, data: object, path: str = "") -> AuditReport:
        """Return the report held in ``data``; raise ReportFormatError if malformed."""
        d = obj(data, path)
        schema = string(field(d, "schema", path), join(path, "schema"))
        major, _ = parse_schema(schema, join(path, "schema"))
        if major != SCHEMA_MAJOR:
            raise fail(
                join(path, "schema"),
                f"unsupported schema version {schema!r} (this l0mem reads {SCHEMA_NAME}/"
                f"{SCHEMA_MAJOR}.x)",
            )

        def get(key: str) -> tuple[Any, str]:
            return field(d, key, path), join(path, key)

        created = string(*get("created"))
        check_utc_timestamp(created, get("created")[1])
        fingerprint = check_fingerprint(json_obj(*get("fingerprint")), get("fingerprint")[1])
        # Before schema 1.1 only the report said "simulated", and only Level Zero
        # runs could be: the SYCL runtime never drives the simulated driver.
        old_sim = fingerprint.get("simulated") is True

        def run(item: object, p: str) -> SetupRun:
            backend = item.get("backend") if isinstance(item, Mapping) else None
            return SetupRun.from_dict(item, p, simulated=old_sim and backend == "l0")

        runs = items(*get("runs"), run)
        seen: set[tuple[str, str | None]] = set()
        for i, r in enumerate(runs):
            if r.key in seen:
                raise fail(f"{join(path, 'runs')}[{i}]", f"second run of {r.label!r}")
            seen.add(r.key)
        raw_analysis = get("analysis")
        return cls(
            schema=schema,
            l0mem_version=string(*get("l0mem_version")),
            created=created,
            complete=boolean(*get("complete")),
            fingerprint=fingerprint,
            options=json_obj(*get("options")),
            analysis=None if raw_analysis[0] is None else AnalysisConfig.from_dict(*raw_analysis),
            runs=runs,
            remedy_costs=items(d.get("remedy_costs", []), join(path, "remedy_costs"), json_obj),
        )


def parse_schema(schema: str, path: str = "schema") -> tuple[int, int]:
    """Return (major, minor) of an ``l0mem.audit/<major>[.<minor>]`` schema string."""
    name, sep, version = schema.partition("/")
    if name != SCHEMA_NAME or not sep:
        raise fail(path, f"not an l0mem audit report (schema {schema!r}, expected {SCHEMA!r})")
    major, _, minor = version.partition(".")
    # Digits only (str.isdigit takes other scripts' digits too) and few of them.
    if not (major.isascii() and major.isdigit()) or (minor and not (minor.isascii() and minor.isdigit())):
        raise fail(path, f"malformed schema version in {schema[:80]!r}")
    if len(major) > 6 or len(minor) > 6:
        raise fail(path, f"schema version out of range in {schema[:80]!r}")
    return int(major), int(minor or 0)


def check_fingerprint(fp: dict[str, Any], path: str = "fingerprint") -> dict[str, Any]:
    """Return ``fp`` after checking the type of every fingerprint field l0mem reads.

    Every field is optional (older reports, other machines); one that is there
    has its documented type (docs/report-schema.md), or ReportFormatError.
    """

    def part(key: str) -> Mapping[str, Any]:
        value = fp.get(key)
        return {} if value is None else obj(value, join(path, key))

    def each(parent: Mapping[str, Any], key: str, where: str, check: Any) -> None:
        if parent.get(key) is not None:
            check(parent[key], join(where, key))

    def opt_str_map(value: object, where: str) -> None:
        for k, v in obj(value, where).items():
            opt_string(v, f"{where}[{k!r}]")

    host, where = part("host"), join(path, "host")
    for key in ("kernel_release", "machine_id", "machine"):
        each(host, key, where, opt_string)
    each(host, "gpu_modules", where, opt_str_map)
    if host.get("packages") is not None:
        for manager, names in obj(host["packages"], join(where, "packages")).items():
            opt_str_map(names, f"{join(where, 'packages')}[{manager!r}]")
    each(part("compute_runtime"), "driver_versions", join(path, "compute_runtime"),
         lambda v, p: [opt_string(x, f"{p}[{i}]") for i, x in enumerate(array(v, p))])  # fmt: skip
    loader = part("loader")
    if loader.get("components") is not None:
        for i, c in enumerate(array(loader["components"], join(path, "loader.components"))):
            item = obj(c, f"{join(path, 'loader.components')}[{i}]")
            for key in ("name", "version"):
                each(item, key, f"{join(path, 'loader.components')}[{i}]", opt_string)
    each(part("sycl"), "runtime", join(path, "sycl"), opt_str_map)
    if fp.get("environment") is not None:
        str_map(fp["environment"], join(path, "environment"))
    each(fp, "simulated", path, opt_boolean)
    each(fp, "no_hardware", path, opt_string)
    return fp


def plain_run(
    setup: str,
    *,
    samples: list[Sample] | None = None,
    result: SetupAnalysis | None = None,
    simulated: bool = False,
    unavailable: dict[str, str] | None = None,
) -> SetupRun:
    """Return an "ok" run of ``setup`` that is no audit set-up's: a watched workload's."""
    return SetupRun(
        setup=setup,
        backend="l0",
        status="ok",
        reason=None,
        env={},
        remedy=None,
        devices=[],
        step_bytes=0,
        target_bytes=0,
        samples=samples or [],
        result=result,
        simulated=simulated,
        unavailable=unavailable or {},
    )


__all__ = [
    "BACKENDS",
    "DEFAULT_PRIORITY",
    "PHASES",
    "SCHEMA",
    "SCHEMA_MAJOR",
    "SCHEMA_MINOR",
    "SCHEMA_NAME",
    "SIDES",
    "STATUSES",
    "VERDICTS",
    "AnalysisConfig",
    "AuditReport",
    "Backend",
    "NextSteps",
    "Phase",
    "Platform",
    "ReportFormatError",
    "Sample",
    "SetupAnalysis",
    "SetupRun",
    "Side",
    "SignalFit",
    "Status",
    "Verdict",
    "check_utc_timestamp",
    "parse_schema",
    "plain_run",
    "utc_now",
]
