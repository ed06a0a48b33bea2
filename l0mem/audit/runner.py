"""Run the audit: discover devices, run each set-up in a fresh child process, analyse.

Every experiment runs in its own ``python -m l0mem.audit.child`` process, so
an OOM kill or a driver crash costs one set-up, not the tool. Results come
back as JSON lines (no pickle), one line per sample as it is taken, so the
data survives a crash of the child. Before starting a child the parent checks
that the guard allows the first step at all (if not, the run is recorded as
stopped early and no child starts). Once the child reports that it handles
stop signals, the parent watches MemAvailable and stops the child (SIGTERM,
then SIGKILL after the guard's grace period) if it falls below the floor.

Cancelling (``cancel`` event set, or KeyboardInterrupt) forwards SIGINT to the
running child, waits for it to free its device memory, and raises
:class:`AuditInterrupted` carrying the partial report (``complete=False``).
Nothing here prints; progress goes to the ``progress`` callback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Literal

from l0mem import __version__
from l0mem.audit.analysis import analyze_report, analyze_run
from l0mem.audit.guard import Guard
from l0mem.audit.model import AuditReport, ReportFormatError, Sample, SetupRun, utc_now
from l0mem.audit.remedies import KNOWN_REMEDIES, Remedy, custom_remedy, remedies_for
from l0mem.audit.setups import (
    AuditOptions,
    Inventory,
    NoDeviceError,
    SetupPlan,
    plan_audit,
)
from l0mem.probe import MeminfoError, mem_available
from l0mem.units import format_bytes

CHILD_MODULE = "l0mem.audit.child"
DISCOVERY_TIMEOUT_S = 120.0
_STDERR_TAIL = 4000


class AuditInterrupted(KeyboardInterrupt):
    """The audit was interrupted; ``report`` holds what was measured (``complete=False``)."""

    def __init__(self, report: AuditReport) -> None:
        super().__init__("the audit was interrupted")
        self.report = report


@dataclasses.dataclass(frozen=True)
class RunEvent:
    """Progress of the audit, passed to the ``progress`` callback."""

    kind: Literal["plan", "start", "sample", "end"]
    plans: tuple[SetupPlan, ...] = ()  # kind "plan": the set-ups about to run
    plan: SetupPlan | None = None  # kinds start, sample, end
    sample: Sample | None = None  # kind "sample"
    run: SetupRun | None = None  # kind "end"


Progress = Callable[[RunEvent], None]


# ---------------------------------------------------------------- children


def _child_env(extra: dict[str, str], unset: Sequence[str] = ()) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(extra)
    return env


def _stderr_tail(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - _STDERR_TAIL))
    text = f.read().decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the OOM killer?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


class _Child:
    """One child process and the JSON lines it writes."""

    def __init__(self, python: str, args: Sequence[str], env: dict[str, str], stdin: bytes) -> None:
        # A file, not a pipe: a chatty driver must never block on a full stderr pipe.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [python, "-m", CHILD_MODULE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.stdout = self.proc.stdout
        self._buf = b""
        self.eof = False

    def read_events(self, timeout: float) -> list[dict[str, Any]]:
        """Return the complete JSON lines that arrive within ``timeout`` seconds."""
        if self.eof:
            return []
        ready, _, _ = select.select([self.stdout], [], [], timeout)
        if not ready:
            return []
        chunk = os.read(self.stdout.fileno(), 1 << 16)
        if not chunk:
            self.eof = True
            chunk = b"\n"
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        events = []
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "garbage", "line": line[:200].decode("utf-8", "replace")}
            if isinstance(event, dict):
                events.append(event)
        return events

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child unless it has already exited."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def finish(self, grace_s: float) -> int:
        """Wait for the child to exit (SIGKILL after ``grace_s``); return its exit code."""
        try:
            code = self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.stdout.close()
        return code

    def error_line(self) -> str:
        """Return the last line the child wrote to stderr ('' when none)."""
        return _stderr_tail(self.stderr)

    def close(self) -> None:
        """Kill the child if still running and release its files."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()
        self.stderr.close()


