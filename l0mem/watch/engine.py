"""The watch loop: start or attach, sample the process tree every interval, keep the host floor.

:func:`run_workload` starts a command in its own process group (so that a
stop reaches every process it started and none of l0mem's), takes the
baseline before it starts and samples until it ends. :func:`watch_pid`
attaches read-only to a running process and samples until it is gone. Both
stop early on :meth:`Watch.request_stop` (the CLI calls it from its signal
handlers): ``run`` forwards the signal to the workload's process group and
keeps sampling until the workload has ended, ``watch`` just stops watching.

The floor: before the host's available memory would fall below it, ``run``
sends SIGTERM to the workload's process group and to every process of its
tree, then SIGKILL after the grace. The interval shortens as the room left
above the floor shrinks, so that a fast-growing workload is seen in time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import select
import time
from collections.abc import Callable, Mapping
from typing import Any

from l0mem.units import format_bytes
from l0mem.watch.retention import Retention
from l0mem.watch.series import IN_FLIGHT, Series, WatchSample, trace_values
from l0mem.watch.sources import (
    DeviceMemoryReader,
    Source,
    Tracer,
    TreeReading,
)

# System-wide sources a baseline taken before the workload exists may hold;
# l0mem's own process and DRM files are not the workload's.
SYSTEM_SOURCES = ("meminfo.", "vmstat.", "zoneinfo.", "host.", "cgroup.")
MIN_INTERVAL = 0.02  # the shortest interval near the floor: a sample costs about a millisecond
NEAR_FLOOR = 2 << 30  # within this much of the floor, samples come faster
DEFAULT_INTERVAL = 0.5
RATE_WINDOW = 8  # recent looks the floor reads the host's losses from
DEFAULT_GRACE = 5.0


@dataclasses.dataclass(frozen=True)
class FloorStop:
    """The workload was stopped to keep the host's available memory above the floor."""

    t: float
    available: int
    floor: int
    signal: str
    killed: bool  # SIGKILL was needed after the grace

    @property
    def message(self) -> str:
        """Return the one line that says what happened."""
        how = "; it did not end within the grace and was killed (SIGKILL)" if self.killed else ""
        return (
            f"stopped the workload ({self.signal}) at {self.t:.1f} s: available host memory "
            f"{format_bytes(self.available)} was about to fall below the floor "
            f"{format_bytes(self.floor)}{how}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the stop as plain JSON data."""
        return {**dataclasses.asdict(self), "message": self.message}


@dataclasses.dataclass(frozen=True)
class WatchResult:
    """A finished watch: the series, how the workload ended and why the watch stopped."""

    series: Series
    returncode: int | None  # run: the workload's exit status (-N: killed by signal N)
    floor_stop: FloorStop | None
    stop_signal: int | None  # the stop signal that ended the watch early
    trace: dict[str, Any] | None  # the tracer's last totals
    # run: processes of the workload still running when its first process ended, how
    # long l0mem followed them (keeping the floor), and those it left running.
    outlived: Outlived | None = None
    devices: tuple[str, ...] = ()  # the names of the devices Sysman read, where it did
    runs: int | None = None  # run: how many times the workload was run (--repeat); None: watch


@dataclasses.dataclass(frozen=True)
class Outlived:
    """Processes of a workload that ran on after its first process ended."""

    processes: int  # still running when the first process ended
    seconds: float  # from then until the last of them ended, or run stopped following them
    left_running: tuple[int, ...] = ()  # still running when run stopped following them

    def to_dict(self) -> dict[str, Any]:
        """Return it as plain JSON data."""
        return {
            "processes": self.processes,
            "seconds": round(self.seconds, 3),
            "left_running": list(self.left_running),
        }


def baseline_values(values: Mapping[str, int]) -> dict[str, int]:
    """Return the system-wide signals of a snapshot (the baseline before a workload starts)."""
    return {k: v for k, v in values.items() if k.startswith(SYSTEM_SOURCES)}


# The floor is kept on the kernel's own MemAvailable, as the audit's guard
# keeps it: the smaller of the two, it leaves the per-CPU lists as margin.
FLOOR_SIGNALS = ("meminfo.MemAvailable", "host.available")


def available(values: Mapping[str, int]) -> int | None:
    """Return the host's available memory in a sample as the floor reads it (MemAvailable first)."""
    for name in FLOOR_SIGNALS:
        if name in values:
            return values[name]
    return None


class Watch:
    """One watch: samples ``source`` until the tree ends or a stop is requested."""

    def __init__(
        self,
        *,
        interval: float = DEFAULT_INTERVAL,
        floor: int | None = None,
        grace: float = DEFAULT_GRACE,
        on_sample: Callable[[Series, WatchSample], None] | None = None,
        tracer: Tracer | None = None,
        sysman: DeviceMemoryReader | None = None,
        clock: Callable[[], float] = time.monotonic,
        look: float | None = None,
    ) -> None:
        """Watch every ``interval`` seconds; with ``look``, look that often and keep what tells.

        ``look`` (shorter than ``interval``) is how often the tree is read, so
        that each change of device memory lies between two reads that close in
        time (the estimation's step windows, :mod:`l0mem.estimate`); the series
        keeps the reads around each change and one per ``interval`` between
        them, and ``on_sample`` is called once per ``interval``.
        """
        if not interval > 0 or not grace > 0:
            raise ValueError("interval and grace must be > 0")
        if look is not None and not 0 < look <= interval:
            raise ValueError("look must be > 0 and at most the interval")
        self.interval = interval
        self.look = look or interval
        self.floor = floor
        self.grace = grace
        self.on_sample = on_sample
        self.tracer = tracer
        self.sysman = sysman
        self._sysman_seen = False
        self.clock = clock
        self.stop_signal: int | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._kept = Retention(self.interval, self.look)  # the series: what tells
        self._looks: list[WatchSample] = []  # the last few reads, every one, for the floor
        self._cost = 0.0  # seconds the last read took
        self._shown = -math.inf  # when on_sample was last called
        self._asked = 0.0  # the interval next_interval last gave
        self._late: list[float] = []  # per look after the first: how much later than asked it came
        self._unavailable: dict[str, str] = {}
        self._trace: dict[str, Any] | None = None
        self._start = clock()
        self._baseline = WatchSample(0.0, {})

    def close(self) -> None:
        """Release the wake-up pipe."""
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def request_stop(self, signum: int) -> None:
        """Stop watching (``run``: forward ``signum`` to the workload); safe in a signal handler."""
        if self.stop_signal is None:
            self.stop_signal = signum
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"s")

    def stopped(self) -> bool:
        """Return whether a stop was requested."""
        return self.stop_signal is not None

    @property
    def series(self) -> Series:
        """Return what was recorded so far."""
        return Series(
            self._baseline, self._kept.samples, dict(self._unavailable), self.tracer is not None
        )

    def set_baseline(self, values: Mapping[str, int], unavailable: Mapping[str, str]) -> None:
        """Record the baseline (taken before the workload started, or at attach)."""
        values, unavailable = self._with_sysman(values, unavailable, BASELINE_WAIT)
        self._start = self.clock()
        self._baseline = WatchSample(0.0, values)
        self._note(unavailable)

    def _with_sysman(
        self, values: Mapping[str, int], unavailable: Mapping[str, str], wait: float = 0.0
    ) -> tuple[dict[str, int], dict[str, str]]:
        """Return ``values`` plus Sysman's, and the reasons with Sysman's own in place of the tree's."""
        values, unavailable = dict(values), dict(unavailable)
        if self.sysman is None:
            return values, unavailable
        if wait:
            self.sysman.wait_ready(wait, self.stopped)
        got, why = self.sysman.read()
        values.update(got)
        unavailable.pop("sysman", None)
        if got and not self._sysman_seen:
            self._sysman_seen = True
            self._unavailable.pop("sysman", None)
        elif why and not self._sysman_seen:
            unavailable["sysman"] = why
        return values, unavailable

    def _note(self, unavailable: Mapping[str, str]) -> None:
        for key, why in unavailable.items():
            self._unavailable.setdefault(key, why)

    def take(self, source: Source) -> TreeReading | None:
        """Take one sample of ``source`` (with the tracer's totals); None when the tree is gone."""
        started = time.perf_counter()
        try:
            return self._take(source)
        finally:
            self._cost = time.perf_counter() - started

    def _take(self, source: Source) -> TreeReading | None:
        traced: dict[str, int] = {}
        if self.tracer is None:
            reading = source.sample()
        else:
            # No call that moves memory may run during the host reading, or the
            # sample pairs host memory half a step away from its device memory
            # (a mirror half made): read again, a few times at most, and mark a
            # sample that never got a quiet reading (trace.in_flight).
            totals = self.tracer.poll().to_dict()
            before, busy = trace_values(totals), int(totals.get("in_flight", 0))
            for _ in range(RETAKES):
                reading = source.sample()
                self._trace = self.tracer.poll().to_dict()
                traced = trace_values(self._trace)
                now_busy = int(self._trace.get("in_flight", 0))
                moved = busy or now_busy or traced != before
                traced[IN_FLIGHT] = 1 if moved else 0
                if not moved or reading is None:
                    break
                before, busy = {k: v for k, v in traced.items() if k != IN_FLIGHT}, now_busy
        if reading is None:
            return None
        values, unavailable = self._with_sysman(reading.values, reading.unavailable)
        values.update(traced)
        self._note(unavailable)
        sample = WatchSample(round(self.clock() - self._start, 4), values, reading.pids)
        if self._looks:  # how late this look came, for floor_near; the last few only
            self._late = [*self._late[1 - RATE_WINDOW :], max(0.0, sample.t - self._looks[-1].t - self._asked)]
        self._looks = [*self._looks[-RATE_WINDOW:], sample]
        self._kept.add(sample)
        if self.on_sample is not None and sample.t - self._shown >= self.interval - self.look / 2:
            self._shown = sample.t
            self.on_sample(self.series, sample)
        return reading

    def next_interval(self) -> float:
        """Return how long to wait for the next sample: shorter as the room above the floor shrinks.

        Within :data:`NEAR_FLOOR` of the floor the interval shrinks in
        proportion to the room left; when the host has been losing memory
        (the fastest over the last :data:`RATE_WINDOW` looks), it is also at
        most a quarter of the time the floor is away at that rate.
        """
        self._asked = self._interval(self._losses())
        return self._asked

    @property
    def _look(self) -> float:
        """Return the look, stretched so that reading costs at most a tenth of the time."""
        return min(max(self.look, LOOK_COST * self._cost), self.interval)

    def _interval(self, losses: list[tuple[int, float]]) -> float:
        if not self.floor or not self._looks:
            return self._look
        now = available(self._looks[-1].values)
        if now is None:
            return self._look
        room = max(now - self.floor, 0)
        wait = min(self._look, self.interval * room / NEAR_FLOOR)
        rate = max((loss / dt for loss, dt in losses if dt > 0), default=0.0)
        if rate > 0:
            wait = min(wait, room / rate / 4)
        return max(MIN_INTERVAL, wait)

    def _losses(self) -> list[tuple[int, float]]:
        """Return (bytes, seconds) of each recent pair of looks between which the host lost memory."""
        out = []
        for a, b in itertools.pairwise(self._looks[-RATE_WINDOW:]):
            before, after = available(a.values), available(b.values)
            if before is not None and after is not None and after < before:
                out.append((before - after, b.t - a.t))
        return out

    def floor_near(self) -> bool:
        """Return whether the host's available memory is at the floor or may cross it within two looks.

        A look lasts the next interval plus the most a recent look came late.
        A recent loss between looks no further apart counts whole (a workload
        growing in steps shows quiet looks between them); one over a longer
        gap counts at its rate.
        """
        if not self.floor or not self._looks:
            return False
        now = available(self._looks[-1].values)
        if now is None:
            return False
        if now <= self.floor:
            return True
        losses = self._losses()
        look = self._interval(losses) + max(self._late, default=0.0)
        most = max((loss * min(1.0, look / dt) if dt > 0 else loss for loss, dt in losses), default=0.0)
        return now - 2 * most <= self.floor

    def wait(self, timeout: float, pidfd: int | None) -> None:
        """Sleep up to ``timeout`` s; wake early when the process behind ``pidfd`` ends or a stop comes."""
        fds = [self._wake_r] + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(fds, [], [], max(timeout, 0.0))
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(self._wake_r, 64)

    def device_names(self) -> tuple[str, ...]:
        """Return the names of the devices whose memory was read beside the tree (Sysman's)."""
        return self.sysman.names if self.sysman is not None else ()

    def final_trace(self) -> dict[str, Any] | None:
        """Return the tracer's last totals (polled once more after the workload ended)."""
        if self.tracer is not None:
            self._trace = self.tracer.poll().to_dict()
        return self._trace


# How often run and watch read the tree: a change of device memory lies between two
# reads this close, so another process rarely moves host memory in between. Beside
# two noisy neighbours 10 ms gave 58 right verdicts of 90 runs where 50 ms gave 45
# (benchmarks.noise, the same seeds at once); a read of a small tree costs about
# 0.7 ms, so watching takes about 7% of one core.
LOOK = 0.01
# ... but never so often that reading takes more than 1/LOOK_COST of the time (a large tree).
LOOK_COST = 10.0
# Host readings taken again while the traced device memory moves (see Watch.take).
RETAKES = 3
# How long the baseline waits for Sysman's reader to have loaded the driver.
BASELINE_WAIT = 10.0


__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_INTERVAL",
    "FLOOR_SIGNALS",
    "LOOK",
    "MIN_INTERVAL",
    "NEAR_FLOOR",
    "FloorStop",
    "Watch",
    "WatchResult",
    "available",
    "baseline_values",
]
