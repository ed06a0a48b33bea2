"""Kernel bandwidth against the same device's device-to-device copy bandwidth.

Effective bandwidth counts the bytes a kernel must read plus the bytes it
writes (6, 10 and 12 bytes per element for compress, decompress-add and add);
a copy of N bytes moves 2N. The copy and the kernels are timed together by
:func:`l0mem.bench.timing.time_ops`: round-robin, so slow phases of a shared
machine hit all of them alike, and on one clock (device timestamps when every
event carries them, host wall time around enqueue + wait otherwise), so the
ratios compare like with like. Nothing is printed here: the functions return
results.

The JSON of a run (:meth:`KernelBenchResult.to_dict`, what ``l0mem bench
kernels --json`` writes), schema ``l0mem.bench.kernels/1``:

- ``schema``, ``l0mem_version``, ``backend`` (``l0`` or ``sycl``), ``device``
  (its name), ``simulated`` (numbers of l0mem's simulated driver, not
  hardware), ``elements`` (per launch), ``repetitions``, ``warmup``;
- ``timing``: the one clock of the run, ``device`` (event timestamps) or
  ``host`` (wall time around enqueue + wait);
- ``copy`` and each of ``kernels[]``: ``name``, ``bytes_moved`` (per
  repetition), and the measurement (:meth:`l0mem.bench.timing.Measurement.to_dict`):
  ``timing``, ``samples_ns`` (every repetition), ``median_ns``, ``min_ns`` and
  ``max_ns`` (fastest and slowest sample), ``gbps`` (at the median),
  ``gbps_min`` and ``gbps_max`` (at the slowest and the fastest sample),
  ``spread`` ((max - min) / median); a kernel also has ``ratio_to_copy``;
- ``note``: null, or why the run is host-timed although device timing was
  possible (an event's timestamp was missing, not ready, or ended before it
  started);
- ``no_hardware``: null, or why nothing was measured: Intel's driver runs in a
  mode where no GPU executes (:attr:`l0mem.backends.Backend.no_hardware`).
  The copy and the kernels were then launched once each, untimed, and
  ``copy`` and ``timing`` are null and ``kernels`` is empty;
- ``complete``: true, or false when the run was interrupted (Ctrl-C, SIGTERM,
  SIGHUP): ``samples_ns`` then holds the repetitions taken before (round-robin,
  the operations timed before the interrupted one have one more), a kernel not
  timed even once is left out of ``kernels``, and ``copy`` and ``timing`` are
  null when nothing was (interrupted in warm-up);
- ``environment``: the variables that change driver, loader or runtime
  behaviour, as they were when measured (:mod:`l0mem.driverenv`);
- ``details``: an object for facts a caller adds (empty as
  :func:`run_kernel_bench` returns it).

New in this version: ``timing``, ``min_ns`` and ``max_ns`` in ``copy`` and in
every ``kernels[]`` entry; ``note``; ``no_hardware`` (with it, ``copy`` and
``timing`` null); ``complete``; ``environment``. No key was removed, so the schema stays at 1.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from l0mem import __version__
from l0mem.backends import Backend, DeviceBuffer, cleanup
from l0mem.backends.kernels import KERNELS, launch_elementwise
from l0mem.bench.timing import (
    EventsOp,
    Measurement,
    MeasurementInterrupted,
    Timing,
    TimingRequest,
    time_ops,
)
from l0mem.driverenv import recorded_environment

SCHEMA = "l0mem.bench.kernels/1"
COPY = "copy"
DEFAULT_ELEMENTS = 1 << 24
_ONE_F32 = b"\x00\x00\x80\x3f"
_ONE_BF16 = b"\x80\x3f"


@dataclass(frozen=True)
class KernelBenchResult:
    """One benchmark run: the copy reference and every kernel on one device, timed together."""

    backend: str
    device: str
    elements: int
    repetitions: int
    warmup: int
    copy: Measurement | None  # None when nothing could be measured (no_hardware)
    kernels: dict[str, Measurement]
    simulated: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    no_hardware: str | None = None  # why nothing was measured: no GPU executes
    complete: bool = True  # False: interrupted, the samples are those taken before
    # What changes driver behaviour (l0mem.driverenv), as the environment was when measured.
    environment: dict[str, str] = field(default_factory=lambda: recorded_environment(os.environ))

    @property
    def timing(self) -> Timing | None:
        """Return the clock of the run (one for the copy and every kernel), None when unmeasured."""
        return None if self.copy is None else self.copy.timing

    @property
    def note(self) -> str | None:
        """Return why the run fell back to the host clock, or None (one note: timed together)."""
        return None if self.copy is None else self.copy.note

    def ratio(self, name: str) -> float:
        """Return the kernel's bandwidth divided by the copy bandwidth."""
        if self.copy is None:
            raise ValueError(f"nothing was measured: {self.no_hardware}")
        return self.kernels[name].gbps / self.copy.gbps

    def to_dict(self) -> dict[str, Any]:
        """Return the run as a JSON-ready dict (schema ``l0mem.bench.kernels/1``)."""

        def op(name: str, m: Measurement) -> dict[str, Any]:
            return {"name": name, "bytes_moved": m.bytes_moved, **m.to_dict()}

        return {
            "schema": SCHEMA,
            "l0mem_version": __version__,
            "backend": self.backend,
            "device": self.device,
            "simulated": self.simulated,
            "no_hardware": self.no_hardware,
            "complete": self.complete,
            "environment": dict(self.environment),
            "elements": self.elements,
            "repetitions": self.repetitions,
            "warmup": self.warmup,
            "timing": self.timing,
            "note": self.note,
            "copy": None if self.copy is None else op(COPY, self.copy),
            "kernels": [
                dict(op(name, m), ratio_to_copy=self.ratio(name))
                for name, m in self.kernels.items()
            ],
            "details": self.details,
        }


