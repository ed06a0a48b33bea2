"""Run the audit: discover devices, run each set-up in a fresh child process, analyse.

Every experiment runs in its own ``python -m l0mem.audit.child`` process, so
an OOM kill or a driver crash costs one set-up, not the tool. Results come
back as JSON lines (no pickle), one line per sample as it is taken, so the
data survives a crash of the child. The child processes and discovery are
:mod:`l0mem.audit.process`, one set-up's run under the safety guard is
:mod:`l0mem.audit.execute`; this module plans the set-ups, runs them (then
the remedies for those that mirrored) and assembles the report.

Cancelling (``cancel`` event set, or KeyboardInterrupt) forwards SIGINT to the
running child, waits for it to free its device memory, and raises
:class:`AuditInterrupted` carrying the partial report (``complete=False``) and
the signal that cancelled (a :class:`CancelEvent` remembers it; SIGINT
otherwise). Nothing here prints; progress goes to the ``progress`` callback.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Callable
from typing import Any, Literal

from l0mem import __version__
from l0mem.audit.analysis import analyze_report, analyze_run
from l0mem.audit.costs import collect as collect_costs
from l0mem.audit.execute import run_setup, skipped_run
from l0mem.audit.guard import Guard
from l0mem.audit.model import AuditReport, Sample, SetupRun, utc_now
from l0mem.audit.planning import plan_audit
from l0mem.audit.process import (
    CHILD_MODULE,
    CancelEvent,
    Cancelled,
    cancel_signal,
    discover,
    request_cancel,
    signal_name,
    silence_timeout,
)
from l0mem.audit.remedies import KNOWN_REMEDIES, Remedy, custom_remedy, remedies_for
from l0mem.audit.runs import REASON_DISCOVERY
from l0mem.audit.setups import AuditOptions, Inventory, NoDeviceError, SetupPlan
from l0mem.driverenv import no_hardware_reason
from l0mem.estimate import DEFAULT_CONFIG, AnalysisConfig, for_stacks


class DiscoveryError(RuntimeError):
    """No device to audit because a discovery child failed (a device lost while listing).

    A driver failure like any other (the CLI's exit 6), not a machine without devices.
    ``report`` is the audit's report all the same (no set-up run, ``complete``
    false, the machine's fingerprint), for the files the user asked for.
    """

    def __init__(self, message: str, report: AuditReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class AuditInterrupted(KeyboardInterrupt):
    """The audit was interrupted by ``signum``; ``report`` holds what was measured (``complete=False``)."""

    def __init__(self, report: AuditReport, signum: int = signal.SIGINT) -> None:
        super().__init__(f"the audit was interrupted ({signal_name(signum)})")
        self.report = report
        self.signum = int(signum)


@dataclasses.dataclass(frozen=True)
class RunEvent:
    """Progress of the audit, passed to the ``progress`` callback."""

    kind: Literal["plan", "start", "sample", "end"]
    plans: tuple[SetupPlan, ...] = ()  # kind "plan": the set-ups about to run
    plan: SetupPlan | None = None  # kinds start, sample, end
    sample: Sample | None = None  # kind "sample"
    run: SetupRun | None = None  # kind "end"


Progress = Callable[[RunEvent], None]


def build_fingerprint(inventory: Inventory) -> dict[str, Any]:
    """Return the environment fingerprint: host, devices, drivers, loader, SYCL runtime."""
    from l0mem.probe.fingerprint import driver_environment, host_fingerprint

    host = host_fingerprint()
    packages = host.get("packages", {})
    drivers = inventory.l0_info.get("drivers") or []
    env = driver_environment()
    return {
        "simulated": inventory.simulated,
        # NEO's debug keys reach a real GPU's driver only: not the simulator nor a CPU device.
        "no_hardware": no_hardware_reason(env) if inventory.real_gpu else None,
        "environment": env,
        "host": host,
        "loader": {
            **(inventory.l0_info.get("loader") or {"path": None, "components": []}),
            "alt_drivers": inventory.l0_info.get("alt_drivers") or [],
        },
        "compute_runtime": {
            "driver_versions": [d.get("version") for d in drivers],
            "packages": packages,
        },
        "drivers": drivers,
        "devices": [
            {
                "backend": "l0",
                **{
                    k: d.get(k)
                    for k in (
                        "index",
                        "name",
                        "pci_id",
                        "pci_address",
                        "memory_bytes",
                        "kernel_driver",
                        "kernel_driver_version",
                        "driver_version",
                        "host_backed",
                    )
                },
            }
            for d in inventory.l0_devices
        ]
        + [
            {
                "backend": "sycl",
                **{
                    k: d.get(k)
                    for k in (
                        "filter_string",
                        "name",
                        "device_type",
                        "driver_version",
                        "platform",
                        "global_mem_size",
                    )
                },
            }
            for d in inventory.sycl_devices
        ],
        "level_zero_error": inventory.l0_error,
        "sycl": {
            "runtime": inventory.sycl_info.get("runtime", {}),
            "error": inventory.sycl_error,
        },
    }


def machine_config(fingerprint: dict[str, Any]) -> AnalysisConfig:
    """Return the analysis settings for the machine ``fingerprint`` describes (its GPU drivers)."""
    host = fingerprint.get("host")
    modules = host.get("gpu_modules") if isinstance(host, dict) else None
    return for_stacks(DEFAULT_CONFIG, modules if isinstance(modules, dict) else {})


def remedy_list(options: AuditOptions) -> list[Remedy]:
    """Return the remedies an audit with ``options`` tries (known ones and ``--env``)."""
    out: list[Remedy] = list(KNOWN_REMEDIES) if options.remedies else []
    if options.env:
        out.append(custom_remedy(options.env))
    return out


def run_audit(
    options: AuditOptions,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    guard: Guard | None = None,
) -> AuditReport:
    """Run every planned set-up (then remedies for those that mirrored); return the report.

    Raises DiscoveryError when a discovery child failed and no device was found
    at all, NoDeviceError when neither Level Zero nor SYCL has a device, or
    ``options.devices`` names an index no Level Zero device has, and
    AuditInterrupted (with the partial report) when cancelled.
    """
    cancel = cancel or CancelEvent()
    guard = guard or Guard.for_host(options.floor_bytes)
    created = utc_now()
    notify = progress or (lambda event: None)

    def report(runs: list[SetupRun], complete: bool, fingerprint: dict[str, Any]) -> AuditReport:
        opts = options.to_dict()
        opts["floor_bytes"] = guard.floor_bytes
        opts["remedy_list"] = [r.to_dict() for r in remedy_list(options)]
        raw = AuditReport(
            l0mem_version=__version__,
            created=created,
            fingerprint=fingerprint,
            options=opts,
            runs=runs,
            complete=complete,
        )
        return analyze_report(raw, machine_config(fingerprint))

    try:
        inventory = discover(options, cancel)
    except (Cancelled, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            request_cancel(cancel, exc)
        partial = report([], False, {"simulated": False})
        raise AuditInterrupted(partial, cancel_signal(cancel)) from None
    fingerprint = build_fingerprint(inventory)
    if not inventory.l0_devices and not inventory.sycl_devices:
        errors = (inventory.l0_error, inventory.sycl_error)
        if any((e or "").startswith(REASON_DISCOVERY + " (") for e in errors):
            raise DiscoveryError(
                f"no device to audit: Level Zero: {errors[0]}; SYCL: {errors[1]}",
                report([], False, fingerprint),
            )
        raise NoDeviceError(
            f"no device to audit: Level Zero: {inventory.l0_error}; SYCL: {inventory.sycl_error}"
        )
    config = machine_config(fingerprint)
    plans = plan_audit(options, inventory, guard.floor_bytes, config.stacks)
    runs: list[SetupRun] = []
    interrupted = False

    def run_plans(batch: list[SetupPlan]) -> None:
        nonlocal interrupted
        notify(RunEvent("plan", plans=tuple(batch)))
        for plan in batch:
            if interrupted:
                return
            notify(RunEvent("start", plan=plan))

            def on_sample(sample: Sample, plan: SetupPlan = plan) -> None:
                notify(RunEvent("sample", plan=plan, sample=sample))

            run = run_setup(
                plan,
                guard=guard,
                on_sample=on_sample,
                cancel=cancel,
                python=options.python,
                timeout_s=silence_timeout(options.settle_s, options.child_timeout_s),
            )
            runs.append(run)
            notify(RunEvent("end", plan=plan, run=run))
            if run.status == "interrupted" or cancel.is_set():
                interrupted = True

    try:
        run_plans(plans)
    except KeyboardInterrupt as exc:
        request_cancel(cancel, exc)
        interrupted = True
    remedies = remedy_list(options)
    retry: list[SetupPlan] = []
    if remedies and not interrupted:
        for plan, run in zip(plans, list(runs), strict=True):
            # On a CPU or integrated device, device memory *is* host memory: 1:1 is
            # expected there and no remedy can or should change it.
            if run.status == "skipped" or run.remedy is not None or plan.host_memory_device:
                continue
            if analyze_run(run, config).verdict not in ("mirror", "partial"):
                continue
            retry.extend(plan.with_remedy(r) for r in remedies_for(plan.setup, remedies))
        if retry:
            try:
                run_plans(retry)
            except KeyboardInterrupt as exc:
                request_cancel(cancel, exc)
                interrupted = True
    complete = not interrupted and all(
        r.status not in ("interrupted", "stopped-early") for r in runs
    )
    result = report(runs, complete, fingerprint)
    if remedies and not interrupted and len(runs) > len(plans):
        try:
            costs = collect_costs(result, [*plans, *retry], options.python, options.child_timeout_s)
        except KeyboardInterrupt as exc:
            request_cancel(cancel, exc)
            interrupted = True
        else:
            result = dataclasses.replace(result, remedy_costs=[c.to_dict() for c in costs])
    if interrupted:
        raise AuditInterrupted(result, cancel_signal(cancel))
    return result


__all__ = [
    "CHILD_MODULE",
    "AuditInterrupted",
    "CancelEvent",
    "DiscoveryError",
    "Progress",
    "RunEvent",
    "build_fingerprint",
    "discover",
    "machine_config",
    "remedy_list",
    "run_audit",
    "run_setup",
    "skipped_run",
]