def _discover(
    python: str, args: list[str], env: dict[str, str], cancel: threading.Event
) -> dict[str, Any]:
    child = _Child(python, args, env, b"")
    try:
        deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
        found: dict[str, Any] | None = None
        while not child.eof:
            if cancel.is_set():
                child.signal(signal.SIGTERM)
                raise _Cancelled
            if time.monotonic() > deadline:
                return {"error": f"device discovery ({args[0]}) did not finish in time"}
            for event in child.read_events(0.1):
                if event.get("event") == "inventory":
                    found = event
        code = child.finish(DISCOVERY_TIMEOUT_S)
        # Ctrl-C reaches the whole process group: a child it killed is a cancel, not an error.
        if cancel.is_set():
            raise _Cancelled
        if found is None:
            detail = child.error_line()
            return {
                "error": f"device discovery ({args[0]}) failed: {_exit_text(code)}"
                + (f": {detail}" if detail else "")
            }
        found.pop("event", None)
        return found
    finally:
        child.close()


class _Cancelled(Exception):
    """Internal: the cancel event was set while no set-up was running."""


def discover(options: AuditOptions, cancel: threading.Event | None = None) -> Inventory:
    """Return the Level Zero and SYCL devices found, each queried in a child process."""
    cancel = cancel or threading.Event()
    l0 = _discover(options.python, ["discover-l0"], _child_env({}), cancel)
    names = [str(d.get("name", "")).lower() for d in l0.get("devices", [])]
    sim_only = bool(names) and all("simulated" in n for n in names)
    # With the simulated driver in its list, Debian's loader 1.8 under the SYCL
    # runtime lists no device or crashes unless test-side workarounds are in
    # place (tests/simdriver/README.md); the SYCL set-ups use the real devices.
    unset = ("ZE_ENABLE_ALT_DRIVERS",) if sim_only else ()
    sycl_args = ["discover-sycl"] + ([options.sycl_device] if options.sycl_device else [])
    sycl = _discover(options.python, sycl_args, _child_env({}, unset), cancel)
    return Inventory(
        l0_devices=list(l0.get("devices", [])),
        l0_error=l0.get("error"),
        l0_info={k: l0.get(k) for k in ("loader", "drivers", "alt_drivers") if k in l0},
        sycl_devices=list(sycl.get("devices", [])),
        sycl_error=sycl.get("error"),
        sycl_info={"runtime": sycl.get("runtime", {})},
    )


# ---------------------------------------------------------------- one set-up


def _run_of(plan: SetupPlan, **fields: Any) -> SetupRun:
    """Return a SetupRun of ``plan`` with the fields the plan decides filled in."""
    base: dict[str, Any] = {
        "setup": plan.setup,
        "backend": plan.backend,
        "env": plan.env,
        "remedy": None if plan.remedy is None else plan.remedy.name,
        "devices": [dict(d) for d in plan.devices],
        "step_bytes": plan.step_bytes,
        "target_bytes": plan.target_bytes,
        "samples": [],
        "host_memory": plan.host_memory_device,
        "simulated": plan.simulated,
    }
    base.update(fields)
    return SetupRun(**base)


def skipped_run(plan: SetupPlan, reason: str | None = None) -> SetupRun:
    """Return the report entry of a plan that was not run."""
    return _run_of(plan, status="skipped", reason=reason or plan.skip_reason or "skipped")


def refused_run(plan: SetupPlan, guard: Guard) -> SetupRun | None:
    """Return the run of a plan whose first step the guard refuses already (no child), or None."""
    try:
        why = guard.refuse_step(mem_available(), plan.step_bytes)
    except MeminfoError as exc:
        return _run_of(plan, status="failed", reason=str(exc))
    if why is None:
        return None
    # Checked here, before a child exists: a child started only to be refused (or
    # stopped by the parent's watch before it can handle a signal) proves nothing.
    return _run_of(plan, status="stopped-early", reason=f"{why}; no step was taken")


