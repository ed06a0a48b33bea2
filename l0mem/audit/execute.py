"""Run one set-up plan in a fresh child process and turn what it reports into a :class:`SetupRun`.

Before starting a child the parent checks that the guard allows the first
step at all (if not, the run is recorded as stopped early and no child
starts). Once the child reports that it handles stop signals, the parent
watches MemAvailable and stops the child (SIGTERM, then SIGKILL after the
guard's grace period) if it falls below the floor. The child's samples,
device descriptions, freed memory and end status, with what the parent saw
(why it stopped the child, how the child exited), make the run.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from l0mem._ze.guard import TIMEOUT_ENV
from l0mem.audit.guard import Guard
from l0mem.audit.model import ReportFormatError, Sample, SetupRun
from l0mem.audit.process import (
    ChildProcess,
    cancel_signal,
    child_env,
    exit_text,
    request_cancel,
    signal_name,
)
from l0mem.audit.runs import REASON_INTERRUPTED
from l0mem.audit.setups import SetupPlan
from l0mem.probe import MeminfoError, mem_available
from l0mem.units import format_bytes


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
    device memory and the run comes back with status ``interrupted``. A child
    that takes longer than the guard's grace period is killed; every sample it
    streamed before is kept in the run.
    """
    if plan.skip_reason is not None:
        return skipped_run(plan)
    refused = refused_run(plan, guard)
    if refused is not None:
        return refused
    cancel = cancel or threading.Event()
    spec = json.dumps(plan.to_spec()).encode()
    env = child_env(plan.env, plan.env_unset)
    child = ChildProcess(python or sys.executable, ["run"], env, spec)
    watch = _Watch(plan, on_sample)
    code, error = -int(signal.SIGKILL), ""
    try:
        while not child.done:
            try:
                for event in child.read_events(guard.poll_s):
                    watch.take(event)
                watch.police(child, guard, cancel, timeout_s)
            except KeyboardInterrupt as exc:
                request_cancel(cancel, exc)
        # An interrupt here must not cost the samples already taken: the run is
        # assembled from what the watch holds whatever happens to the child.
        try:
            code = child.finish(guard.grace_s)
            error = child.error_line()
        except KeyboardInterrupt as exc:
            request_cancel(cancel, exc)
    finally:
        child.close()
    if cancel.is_set() and watch.parent_status is None:
        # The signal reached the child too (a terminal's process group) and it
        # stopped before the parent's own stop: it was still this cancel.
        watch.parent_status = ("interrupted", interrupted_reason(cancel))
    run = assemble_run(
        plan,
        watch.samples,
        watch.devices,
        watch.end,
        watch.freed,
        watch.notes,
        watch.parent_status,
        code,
        error,
        killed=watch.killed,
    )
    return dataclasses.replace(run, unavailable=watch.unavailable())


def interrupted_reason(cancel: threading.Event) -> str:
    """Return a run's reason when ``cancel`` stopped it: ``interrupted (SIGTERM)``."""
    return f"{REASON_INTERRUPTED}{signal_name(cancel_signal(cancel))})"


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
        self.killed: str | None = None  # why the parent sent SIGKILL, once it did
        self.last_output = time.monotonic()
        self.ready = False  # the child handles SIGINT, SIGTERM and SIGHUP from now on
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
        self, child: ChildProcess, guard: Guard, cancel: threading.Event, timeout_s: float
    ) -> None:
        """Stop the child on cancel, a guard breach or silence; SIGKILL it after the grace.

        While a stopped child frees, MemAvailable below half the floor kills it
        at once: a driver call still mirroring must not take the machine down.
        """
        now = time.monotonic()
        if self.stop_sent_at is not None:
            if self.killed is None:
                if now - self.stop_sent_at > guard.grace_s:
                    self.killed = f"did not end within the {guard.grace_s:g} s grace period"
                elif _emergency(guard):
                    self.killed = "let MemAvailable fall below half the floor while stopping"
                if self.killed is not None:
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
            self._stop(child, signal.SIGINT, ("interrupted", interrupted_reason(cancel)), now)
        elif self.ready and (why := _watch(guard)) is not None:
            self._stop(child, signal.SIGTERM, ("stopped-early", why), now)
        elif now - self.last_output > timeout_s:
            last = self.samples[-1] if self.samples else None
            where = (
                "before its first sample"
                if last is None
                else f"after its {last.phase} sample"
                + ("" if last.step is None else f" of step {last.step}")
            )
            why = (
                f"the child wrote nothing for {timeout_s:.0f} s {where}: a driver call that did "
                f"not return (allow it more time with ${TIMEOUT_ENV})"
            )
            self._stop(child, signal.SIGTERM, ("failed", why), now)

    def _stop(self, child: ChildProcess, signum: int, status: tuple[str, str], now: float) -> None:
        self.parent_status = status
        child.signal(signum)
        self.stop_sent_at = now


def _watch(guard: Guard) -> str | None:
    try:
        return guard.breached(mem_available())
    except MeminfoError:
        return None


def _emergency(guard: Guard) -> bool:
    try:
        return mem_available() < guard.floor_bytes // 2
    except MeminfoError:
        return False


def assemble_run(
    plan: SetupPlan,
    samples: list[Sample],
    devices: list[dict[str, Any]],
    end: dict[str, Any] | None,
    freed: dict[str, Any] | None,
    notes: list[str],
    parent_status: tuple[str, str] | None,
    code: int,
    error: str,
    *,
    killed: str | None = None,
) -> SetupRun:
    """Return the SetupRun from what the child reported and what the parent saw.

    ``killed`` says why the parent sent SIGKILL, when it did.
    """
    reason: str | None
    if end is None:
        detail = f": {error}" if error else ""
        how = f"killed by the audit: it {killed}" if killed else exit_text(code)
        ended = f"the child ended without a result ({how}){detail}"
        if parent_status is not None:
            status, reason = parent_status[0], f"{parent_status[1]}; {ended}"
        else:
            status, reason = "failed", ended
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
            if str(freed["error"]) not in (reason or ""):  # said once
                parts.append(f"freeing failed: {freed['error']}")
        else:
            parts.append(
                f"freed {freed.get('allocations', 0)} allocation(s), "
                f"{format_bytes(int(freed.get('bytes', 0)))}"
            )
    elif freed is None and samples and any(s.phase == "alloc" for s in samples):
        parts.append("the child did not report freeing its device memory")
    parts.extend(notes)
    untouched = 0 if end is None else int(end.get("untouched_allocations") or 0)
    return _run_of(
        plan,
        status=status,
        reason="; ".join(parts) or None,
        devices=devices,
        samples=samples,
        untouched_allocations=untouched,
    )


__all__ = ["assemble_run", "interrupted_reason", "refused_run", "run_setup", "skipped_run"]
