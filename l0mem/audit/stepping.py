"""One set-up run in the audit's child: step windows up and down, extra cycles, the guard.

:class:`Runner` allocates a set-up's device memory a step at a time, each
step a *step window* (a sample of every signal right before it and one right
after), frees it again a step at a time, and, while the estimation
(:mod:`l0mem.estimate`) cannot yet give a verdict with a slope within its
precision, allocates and frees one step again, or climbs the whole staircase
again (:func:`l0mem.estimate.repeat.next_move` says which), until it can or
the run's budget is spent. It keeps the safety guard before every allocation and
after every driver call, and frees everything on every way out.
:mod:`l0mem.audit.child` is the process around it: the protocol, the signal
handlers (which set :class:`Stop`) and the modes.
"""

from __future__ import annotations

import functools
import random
import signal
import statistics
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from l0mem.audit.discovery import one_line
from l0mem.audit.guard import Guard, measured_slope
from l0mem.audit.runs import REASON_DEVICE_FULL, REASON_INTERRUPTED, REASON_STOPPED
from l0mem.audit.setups import STEP_ALIGN
from l0mem.estimate import repeat
from l0mem.estimate.model import AnalysisConfig, Edge, Phase, Sample
from l0mem.estimate.repeat import Move
from l0mem.probe import MeminfoError, mem_available

if TYPE_CHECKING:
    from l0mem.audit.experiment import L0Experiment, SyclExperiment


class Stop:
    """Which signal asked the child to stop (None while running)."""

    signum: int | None = None


# What the guard measures the slope on: both say how much host memory is left.
HOST_SIGNALS = ("meminfo.MemAvailable", "host.available")


