"""The all-reduce against its critical path: each step timed alone, then the schedule's longest chain.

An all-reduce call enqueues steps (:class:`l0mem.allreduce.Step`: copies,
kernels, fills) on the devices' in-order queues, each waiting for the steps
whose events it names. :func:`step_times` times, in the run that timed the
call, one operation like each distinct step (same kind, devices and size) on
its own; :func:`critical_path_ns` lays the call's steps out with those times,
each starting once its queue is free and what it waits for has finished (a
staged copy holds its source's queue for its download only): the
time the call would take if the steps cost only what they cost alone. The
all-reduce's time over it is the overhead of the schedule as run (launches,
host waits, staging), which the benchmark reports per size.

What it may import: :mod:`l0mem.backends`, :mod:`l0mem.allreduce`, :mod:`.timing`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from l0mem.allreduce import ACCUMULATORS, Step
from l0mem.backends import HANG_BASE_S, Backend, DeviceBuffer, Event, cleanup
from l0mem.backends.kernels import compress_bf16
from l0mem.bench.timing import Measurement, TimingRequest, time_op

StepKey = tuple[str, int, int, int]

# Ones in FP32 and BF16: normal numbers, so no kernel meets a denormal's slow path.
_ONE_F32 = b"\x00\x00\x80\x3f"
_ONE_BF16 = b"\x80\x3f"


def step_key(step: Step) -> StepKey:
    """Return what makes two steps cost the same: kind, source, destination, size."""
    return (step.op, step.src, step.dst, step.size)


def critical_path_ns(
    steps: Sequence[Step],
    cost_ns: Callable[[Step], float],
    source_ns: Callable[[Step], float] | None = None,
) -> float:
    """Return when the last step ends, each step starting once its queues and its waits are free.

    A staged copy holds its source's queue only for ``source_ns(step)`` (its
    download, when given) and its destination's until it ends.
    """
    finish: list[float] = []
    free: dict[int, float] = {}
    for step in steps:
        start = max(
            [finish[i] for i in step.after] + [free.get(q, 0.0) for q in step.queues], default=0.0
        )
        end = start + cost_ns(step)
        finish.append(end)
        for q in step.queues:
            free[q] = end
        if step.op == "staged_copy" and source_ns is not None:
            free[step.src] = start + min(source_ns(step), end - start)
    return max(finish, default=0.0)


def download_key(step: Step) -> StepKey:
    """Return the key of a staged copy's download leg (device to pinned host memory)."""
    return ("download", step.src, step.src, step.size)


def critical_path_of(steps: Sequence[Step], times: Mapping[StepKey, Measurement]) -> float:
    """Return :func:`critical_path_ns` with the medians of :func:`step_times` (0 for steps without)."""

    def median(key: StepKey) -> float:
        m = times.get(key)
        return m.median_ns if m is not None else 0.0

    return critical_path_ns(
        steps, lambda st: median(step_key(st)), lambda st: median(download_key(st))
    )


@contextmanager
def _buffers(
    backend: Backend, wanted: Sequence[tuple[int, int, bytes]]
) -> Iterator[list[DeviceBuffer]]:
    """Yield buffers (device, bytes) filled with a pattern; free them afterwards."""
    made: list[DeviceBuffer] = []
    ok = False
    try:
        for device, nbytes, pattern in wanted:
            buf = backend.allocate(device, nbytes)
            made.append(buf)
            backend.fill(buf, pattern)
        yield made
        ok = True
    finally:
        devices = {b.device for b in made}
        waits = [lambda d=d: backend.synchronize(d) for d in devices]
        cleanup([*waits, *(b.close for b in made)], strict=ok)


def _operation(
    backend: Backend, step: Step, bufs: list[DeviceBuffer]
) -> Callable[[], Sequence[Event]]:
    a, b = bufs
    n = step.size
    if step.op == "copy":
        return lambda: (backend.copy(b, a, n, queue_device=step.src),)
    if step.op == "staged_copy":
        return lambda: backend.staged_copy(b, a, n)
    if step.op == "fill":
        return lambda: (backend.fill(a, b"\x00\x00\x00\x00"),)
    if step.op == "compress":
        return lambda: (compress_bf16(backend, a, b, n),)
    launch = ACCUMULATORS[step.op]
    return lambda: (launch(backend, a, b, n),)


def _wanted(step: Step) -> list[tuple[int, int, bytes]]:
    """Return the buffers (device, bytes, fill pattern) a step's stand-in runs on."""
    n = step.size
    if step.op in ("copy", "staged_copy"):
        return [(step.src, n, b"\x5a"), (step.dst, n, b"\x00")]
    if step.op == "fill":
        return [(step.dst, n, b"\x00"), (step.dst, 4, b"\x00")]
    if step.op == "compress":
        return [(step.dst, 4 * n, _ONE_F32), (step.dst, 2 * n, _ONE_BF16)]
    source = (2 * n, _ONE_BF16) if step.op == "decompress_add" else (4 * n, _ONE_F32)
    return [(step.dst, *source), (step.dst, 4 * n, _ONE_F32)]


def step_times(
    backend: Backend,
    steps: Sequence[Step],
    *,
    reps: int,
    warmup: int,
    watchdog: float = HANG_BASE_S,
) -> Mapping[StepKey, Measurement]:
    """Time one stand-in for each distinct step alone; return a Measurement per :func:`step_key`.

    Copies and kernels are timed with device timestamps where the backend has
    them; a staged copy with the host clock (as ``l0mem p2p`` times it), and a
    fill too: a backend may fill on the host before it returns (dpctl's
    memset blocks), which a device timestamp would not see.
    """
    out: dict[StepKey, Measurement] = {}
    for step in steps:
        key = step_key(step)
        if key in out or step.size == 0:
            continue
        with _buffers(backend, _wanted(step)) as bufs:
            op = _operation(backend, step, bufs)
            timing: TimingRequest = "host" if step.op in ("staged_copy", "fill") else "auto"
            out[key] = time_op(
                op, step.size, reps=reps, warmup=warmup, timing=timing, watchdog=watchdog
            )
            if step.op == "staged_copy":
                # How long the source's queue is held: the download into pinned memory.
                with backend.allocate_host(step.src, step.size) as pinned:
                    out[download_key(step)] = time_op(
                        lambda: (backend.download(bufs[0], pinned),),
                        step.size,
                        reps=reps,
                        warmup=warmup,
                        timing="host",
                        watchdog=watchdog,
                    )
    return out


__all__ = [
    "StepKey",
    "critical_path_ns",
    "critical_path_of",
    "download_key",
    "step_key",
    "step_times",
]
