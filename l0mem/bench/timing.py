"""The one measurement type and the one timing routine of every l0mem benchmark.

:class:`Measurement` holds the repeated durations of one operation and the
bytes it moves each time, and derives everything the benchmarks report: the
median, the fastest and slowest sample, the bandwidth at the median and at
both extremes (GB/s, 1e9 bytes/s), and the spread ``(max - min) / median``.

:func:`time_ops` times operations that return the events of what they
enqueued. After ``warmup`` untimed rounds it takes ``reps`` timed rounds;
several operations are timed round-robin, so a slow phase of a shared
machine hits them alike. Clock: the devices' event timestamps (the sum of
``Event.elapsed_ns()`` over the operation's events) when every event carries
one; otherwise the host clock from the first enqueue until every event has
completed, for all the operations of the call, so numbers timed together
stay comparable. An event whose timestamp the driver cannot give (none,
NOT_READY after the wait, or an end before its start that is no wrap: its
``elapsed_ns()`` is None) means the host clock, and the Measurement's
``note`` says why. A caller that needs the host clock whatever the events
carry (a host-staged copy: the legs' device times leave out the host's wait
between them) asks for ``timing="host"``.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from l0mem.backends import HANG_BASE_S, Event, copy_deadline

Timing = Literal["device", "host"]
TimingRequest = Literal["auto", "device", "host"]
EventsOp = Callable[[], Sequence[Event]]
_K = TypeVar("_K", bound=Hashable)

# The note of a measurement whose device timing fell back to the host clock.
FALLBACK_NOTE = (
    "no device timing (an event's timestamp was missing, not ready after the wait, "
    "or ended before it started): timed with the host clock"
)

# The keys of Measurement.to_dict(), in order.
SUMMARY_KEYS = (
    "timing",
    "samples_ns",
    "median_ns",
    "min_ns",
    "max_ns",
    "gbps",
    "gbps_min",
    "gbps_max",
    "spread",
)


def _over_ns(value: float, ns: float) -> float:
    # Bytes per ns is GB/s. A coarse clock can read 0 ns: it counts as 1 ns.
    return value / max(ns, 1.0)


@dataclass(frozen=True)
class Measurement:
    """Repeated durations of one operation that moves ``bytes_moved`` bytes each time."""

    samples_ns: tuple[int, ...]
    bytes_moved: int
    timing: Timing
    # Why the clock is not the one asked for (device timing fell back to the host clock).
    note: str | None = None

    def __post_init__(self) -> None:
        if not self.samples_ns:
            raise ValueError("a measurement needs at least one sample (no samples)")

    @property
    def median_ns(self) -> float:
        """Return the median duration in ns."""
        return float(statistics.median(self.samples_ns))

    @property
    def min_ns(self) -> int:
        """Return the fastest sample in ns."""
        return min(self.samples_ns)

    @property
    def max_ns(self) -> int:
        """Return the slowest sample in ns."""
        return max(self.samples_ns)

    def rate(self, nbytes: float) -> float:
        """Return ``nbytes`` over the median duration, in GB/s (for rates of other byte counts)."""
        return _over_ns(nbytes, self.median_ns)

    @property
    def gbps(self) -> float:
        """Return the bandwidth at the median duration in GB/s."""
        return self.rate(self.bytes_moved)

    @property
    def gbps_min(self) -> float:
        """Return the bandwidth of the slowest sample in GB/s."""
        return _over_ns(self.bytes_moved, self.max_ns)

    @property
    def gbps_max(self) -> float:
        """Return the bandwidth of the fastest sample in GB/s."""
        return _over_ns(self.bytes_moved, self.min_ns)

    @property
    def spread(self) -> float:
        """Return (max - min) / median of the durations: 0 means perfectly steady."""
        return _over_ns(self.max_ns - self.min_ns, self.median_ns)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON fragment of the samples and their summary (keys: ``SUMMARY_KEYS``)."""
        return {
            "timing": self.timing,
            "samples_ns": list(self.samples_ns),
            "median_ns": self.median_ns,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
            "gbps": self.gbps,
            "gbps_min": self.gbps_min,
            "gbps_max": self.gbps_max,
            "spread": self.spread,
        }


def unmeasured_dict(timing: Timing = "device") -> dict[str, Any]:
    """Return the fragment of :meth:`Measurement.to_dict` for an operation that was not run."""
    return {**dict.fromkeys(SUMMARY_KEYS), "timing": timing, "samples_ns": []}


def _wait(events: Sequence[Event], timeout: float | None = None) -> None:
    for ev in events:
        ev.wait(timeout)


class _NoTimestamp(Exception):
    """An event of the operation carries no device timestamp."""


def _sample(op: EventsOp, timing: Timing, timeout: float | None) -> int:
    """Return one duration of ``op`` in ns; raise _NoTimestamp when device time is missing."""
    if timing == "host":
        start = time.perf_counter_ns()
        _wait(op(), timeout)
        return time.perf_counter_ns() - start
    events = op()
    _wait(events, timeout)
    total = 0
    for ev in events:
        ns = ev.elapsed_ns()
        if ns is None:
            raise _NoTimestamp
        total += ns
    return total


