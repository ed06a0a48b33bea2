"""The audit's child process: discovers devices or runs one set-up, reporting JSON lines.

Run as ``python -m l0mem.audit.child MODE`` with MODE one of:

- ``run``: reads a set-up spec (:meth:`SetupPlan.to_spec`) as JSON on stdin,
  allocates device memory in steps, fills every allocation on the device,
  then frees it a step at a time; every step is a *step window*, a sample of
  every memory signal right before it and one right after, with a random
  pause around the settle time between windows. While the slope's interval
  still spans two verdicts or is wider than 10% of the slope (50 MiB/GiB at
  least) on either side (:mod:`l0mem.estimate`: a busy machine), it
  allocates and frees one step again, window by window, until it is not or
  ``budget_s`` is spent. Then it frees what is left and samples again.
- ``discover-l0``: describes the Level Zero loader, drivers and devices.
- ``discover-sycl [FILTER]``: describes the SYCL runtime and devices.

Output is one JSON object per line on stdout, each with an ``event`` key:
``ready`` (run mode: the stop handlers are installed, ``pid``), ``devices``
(what the run uses), ``sample`` (``t``, ``phase``, ``device_bytes``,
``values``, ``unavailable``, and ``step``, ``edge`` on a window's two samples:
streamed as taken, so data survives a crash), ``freed`` (``allocations``,
``bytes``: everything freed, step by step and at the end), ``end``
(``status``: ok, stopped-early, interrupted or failed; ``reason``;
``untouched_allocations``: how many allocations did not read back the fill
pattern, so their memory may never have been touched), and
``inventory`` for the discovery modes. Anything libraries print goes to
stderr, never into this stream.

Before each driver allocation the child checks the safety guard itself
(MemAvailable minus the predicted host cost of the rest of the step, at least
1:1 and at least the slope measured so far, must stay above ``floor_bytes``;
until a slope is measured, one allocation may take no more than the room
above the floor over :data:`~l0mem.audit.guard.MAX_RATIO`, and the first
allocation measures the slope), and after every driver call of a step it
checks MemAvailable against the floor (:meth:`_Runner.checkpoint`). SIGINT, SIGTERM and SIGHUP stop it at the end
of the step: it takes that step's sample, frees everything, takes the freed
samples and reports what it freed (the discovery modes keep the default
handlers: they hold no device memory). If the parent dies, the kernel sends
SIGTERM (PR_SET_PDEATHSIG), so an orphan never keeps device memory.

This module is the process side (protocol, signals, the allocation loop);
what a set-up allocates with is :mod:`l0mem.audit.experiment`, what the
discovery modes report is :mod:`l0mem.audit.discovery`.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, cast

from l0mem.audit.discovery import discover_l0, discover_sycl, one_line
from l0mem.audit.guard import Guard, measured_slope
from l0mem.audit.runs import REASON_DEVICE_FULL, REASON_INTERRUPTED, REASON_STOPPED
from l0mem.audit.setups import STEP_ALIGN
from l0mem.estimate.model import Edge, Phase, Sample
from l0mem.probe import MeminfoError, mem_available

if TYPE_CHECKING:
    from l0mem.audit.experiment import L0Experiment, SyclExperiment

_PR_SET_PDEATHSIG = 1


class _Stop:
    """Which signal asked the child to stop (None while running)."""

    signum: int | None = None


# Extra cycles go on until the slope's interval lies within this share of the slope
# (and no closer than the floor, MiB per GiB) on either side, or the budget is spent.
PRECISION = 0.10
PRECISION_FLOOR = 50.0

# What the guard measures the slope on: both say how much host memory is left.
_HOST_SIGNALS = ("meminfo.MemAvailable", "host.available")


class _Halt(Exception):
    """Ends the allocation loop in the middle of a step with (status, reason)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = (status, reason)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _Stop.signum is None:
        _Stop.signum = signum


def _install_handlers() -> None:
    """Turn SIGINT, SIGTERM and SIGHUP into a stop request the run checks at every safe point."""
    # The parent stops the child with SIGINT and SIGTERM: those are always handled.
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    # A hangup reaches the whole process group; under nohup it stays ignored here too.
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _on_signal)


