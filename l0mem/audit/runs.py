"""The parts of an audit report: set-up runs, with the estimation's samples and results.

Every class is a frozen dataclass with ``to_dict()`` (plain JSON data) and
``from_dict()`` (strict validation through :mod:`l0mem.jsonfields`);
:mod:`l0mem.audit.model` puts them together into the whole report. Samples,
analysis settings, fits and verdicts are the estimation's
(:mod:`l0mem.estimate.model`), importable from here too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, cast, get_args

from l0mem.estimate.model import (
    Sample,
    SetupAnalysis,
)
from l0mem.jsonfields import (
    boolean,
    choice,
    fail,
    field,
    integer,
    items,
    join,
    json_obj,
    obj,
    opt_string,
    str_map,
    string,
)

Backend = Literal["l0", "sycl"]
Status = Literal["ok", "skipped", "stopped-early", "interrupted", "failed"]

BACKENDS: tuple[str, ...] = get_args(Backend)
STATUSES: tuple[str, ...] = get_args(Status)

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