class Halt(Exception):
    """Ends the allocation loop in the middle of a step with (status, reason)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = (status, reason)


def pause(seconds: float) -> None:
    """Sleep up to ``seconds``, returning early once a stop signal arrived."""
    end = time.monotonic() + seconds
    while Stop.signum is None:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


class Runner:
    """Runs one set-up spec, emitting samples as it goes."""

    def __init__(self, spec: dict[str, Any], emit: Callable[..., None]) -> None:
        self.spec = spec
        self.emit = emit
        self.guard = Guard(floor_bytes=int(spec["floor_bytes"]))
        self.pattern = bytes.fromhex(spec["fill_pattern"])
        self.t0 = time.monotonic()
        self.exp: L0Experiment | SyclExperiment | None = None
        self.device_bytes = 0
        # Allocations whose fill did not read back: their memory proves nothing.
        self.untouched = 0
        self.record: list[Sample] = []  # every sample taken, for the decision to go on
        self.windows = 0  # step windows so far
        self.allocations = 0  # allocations made (each step makes one or more)
        self.steps: list[tuple[int, int]] = []  # (allocations, bytes) of each step still held
        self.rng = random.Random()  # seeded from the OS: nothing outside can follow it
        # The guard's view of the run: the slope each allocation window showed,
        # their median, and the "before" edge of the window open now.
        self.window_slopes: list[float] = []
        self.slope: float | None = None
        self._opened: tuple[dict[str, int], int] | None = None

    def sample(self, phase: str, step: int | None = None, edge: str | None = None) -> None:
        """Take one snapshot and emit it as a sample (one edge of step window ``step``, if given)."""
        from l0mem.probe import take_snapshot

        extra = self.exp.device_values() if self.exp is not None else {}
        snap = take_snapshot(extra or None)
        bytes_now = 0 if phase == "idle" else self.device_bytes
        t = round(snap.t - self.t0, 6)
        fields: dict[str, Any] = {} if step is None else {"step": step, "edge": edge}
        self.emit(
            "sample",
            t=t,
            phase=phase,
            device_bytes=bytes_now,
            values=dict(snap.values),
            unavailable=dict(snap.unavailable),
            **fields,
        )
        self.record.append(
            Sample(t, cast(Phase, phase), bytes_now, dict(snap.values), step, cast(Edge, edge))
        )
        self._follow(phase, snap.values, bytes_now, edge)

    def _phase(self) -> str:
        """Return the phase a sample taken now belongs to."""
        if self.device_bytes:
            return "alloc"
        return "freed" if self.windows else "idle"

    def _gap(self) -> None:
        """Wait a random time around the settle time: the windows come when no neighbour expects them."""
        pause(float(self.spec["settle_s"]) * self.rng.uniform(0.5, 1.5))

    def _alloc_window(self, nbytes: int) -> None:
        """Allocate one step between two samples (a step window); raise Halt as _step does."""
        assert self.exp is not None
        phase = self._phase()
        self.windows += 1
        self.sample(phase, self.windows, "before")
        made, start = self.allocations, self.device_bytes
        self._step(nbytes)
        self.steps.append((self.allocations - made, self.device_bytes - start))
        self.sample("alloc", self.windows, "after")

    def _free_window(self) -> None:
        """Free the newest step between two samples (a step window)."""
        assert self.exp is not None
        count, nbytes = self.steps.pop()
        self.windows += 1
        self.sample(self._phase(), self.windows, "before")
        self.exp.free_newest(count)
        self.device_bytes -= nbytes
        self.sample(self._phase(), self.windows, "after")

    def next_move(self) -> Move:
        """Return what to do next: enough, one step again, or the whole climb again."""
        if self.untouched:
            return "enough"  # no repeat helps memory the fill never reached
        stacks = tuple(str(s) for s in self.spec.get("stacks") or ())
        return repeat.next_move(self.record, AnalysisConfig(stacks=stacks))

    def _follow(
        self, phase: str, values: Mapping[str, int], device_bytes: int, edge: str | None
    ) -> None:
        """Keep the slope the guard predicts the next step from: the median of the windows'."""
        # Measured on MemAvailable and on MemAvailable plus the free pages on the
        # per-CPU lists (host.available): as pages move on and off those lists one
        # of the two reads low and the other high, so the larger is kept. Each
        # window measures itself: memory another process took since the idle
        # samples does not count (it would stop an audit on a busy machine).
        if edge == "before":
            self._opened = (dict(values), device_bytes)
        elif edge == "after" and self._opened is not None and phase == "alloc":
            before, start = self._opened
            grown = device_bytes - start
            slopes = [
                measured_slope(before[key], values[key], grown)
                for key in HOST_SIGNALS
                if key in values and key in before and grown > 0
            ]
            found = [x for x in slopes if x is not None]
            if found:
                self.window_slopes.append(max(found))
                self.slope = statistics.median(self.window_slopes)

    def breached(self) -> tuple[str, str] | None:
        """Return (status, reason) when MemAvailable is below the floor (or unreadable), else None."""
        try:
            why = self.guard.breached(mem_available())
        except MeminfoError as exc:
            return "failed", str(exc)
        return None if why is None else ("stopped-early", why)

    def checkpoint(self) -> None:
        """Raise Halt when MemAvailable is below the floor.

        Called between the driver calls of a step that may take host memory, so
        that a breach does not wait for the step to end. A stop signal does:
        a step is short, and a whole step keeps every sample a true point.
        """
        if (breach := self.breached()) is not None:
            raise Halt(*breach)

    def stopped(self) -> tuple[str, str] | None:
        signum = Stop.signum
        if signum is None:
            return None
        name = signal.Signals(signum).name
        # SIGTERM is also the parent's guard stop; SIGINT and SIGHUP only ever mean the user.
        if signum in (signal.SIGINT, signal.SIGHUP):
            return "interrupted", f"{REASON_INTERRUPTED}{name})"
        return "stopped-early", f"{REASON_STOPPED}{name}"

    def run(self) -> tuple[str, str | None]:
        """Run the set-up; return (status, reason)."""
        # Imported here: the backends load only in run mode, after "ready".
        from l0mem.audit.experiment import open_experiment

        self.exp = open_experiment(self.spec)
        self.emit("devices", devices=self.exp.devices, note=self.exp.note)
        status: tuple[str, str | None] = ("ok", None)
        try:
            status = self._measure()
        except Exception as exc:
            status = ("failed", one_line(exc))
        finally:
            status = self._free(status)
        return status

    def _measure(self) -> tuple[str, str | None]:
        assert self.exp is not None
        settle = float(self.spec["settle_s"])
        for i in range(int(self.spec["idle_samples"])):
            if i:
                pause(max(settle, 0.02))
            if (stop := self.stopped()) is not None:
                return stop
            self.sample("idle")
        target, step = int(self.spec["target_bytes"]), int(self.spec["step_bytes"])
        if (ended := self._staircase(target, step)) is not None:
            return ended
        # A busy machine: allocate and free one step again, at random moments, until
        # the slope's interval separates the verdicts or the budget is spent. Where the
        # climb contradicts the windows, the whole staircase again: a cost of the
        # run's own comes back with every climb, a neighbour's rise seldom does.
        end = time.monotonic() + float(self.spec.get("budget_s", 0.0))
        while time.monotonic() < end and (move := self.next_move()) != "enough":
            ended = self._staircase(target if move == "climb" else min(step, target), step)
            if ended is not None:
                return ended
        return "ok", None

    def _staircase(self, top: int, step: int) -> tuple[str, str | None] | None:
        """Allocate ``top`` bytes a ``step`` a window, then free them a step a window; return a status that ends the run."""
        # The staircase up, each step a window of its own ...
        while self.device_bytes < top:
            if (stop := self.stopped()) is not None:
                return stop
            left = min(step, top - self.device_bytes)
            if (halted := self._window(functools.partial(self._alloc_window, left))) is not None:
                return halted
            if (ended := self.stopped() or self.breached()) is not None:
                return ended
            self._gap()
        # ... and down again, one step a window, so that each free shows what it gave back.
        while self.steps:
            if (stop := self.stopped()) is not None:
                return stop
            self._free_window()
            self._gap()
        return None

    def _window(self, take: Callable[[], None]) -> tuple[str, str | None] | None:
        """Run one allocation window; return the status that ends the run, or None to go on."""
        try:
            take()
        except Halt as stopped:
            return stopped.status
        except Exception as exc:
            from l0mem._ze.errors import OutOfDeviceMemoryError

            if isinstance(exc, (OutOfDeviceMemoryError, MemoryError)):
                return "stopped-early", f"{REASON_DEVICE_FULL}: {self._out_of_memory(exc)}"
            raise
        return None

    def _out_of_memory(self, exc: BaseException) -> str:
        """Return what ran out: the allocation's size and device as the audit names it, and the driver's line."""
        from l0mem.backends import failed_allocation

        failed = failed_allocation(exc)
        if failed is None or self.exp is None:
            return one_line(exc)
        return f"allocating {failed.what(self.exp.device_label(failed.device))}: {failed.cause}"

    def _step(self, nbytes: int) -> None:
        """Allocate one step in as many driver allocations as the guard allows; raise Halt if it refuses."""
        assert self.exp is not None
        left = nbytes
        while left > 0:
            if left < nbytes:
                self.checkpoint()
            before = self._available()
            chunk = min(left, self.exp.max_alloc, self._admit(before, left))
            if not self.exp.allocate(chunk, self.pattern, self.checkpoint):
                self.untouched += 1
            self.allocations += 1
            left -= chunk
            self.device_bytes += chunk
            if self.slope is None:
                # The first slope, as soon as there is one: the rest of the step is predicted from it.
                self.slope = measured_slope(before, self._available(), chunk)

    def _admit(self, available: int, left: int) -> int:
        """Return the most bytes the next allocation of a step may take; raise Halt if none."""
        # The rest of the step must fit at the predicted ratio (at least 1:1) ...
        why = self.guard.refuse_step(available, left, self.slope)
        if why is None and self.slope is None:
            # ... and before anything is measured, one allocation must fit at any ratio.
            why = self.guard.refuse_unmeasured(available, STEP_ALIGN)
            left = min(left, self.guard.unmeasured_limit(available, STEP_ALIGN))
        if why is not None:
            raise Halt("stopped-early", why)
        return left

    @staticmethod
    def _available() -> int:
        try:
            return mem_available()
        except MeminfoError as exc:
            raise Halt("failed", str(exc)) from exc

    def _free(self, status: tuple[str, str | None]) -> tuple[str, str | None]:
        assert self.exp is not None
        try:
            count, total = self.exp.free_all()
        except Exception as exc:
            self.emit("freed", allocations=0, bytes=0, error=one_line(exc))
            if status[0] != "ok":
                # What ended the set-up comes first (a device lost in an allocation
                # also fails the free, at whatever call the free makes first); the
                # parent adds the free's failure from the event.
                return status
            return "failed", f"freeing device memory failed: {one_line(exc)}"
        self.device_bytes = 0
        self.steps.clear()
        self.emit("freed", allocations=count, bytes=total)
        settle = float(self.spec["settle_s"])
        for _ in range(int(self.spec["freed_samples"])):
            # A second signal must not cost the evidence that memory came back.
            time.sleep(max(settle, 0.02))
            self.sample("freed")
        return status


__all__ = ["HOST_SIGNALS", "Halt", "Runner", "Stop", "pause"]