@functools.lru_cache(maxsize=1)
def _prctl() -> Any:
    """Return libc's prctl with its C signature declared, or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    # int prctl(int option, unsigned long arg2, ...): undeclared, ctypes would pass
    # every argument as a C int, which is only right by luck of the calling convention.
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def _die_with_parent() -> None:
    """Ask the kernel to send SIGTERM when the parent dies, so an orphan frees its memory."""
    prctl = _prctl()
    if prctl is not None:
        # On failure (not Linux) the broken pipe on the next write ends an orphan instead.
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _protocol_stream() -> IO[str]:
    """Return a private copy of stdout for the protocol; point fd 1 at stderr."""
    # Drivers and runtimes may print to fd 1; the protocol must stay parseable.
    sys.stdout.flush()
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return proto


class _Emitter:
    """Writes protocol events, one JSON object per line."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, **fields}, allow_nan=False) + "\n")
        self.stream.flush()


def _wait(seconds: float) -> None:
    """Sleep up to ``seconds``, returning early once a stop signal arrived."""
    end = time.monotonic() + seconds
    while _Stop.signum is None:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


# ---------------------------------------------------------------- one run


class _Runner:
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
        self.freed = [0, 0]  # allocations and bytes freed step by step
        self.rng = random.Random()  # seeded from the OS: nothing outside can follow it
        # The guard's view of the run: host memory available at the last idle
        # sample, per signal, and the slope the alloc samples show.
        self.idle_host: dict[str, int] = {}
        self.slope: float | None = None

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
        self._follow(phase, snap.values, bytes_now)

    def _phase(self) -> str:
        """Return the phase a sample taken now belongs to."""
        if self.device_bytes:
            return "alloc"
        return "freed" if self.windows else "idle"

    def _gap(self) -> None:
        """Wait a random time around the settle time: the windows come when no neighbour expects them."""
        _wait(float(self.spec["settle_s"]) * self.rng.uniform(0.5, 1.5))

    def _alloc_window(self, nbytes: int) -> None:
        """Allocate one step between two samples (a step window); raise _Halt as _step does."""
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
        freed = self.exp.free_newest(count)
        self.freed[0] += freed[0]
        self.freed[1] += freed[1]
        self.device_bytes -= nbytes
        self.sample(self._phase(), self.windows, "after")

    def decided(self) -> bool:
        """Return True when the samples so far give a verdict and a slope within the precision.

        Also True when no repeat could help (a fill that did not read back).
        """
        from l0mem.estimate import analyze_samples

        if self.untouched:
            return True
        result = analyze_samples(self.record)
        fit = result.fit(result.deciding_signal) if result.deciding_signal else None
        if fit is None or fit.slope is None:
            return False
        wanted = max(PRECISION * abs(fit.slope), PRECISION_FLOOR)
        return fit.method != "steps" or (fit.uncertainty or 0.0) <= wanted

    def _follow(self, phase: str, values: Mapping[str, int], device_bytes: int) -> None:
        """Keep the idle baseline and the slope the guard predicts the next step from."""
        # Measured on MemAvailable and on MemAvailable plus the free pages on the
        # per-CPU lists (host.available): as pages move on and off those lists one
        # of the two reads low and the other high, so the larger slope is kept.
        if phase == "idle":
            self.idle_host = {k: values[k] for k in _HOST_SIGNALS if k in values}
        elif phase == "alloc":
            slopes = [
                measured_slope(idle, values[key], device_bytes)
                for key, idle in self.idle_host.items()
                if key in values
            ]
            found = [x for x in slopes if x is not None]
            if found:
                self.slope = max(found)

    def breached(self) -> tuple[str, str] | None:
        """Return (status, reason) when MemAvailable is below the floor (or unreadable), else None."""
        try:
            why = self.guard.breached(mem_available())
        except MeminfoError as exc:
            return "failed", str(exc)
        return None if why is None else ("stopped-early", why)

    def checkpoint(self) -> None:
        """Raise _Halt when MemAvailable is below the floor.

        Called between the driver calls of a step that may take host memory, so
        that a breach does not wait for the step to end. A stop signal does:
        a step is short, and a whole step keeps every sample a true point.
        """
        if (breach := self.breached()) is not None:
            raise _Halt(*breach)

    def stopped(self) -> tuple[str, str] | None:
        signum = _Stop.signum
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
                _wait(max(settle, 0.02))
            if (stop := self.stopped()) is not None:
                return stop
            self.sample("idle")
        target, step = int(self.spec["target_bytes"]), int(self.spec["step_bytes"])
        # The staircase up, each step a window of its own ...
        while self.device_bytes < target:
            if (stop := self.stopped()) is not None:
                return stop
            if (halted := self._window(lambda: self._alloc_window(min(step, target - self.device_bytes)))) is not None:
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
        # A busy machine: allocate and free one step again, at random moments, until
        # the slope's interval separates the verdicts or the budget is spent.
        end = time.monotonic() + float(self.spec.get("budget_s", 0.0))
        while time.monotonic() < end and not self.decided():
            if (stop := self.stopped()) is not None:
                return stop
            if (halted := self._window(lambda: self._alloc_window(min(step, target)))) is not None:
                return halted
            if (ended := self.stopped() or self.breached()) is not None:
                return ended
            self._gap()
            self._free_window()
            self._gap()
        return "ok", None

    def _window(self, take: Callable[[], None]) -> tuple[str, str | None] | None:
        """Run one allocation window; return the status that ends the run, or None to go on."""
        try:
            take()
        except _Halt as stopped:
            return stopped.status
        except Exception as exc:
            from l0mem._ze.errors import OutOfDeviceMemoryError

            if isinstance(exc, (OutOfDeviceMemoryError, MemoryError)):
                return "stopped-early", f"{REASON_DEVICE_FULL}: {one_line(exc)}"
            raise
        return None

    def _step(self, nbytes: int) -> None:
        """Allocate one step in as many driver allocations as the guard allows; raise _Halt if it refuses."""
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
        """Return the most bytes the next allocation of a step may take; raise _Halt if none."""
        # The rest of the step must fit at the predicted ratio (at least 1:1) ...
        why = self.guard.refuse_step(available, left, self.slope)
        if why is None and self.slope is None:
            # ... and before anything is measured, one allocation must fit at any ratio.
            why = self.guard.refuse_unmeasured(available, STEP_ALIGN)
            left = min(left, self.guard.unmeasured_limit(available, STEP_ALIGN))
        if why is not None:
            raise _Halt("stopped-early", why)
        return left

    @staticmethod
    def _available() -> int:
        try:
            return mem_available()
        except MeminfoError as exc:
            raise _Halt("failed", str(exc)) from exc

    def _free(self, status: tuple[str, str | None]) -> tuple[str, str | None]:
        assert self.exp is not None
        try:
            count, total = self.exp.free_all()
        except Exception as exc:
            self.emit("freed", allocations=self.freed[0], bytes=self.freed[1], error=one_line(exc))
            return "failed", f"freeing device memory failed: {one_line(exc)}"
        self.device_bytes = 0
        self.steps.clear()
        self.emit("freed", allocations=self.freed[0] + count, bytes=self.freed[1] + total)
        settle = float(self.spec["settle_s"])
        for _ in range(int(self.spec["freed_samples"])):
            # A second signal must not cost the evidence that memory came back.
            time.sleep(max(settle, 0.02))
            self.sample("freed")
        return status