def run_kernel_bench(
    backend: Backend,
    device: int = 0,
    *,
    elements: int = DEFAULT_ELEMENTS,
    repetitions: int = 20,
    warmup: int = 3,
    kernels: Sequence[str] | None = None,
    timing: TimingRequest = "auto",
    simulated: bool | None = None,
) -> KernelBenchResult:
    """Measure each kernel and a same-size device copy on ``device``; return the results.

    ``simulated`` labels the numbers as a simulator's; by default the backend says.
    Interrupted (KeyboardInterrupt), it raises :class:`MeasurementInterrupted`
    whose ``partial`` is the run over the samples taken (``complete`` False),
    once the buffers are freed.
    """
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    if repetitions < 1 or warmup < 0:
        raise ValueError("repetitions must be >= 1 and warmup >= 0")
    names = list(KERNELS) if kernels is None else list(kernels)
    for name in names:
        if name not in KERNELS:
            raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    n = elements
    # Without hardware every operation still runs once (the driver's answers are
    # what is tested), but no time is kept: none would be true.
    withheld = backend.no_hardware
    if withheld:
        repetitions, warmup = 1, 0
    buffers: list[DeviceBuffer] = []
    ok = False
    measured: dict[str, Measurement] = {}
    interrupted: KeyboardInterrupt | None = None
    try:
        f32_a = backend.allocate(device, 4 * n)
        f32_b = backend.allocate(device, 4 * n)
        f32_c = backend.allocate(device, 4 * n)
        half = backend.allocate(device, 2 * n)
        buffers = [f32_a, f32_b, f32_c, half]
        # Small normal values: accumulating them for many repetitions never
        # reaches subnormal or infinite results, which some devices run slowly.
        for buf in (f32_a, f32_b, f32_c):
            backend.fill(buf, _ONE_F32)
        backend.fill(half, _ONE_BF16)
        backend.synchronize(device)

        args = {
            "l0mem_f32_to_bf16": [f32_a, half],
            "l0mem_bf16_add_to_f32": [half, f32_b],
            "l0mem_f32_add": [f32_a, f32_b],
        }

        def launch(name: str) -> EventsOp:
            return lambda: (launch_elementwise(backend, name, args[name], n),)

        ops: dict[str, tuple[EventsOp, int]] = {
            COPY: (lambda: (backend.copy(f32_c, f32_a),), 2 * 4 * n),
            **{name: (launch(name), KERNELS[name].bytes_per_element() * n) for name in names},
        }
        measured = time_ops(ops, reps=repetitions, warmup=warmup, timing=timing)
        ok = True
    except MeasurementInterrupted as exc:
        measured, interrupted = dict(exc.partial), exc
    except KeyboardInterrupt as exc:
        # Before the timed rounds (warm-up, set-up): nothing was measured.
        interrupted = exc
    finally:
        with contextlib.suppress(Exception):
            backend.synchronize(device)
        # After a failure (a lost device fails every free too) the failure is the error.
        cleanup([buf.close for buf in buffers], strict=ok)

    # The copy is timed first in every round: a kernel with samples means a copy with some.
    copy = measured.pop(COPY, None)
    result = KernelBenchResult(
        backend=backend.name,
        device=backend.device_name(device),
        elements=n,
        repetitions=repetitions,
        warmup=warmup,
        copy=None if withheld else copy,
        kernels={} if withheld else measured,
        simulated=backend.simulated if simulated is None else simulated,
        no_hardware=withheld,
        complete=interrupted is None,
    )
    if interrupted is not None:
        raise MeasurementInterrupted(result, interrupted) from None
    return result


__all__ = [
    "COPY",
    "DEFAULT_ELEMENTS",
    "SCHEMA",
    "KernelBenchResult",
    "run_kernel_bench",
]