def run_setup(
    plan: SetupPlan,
    *,
    guard: Guard,
    on_sample: Callable[[Sample], None] | None = None,
    cancel: threading.Event | None = None,
    python: str | None = None,
    timeout_s: float = 300.0,
) -> SetupRun:
    """Run ``plan`` in a fresh child process and return its run (skipped plans are not run).

    ``cancel`` (or a KeyboardInterrupt) stops the child cleanly: it frees its
    device memory and the run comes back with status ``interrupted``.
    """
    if plan.skip_reason is not None:
        return skipped_run(plan)
    refused = refused_run(plan, guard)
    if refused is not None:
        return refused
    cancel = cancel or threading.Event()
    spec = json.dumps(plan.to_spec()).encode()
    env = _child_env(plan.env, plan.env_unset)
    child = _Child(python or sys.executable, ["run"], env, spec)
    watch = _Watch(plan, on_sample)
    try:
        while not child.eof:
            try:
                for event in child.read_events(guard.poll_s):
                    watch.take(event)
                watch.police(child, guard, cancel, timeout_s)
            except KeyboardInterrupt:
                cancel.set()
        code = child.finish(guard.grace_s)
        error = child.error_line()
    finally:
        child.close()
    run = _assemble(
        plan,
        watch.samples,
        watch.devices,
        watch.end,
        watch.freed,
        watch.notes,
        watch.parent_status,
        code,
        error,
    )
    return dataclasses.replace(run, unavailable=watch.unavailable())


class _Watch:
    """What the parent learns from one child's events, and when it must stop the child."""

    def __init__(self, plan: SetupPlan, on_sample: Callable[[Sample], None] | None) -> None:
        self.on_sample = on_sample
        self.samples: list[Sample] = []
        self.devices: list[dict[str, Any]] = [dict(d) for d in plan.devices]
        self.end: dict[str, Any] | None = None
        self.freed: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.parent_status: tuple[str, str] | None = None
        self.stop_sent_at: float | None = None
        self.last_output = time.monotonic()
        self.ready = False  # the child handles SIGINT and SIGTERM from now on
        self.cancel_seen_at: float | None = None
        self._gaps: dict[str, dict[str, str]] = {}  # phase -> signal -> why absent

    def take(self, event: dict[str, Any]) -> None:
        """Record one event from the child."""
        self.last_output = time.monotonic()
        kind = event.get("event")
        if kind == "ready":
            self.ready = True
        elif kind == "sample":
            fields = {k: v for k, v in event.items() if k not in ("event", "unavailable")}
            try:
                sample = Sample.from_dict(fields)
            except ReportFormatError as exc:
                self.notes.append(f"bad sample from the child: {exc}")
                return
            self.samples.append(sample)
            gaps = event.get("unavailable")
            if isinstance(gaps, dict):
                seen = self._gaps.setdefault(sample.phase, {})
                for name, why in gaps.items():
                    seen.setdefault(str(name), str(why))
            if self.on_sample is not None:
                self.on_sample(sample)
        elif kind == "devices":
            self.devices = list(event.get("devices") or self.devices)
            if event.get("note"):
                self.notes.append(str(event["note"]))
        elif kind == "freed":
            self.freed = event
        elif kind == "end":
            self.end = event

    def unavailable(self) -> dict[str, str]:
        """Return the signals missing from the samples the verdict rests on, and why."""
        # The alloc samples decide; without any, say what the run could see at all.
        if "alloc" in self._gaps:
            return dict(self._gaps["alloc"])
        merged: dict[str, str] = {}
        for gaps in self._gaps.values():
            for name, why in gaps.items():
                merged.setdefault(name, why)
        return merged

    def police(
        self, child: _Child, guard: Guard, cancel: threading.Event, timeout_s: float
    ) -> None:
        """Stop the child on cancel, a guard breach or silence; SIGKILL it after the grace."""
        now = time.monotonic()
        if self.stop_sent_at is not None:
            if now - self.stop_sent_at > guard.grace_s:
                child.signal(signal.SIGKILL)
            return
        if cancel.is_set() and self.cancel_seen_at is None:
            self.cancel_seen_at = now
        # Before "ready" a signal would kill the child before it could free anything
        # (it holds nothing yet): wait for it, unless it takes longer than the grace.
        stoppable = self.ready or (
            self.cancel_seen_at is not None and now - self.cancel_seen_at > guard.grace_s
        )
        if cancel.is_set() and stoppable:
            self._stop(child, signal.SIGINT, ("interrupted", "interrupted (Ctrl-C)"), now)
        elif self.ready and (why := _watch(guard)) is not None:
            self._stop(child, signal.SIGTERM, ("stopped-early", why), now)
        elif now - self.last_output > timeout_s:
            why = f"the child wrote nothing for {timeout_s:.0f} s"
            self._stop(child, signal.SIGTERM, ("failed", why), now)

    def _stop(self, child: _Child, signum: int, status: tuple[str, str], now: float) -> None:
        self.parent_status = status
        child.signal(signum)
        self.stop_sent_at = now