def run(spec: dict[str, Any], emit: Callable[..., None]) -> int:
    """Run one set-up spec, emitting events; return the process exit code (2: bad spec)."""
    try:
        runner = _Runner(spec, emit)
    except (KeyError, TypeError, ValueError) as exc:
        emit("end", status="failed", reason=f"bad set-up spec: {one_line(exc)}")
        return 2
    try:
        status, reason = runner.run()
    except Exception as exc:
        emit("end", status="failed", reason=one_line(exc))
        return 0
    finally:
        if runner.exp is not None:
            try:
                runner.exp.close()
            except Exception as exc:
                print(f"l0mem audit child: closing failed: {one_line(exc)}", file=sys.stderr)
    emit("end", status=status, reason=reason, untouched_allocations=runner.untouched)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the child in the mode named by ``argv[0]``; return the exit code."""
    _die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    mode = args[0] if args else ""
    if mode == "run":
        # Discovery holds no device memory: there SIGINT and SIGTERM simply end it.
        _install_handlers()
    emit = _Emitter(_protocol_stream())
    try:
        if mode == "run":
            # From here a stop signal is handled: the parent may now police the run.
            emit("ready", pid=os.getpid())
            try:
                spec = json.loads(sys.stdin.read())
            except ValueError as exc:
                emit("end", status="failed", reason=f"bad set-up spec: {one_line(exc)}")
                return 2
            if not isinstance(spec, dict):
                emit("end", status="failed", reason="bad set-up spec: not a JSON object")
                return 2
            return run(spec, emit)
        if mode == "discover-l0":
            emit("inventory", **discover_l0())
            return 0
        if mode == "discover-sycl":
            emit("inventory", **discover_sycl(args[1] if len(args) > 1 else None))
            return 0
    except BrokenPipeError:
        return 1
    print(
        f"l0mem audit child: unknown mode {mode!r} (run, discover-l0, discover-sycl)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
