"""The all-reduce benchmark: both paths per size, timed, with the error checked against FP64.

For every size of the sweep (bytes per device buffer, as every l0mem
``--sizes`` means: a whole number of FP32 elements) :func:`measure` runs both
paths of :class:`l0mem.allreduce.AllReduce` (``f32`` and ``bf16``, whatever
the threshold would pick; the row the threshold picks is marked) on random
inputs and returns the JSON-ready report (schema ``l0mem.allreduce/1``,
docs/allreduce-json.md): time from the first enqueue until every device has
finished (inputs re-uploaded, untimed, before each repetition), bytes
crossed, bus bandwidth in the NCCL convention ``4 nelem / time * 2 (N-1) / N``,
the wire rate, the call's time over its critical path (the longest chain of
its copies and kernels, each timed alone in the same run:
:mod:`l0mem.bench.critical`), and the largest error as a fraction of the
path's bound. The
time and the rates are :class:`l0mem.bench.timing.Measurement`'s. Where no
GPU executes (:attr:`l0mem.backends.Backend.no_hardware`) both paths run once
and the report has no results: ``ok`` is null and ``no_hardware`` says why.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any, Literal

from l0mem import __version__
from l0mem.allreduce import AllReduce, AllReduceStats, error_bound, scratch_bytes
from l0mem.backends import (
    HANG_BASE_S,
    Backend,
    CopyTimeout,
    Event,
    NoDeviceError,
    cleanup,
    copy_deadline,
)
from l0mem.bench.critical import critical_path_of, step_times
from l0mem.bench.fit import check_fits
from l0mem.bench.timing import MeasurementInterrupted, time_op, with_partial
from l0mem.driverenv import recorded_environment
from l0mem.units import format_size

SCHEMA = "l0mem.allreduce/1"


def _check(np: Any, xs: list[Any], outs: list[Any], path: Literal["f32", "bf16"]) -> dict[str, Any]:
    stacked = np.stack(xs).astype(np.float64)
    exact = stacked.sum(axis=0)
    bound = error_bound(path, len(xs)) * np.abs(stacked).sum(axis=0)
    err = np.abs(outs[0].astype(np.float64) - exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(
            bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err > 0, np.inf, 0.0)
        )
    identical = all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs[1:])
    return {
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "error_gamma": error_bound(path, len(xs)),
        "max_error_to_bound": float(ratio.max()) if ratio.size else 0.0,
        "within_bound": bool((err <= bound).all()),
        "identical": bool(identical),
    }


def host_bytes(n_devices: int, nelem: int) -> int:
    """Return about how much host memory ``measure`` needs for one size (inputs, outputs, checks)."""
    # Per device: FP32 input and output, FP64 copy and |x| in the check;
    # shared: float64 draws and the check's sum, bound, error and ratio arrays.
    return (24 * n_devices + 48) * nelem


def fp32_elements(nbytes: int) -> int:
    """Return the FP32 elements of a buffer of ``nbytes``; ValueError unless a positive multiple of 4."""
    if nbytes < 4 or nbytes % 4:
        raise ValueError(
            f"{nbytes:,} bytes is not a whole number of FP32 elements (a positive multiple of 4)"
        )
    return nbytes // 4


def check_sizes(backend: Backend, devices: Sequence[int], sizes: Sequence[int]) -> None:
    """Raise NoDeviceError (a device too small) or HostTooSmall before inputs are generated.

    ``sizes`` are bytes per device buffer, as :func:`measure` takes them.
    """
    nbytes = max(sizes)
    nelem = fp32_elements(nbytes)
    scratch = scratch_bytes(len(devices), nelem)
    check_fits(
        backend,
        devices,
        per_device=nbytes + scratch,
        largest=max(nbytes, scratch),
        # staged copies add a pinned ring per context, at most one per device
        host=host_bytes(len(devices), nelem) + len(devices) * backend.staging_ring_bytes,
        what=f"--sizes {nbytes:,} bytes",
    )


def measure(
    backend: Backend,
    devices: Sequence[int],
    sizes: Sequence[int],
    *,
    threshold: int,
    reps: int = 5,
    warmup: int = 1,
    seed: int = 0,
    transport: Literal["auto", "staged"] = "auto",
    watchdog: float = HANG_BASE_S,
) -> dict[str, Any]:
    """Run both paths for every size over ``devices``; return the JSON-ready report (no printing).

    Every wait has the watchdog's bound (base ``watchdog``): a call that hangs
    raises :class:`l0mem.backends.CopyTimeout`.

    ``sizes`` are bytes per device buffer, each a whole number of FP32
    elements (ValueError otherwise, before anything is run). Interrupted
    (KeyboardInterrupt), it raises :class:`MeasurementInterrupted` whose
    ``partial`` is the report over the rows that finished (``complete`` false),
    once the buffers are freed; a failure after a row finished (a hang, a
    lost device) carries the same ``partial`` (:func:`l0mem.bench.timing.with_partial`).
    """
    counts = [fp32_elements(n) for n in sizes]
    try:
        import numpy as np
    except ImportError:
        raise NoDeviceError("l0mem allreduce needs NumPy: pip install 'l0mem[bench]'") from None

    # Without hardware both paths still run once (the driver's answers are what is
    # tested), but neither a time nor a sum would be true: the report holds none.
    withheld = backend.no_hardware
    run_reps, run_warmup = (1, 0) if withheld else (reps, warmup)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    ar = AllReduce(backend, devices, threshold=threshold, transport=transport)

    def report(complete: bool) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "l0mem_version": __version__,
            "backend": backend.name,
            "simulated": backend.simulated,
            "no_hardware": withheld,
            "environment": recorded_environment(os.environ),
            "devices": [{"index": d, "name": backend.device_name(d)} for d in devices],
            "threshold": threshold,
            "transport": transport,
            "routes": {f"{s}>{d}": r for (s, d), r in sorted(ar.routes.items())},
            "reps": reps,
            "warmup": warmup,
            "seed": seed,
            "results": [] if withheld else rows,
            "ok": None if withheld else all(r["within_bound"] and r["identical"] for r in rows),
            "complete": complete,
        }

    try:
        with ar:
            for nelem in counts:
                xs = [rng.standard_normal(nelem).astype(np.float32) for _ in devices]
                bufs: list[Any] = []
                ok = False
                try:
                    bufs.extend(backend.allocate(d, 4 * nelem) for d in devices)
                    for path in ("f32", "bf16"):
                        rows.append(
                            _one(
                                np,
                                backend,
                                ar,
                                devices,
                                bufs,
                                xs,
                                nelem,
                                path,
                                run_reps,
                                run_warmup,
                                watchdog,
                            )
                        )
                    ok = True
                finally:
                    waits = [functools.partial(backend.synchronize, d) for d in devices]
                    cleanup([*waits, *(b.close for b in bufs)], strict=ok)
    except KeyboardInterrupt as exc:
        raise MeasurementInterrupted(report(False), exc) from None
    except Exception as exc:
        # A later size hung or lost its device: the sizes that finished are kept.
        raise (with_partial(exc, report(False)) if rows else exc) from None
    return report(True)


def _one(
    np: Any,
    backend: Backend,
    ar: Any,
    devices: Sequence[int],
    bufs: list[Any],
    xs: list[Any],
    nelem: int,
    path: Literal["f32", "bf16"],
    reps: int,
    warmup: int,
    watchdog: float,
) -> dict[str, Any]:
    # Where the call is: a hang's line names it (the path, the size and the step).
    where = ["uploading its inputs"]
    calls = [0]

    def load() -> None:
        where[0] = "uploading its inputs"
        for b, x in zip(bufs, xs, strict=True):
            backend.upload(b, x)
        for d in devices:
            backend.synchronize(d)

    def call() -> Sequence[Event]:
        calls[0] += 1
        where[0] = f"call {calls[0]} of {warmup + reps} ({warmup} untimed, then {reps} timed)"
        return (_AllFinished(backend, ar(bufs, nelem, path=path)),)

    try:
        load()
        where[0] = "its first call, whose sums are checked"
        stats = ar(bufs, nelem, path=path)
        stats.wait(stats.deadline(watchdog))
        outs = []
        where[0] = "reading its sums back"
        for b in bufs:
            out = np.empty(nelem, dtype=np.float32)
            backend.download(b, out).wait(copy_deadline(4 * nelem, watchdog))
            outs.append(out)
        check = _check(np, xs, outs, path)
        # Host clock from the first enqueue until every device has finished; the
        # inputs are re-uploaded, untimed, before each call (the sum overwrote them).
        m = time_op(
            call,
            stats.total_bytes,
            reps=reps,
            warmup=warmup,
            timing="host",
            prepare=load,
            watchdog=watchdog,
        )
        # Each distinct step alone, in this run: the time the schedule would take if
        # its steps cost only that (l0mem.bench.critical).
        where[0] = "timing each copy and kernel of its schedule alone"
        costs = step_times(backend, stats.steps, reps=reps, warmup=warmup, watchdog=watchdog)
    except CopyTimeout as exc:
        size = f"{nelem:,} elements ({format_size(4 * nelem)} per device)"
        raise CopyTimeout(
            f"the {path} all-reduce of {size} over devices "
            f"{','.join(map(str, devices))} hung in {where[0]}: {exc}",
            exc.device,
        ) from exc
    critical = critical_path_of(stats.steps, costs)
    n = len(devices)
    payload = 4 * nelem
    return {
        "nelem": nelem,
        "nbytes": payload,
        "path": path,
        "auto": ar.path_for(nelem) == path,
        "algorithm": stats.algorithm,
        "time_ns": {
            "samples": list(m.samples_ns),
            "median": m.median_ns,
            "min": m.min_ns,
            "max": m.max_ns,
            "spread": m.spread,
        },
        "bytes_crossed": stats.to_dict()["bytes_crossed"],
        "total_bytes_crossed": stats.total_bytes,
        "copies": stats.copies,
        "local_copies": stats.local_copies,
        "staged_copies": stats.staged_copies,
        "kernel_launches": stats.kernel_launches,
        "critical_path_ns": critical,
        "time_to_critical_path": m.median_ns / critical if critical > 0 else None,
        "busbw_gbps": m.rate(payload) * 2 * (n - 1) / n,
        "wire_gbps": m.gbps,
        **check,
    }


class _AllFinished:
    """The end of one all-reduce call: every device of it has finished (no device time)."""

    def __init__(self, backend: Backend, stats: AllReduceStats) -> None:
        self.backend, self.stats = backend, stats

    def wait(self, timeout: float | None = None) -> None:
        """Block until every device has finished all it was given (CopyTimeout past ``timeout``)."""
        self.stats.wait(timeout)
        for d in self.stats.devices:
            self.backend.synchronize(d)

    def elapsed_ns(self) -> None:
        """Return None: the call spans devices, so only the host clock times it."""
        return None


__all__ = ["SCHEMA", "check_sizes", "fp32_elements", "host_bytes", "measure"]