def _watch(guard: Guard) -> str | None:
    try:
        return guard.breached(mem_available())
    except MeminfoError:
        return None


def _assemble(
    plan: SetupPlan,
    samples: list[Sample],
    devices: list[dict[str, Any]],
    end: dict[str, Any] | None,
    freed: dict[str, Any] | None,
    notes: list[str],
    parent_status: tuple[str, str] | None,
    code: int,
    error: str,
) -> SetupRun:
    """Return the SetupRun from what the child reported and what the parent saw."""
    reason: str | None
    if end is None:
        detail = f": {error}" if error else ""
        exit_text = f"the child ended without a result ({_exit_text(code)}){detail}"
        if parent_status is not None:
            status, reason = parent_status[0], f"{parent_status[1]}; {exit_text}"
        else:
            status, reason = "failed", exit_text
    else:
        status = str(end.get("status", "failed"))
        reason = None if end.get("reason") is None else str(end["reason"])
        # The child only knows which signal stopped it; the parent knows why it sent it.
        if parent_status is not None and status in ("stopped-early", "interrupted"):
            status, reason = parent_status
    if status not in ("ok", "stopped-early", "interrupted", "failed"):
        status, reason = "failed", f"the child reported an unknown status {status!r}"
    parts = [reason] if reason else []
    if freed is not None and status != "ok":
        if freed.get("error"):
            parts.append(f"freeing failed: {freed['error']}")
        else:
            parts.append(
                f"freed {freed.get('allocations', 0)} allocation(s), "
                f"{format_bytes(int(freed.get('bytes', 0)))}"
            )
    elif freed is None and samples and any(s.phase == "alloc" for s in samples):
        parts.append("the child did not report freeing its device memory")
    parts.extend(notes)
    return _run_of(
        plan,
        status=status,
        reason="; ".join(parts) or None,
        devices=devices,
        samples=samples,
    )


# ---------------------------------------------------------------- the audit


def build_fingerprint(inventory: Inventory) -> dict[str, Any]:
    """Return the environment fingerprint: host, devices, drivers, loader, SYCL runtime."""
    from l0mem.probe.fingerprint import host_fingerprint

    host = host_fingerprint()
    packages = host.get("packages", {})
    drivers = inventory.l0_info.get("drivers") or []
    return {
        "simulated": inventory.simulated,
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

    Raises NoDeviceError when neither Level Zero nor SYCL has a device for the
    request, and AuditInterrupted (with the partial report) when cancelled.
    """
    cancel = cancel or threading.Event()
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
        return analyze_report(raw)

    try:
        inventory = discover(options, cancel)
    except (_Cancelled, KeyboardInterrupt):
        raise AuditInterrupted(report([], False, {"simulated": False})) from None
    fingerprint = build_fingerprint(inventory)
    plans = plan_audit(options, inventory, guard.floor_bytes)
    if not inventory.l0_devices and not inventory.sycl_devices:
        raise NoDeviceError(
            f"no device to audit: Level Zero: {inventory.l0_error}; SYCL: {inventory.sycl_error}"
        )
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
                timeout_s=options.child_timeout_s,
            )
            runs.append(run)
            notify(RunEvent("end", plan=plan, run=run))
            if run.status == "interrupted" or cancel.is_set():
                interrupted = True

    try:
        run_plans(plans)
    except KeyboardInterrupt:
        cancel.set()
        interrupted = True
    remedies = remedy_list(options)
    if remedies and not interrupted:
        retry: list[SetupPlan] = []
        for plan, run in zip(plans, list(runs), strict=True):
            # On a CPU or integrated device, device memory *is* host memory: 1:1 is
            # expected there and no remedy can or should change it.
            if run.status == "skipped" or run.remedy is not None or plan.host_memory_device:
                continue
            if analyze_run(run).verdict not in ("mirror", "partial"):
                continue
            retry.extend(plan.with_remedy(r) for r in remedies_for(plan.setup, remedies))
        if retry:
            try:
                run_plans(retry)
            except KeyboardInterrupt:
                cancel.set()
                interrupted = True
    complete = not interrupted and all(
        r.status not in ("interrupted", "stopped-early") for r in runs
    )
    result = report(runs, complete, fingerprint)
    if interrupted:
        raise AuditInterrupted(result)
    return result