def _rounds(
    ops: Mapping[_K, EventsOp],
    reps: int,
    timing: Timing,
    prepare: Callable[[], None] | None,
    samples: dict[_K, list[int]],
    bounds: Mapping[_K, float | None],
) -> None:
    # Fills the caller's lists, so that an interrupt leaves it what was sampled.
    for key in ops:
        samples[key] = []
    for _ in range(reps):
        for key, op in ops.items():
            if prepare is not None:
                prepare()
            samples[key].append(_sample(op, timing, bounds[key]))


def time_ops(
    ops: Mapping[_K, tuple[EventsOp, int]],
    *,
    reps: int,
    warmup: int,
    timing: TimingRequest = "auto",
    prepare: Callable[[], None] | None = None,
    watchdog: float | None = HANG_BASE_S,
) -> dict[_K, Measurement]:
    """Time each ``(op, bytes moved)`` of ``ops`` round-robin; return a Measurement per key.

    ``prepare`` runs, untimed, before every round of every operation (warm-up
    rounds too). ``timing``: "auto" uses device timestamps when every event
    carries one and the host clock otherwise, "device" raises RuntimeError
    when an event carries none, "host" always uses the host clock.

    Interrupted (KeyboardInterrupt) during the timed rounds, it raises
    :class:`MeasurementInterrupted` whose ``partial`` is this dict over the
    keys with at least one sample, each holding the samples it has (round-robin:
    the keys before the interrupted one have one sample more). Interrupted
    during warm-up, nothing was measured: the KeyboardInterrupt goes on as is.

    Every wait has the watchdog's bound (:func:`l0mem.backends.copy_deadline`
    of the bytes moved, ``watchdog`` its base; None: no bound): an operation
    past it raises :class:`l0mem.backends.CopyTimeout`.
    """
    if reps < 1 or warmup < 0:
        raise ValueError(f"reps must be >= 1 and warmup >= 0, got {reps} and {warmup}")
    run = {key: op for key, (op, _) in ops.items()}
    bounds = {
        key: None if watchdog is None else copy_deadline(n, watchdog) for key, (_, n) in ops.items()
    }
    for _ in range(warmup):
        for key, op in run.items():
            if prepare is not None:
                prepare()
            _wait(op(), bounds[key])
    used: Timing = "host" if timing == "host" else "device"
    note: str | None = None
    samples: dict[_K, list[int]] = {}

    def measured() -> dict[_K, Measurement]:
        return {
            key: Measurement(tuple(samples[key]), nbytes, used, note)
            for key, (_, nbytes) in ops.items()
            if samples.get(key)
        }

    try:
        try:
            _rounds(run, reps, used, prepare, samples, bounds)
        except _NoTimestamp:
            if timing == "device":
                raise RuntimeError(
                    "device timing asked for, but an event carries no timestamp"
                ) from None
            # Warm-up is done; the device-timed rounds so far are discarded.
            used = "host"
            note = FALLBACK_NOTE
            _rounds(run, reps, used, prepare, samples, bounds)
    except KeyboardInterrupt as exc:
        raise MeasurementInterrupted(measured(), exc) from None
    return measured()


def time_op(
    op: EventsOp,
    bytes_moved: int,
    *,
    reps: int,
    warmup: int,
    timing: TimingRequest = "auto",
    prepare: Callable[[], None] | None = None,
    watchdog: float | None = HANG_BASE_S,
) -> Measurement:
    """Time one operation as :func:`time_ops` does; return its Measurement."""
    return time_ops(
        {0: (op, bytes_moved)},
        reps=reps,
        warmup=warmup,
        timing=timing,
        prepare=prepare,
        watchdog=watchdog,
    )[0]


class MeasurementInterrupted(KeyboardInterrupt):
    """A benchmark was interrupted; ``partial`` is its result over what finished, marked incomplete.

    Raised in place of the KeyboardInterrupt (Ctrl-C, or a stop signal the
    caller raises as one, its number in ``signum``) once the benchmark's
    device memory is freed; :func:`time_ops`, which holds none, raises it with
    the Measurements it has.
    """

    def __init__(self, partial: Any, cause: BaseException) -> None:
        super().__init__(str(cause) or "interrupted")
        self.partial = partial
        signum = getattr(cause, "signum", None)
        self.signum = signum if isinstance(signum, int) else int(signal.SIGINT)


def with_partial(exc: BaseException, partial: Any) -> BaseException:
    """Return ``exc`` (a failure: a hang, a lost device) carrying ``partial``, what finished before it.

    The failure keeps its own type, so that its exit code stays its own; the
    command writes and shows ``partial`` (marked incomplete) before its line.
    """
    exc.partial = partial  # type: ignore[attr-defined]
    return exc


__all__ = [
    "FALLBACK_NOTE",
    "SUMMARY_KEYS",
    "EventsOp",
    "Measurement",
    "MeasurementInterrupted",
    "Timing",
    "TimingRequest",
    "time_op",
    "time_ops",
    "unmeasured_dict",
    "with_partial",
]
