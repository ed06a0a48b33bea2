"""Kernel bandwidth against the same device's device-to-device copy bandwidth.

Effective bandwidth counts the bytes a kernel must read plus the bytes it
writes (6, 10 and 12 bytes per element for compress, decompress-add and add);
a copy of N bytes moves 2N. Operations are timed round-robin, so slow phases
of a shared machine hit all of them alike, with device timestamps when the
backend's events carry them and host wall time around enqueue + wait
otherwise. Nothing is printed here: the functions return results.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from l0mem import __version__
from l0mem.backends import Backend, DeviceBuffer, Event
from l0mem.backends.kernels import KERNELS, launch_elementwise

SCHEMA = "l0mem.bench.kernels/1"
COPY = "copy"
DEFAULT_ELEMENTS = 1 << 24
_ONE_F32 = b"\x00\x00\x80\x3f"
_ONE_BF16 = b"\x80\x3f"


@dataclass(frozen=True)
class Measurement:
    """Repeated timings of one operation moving ``bytes_moved`` bytes each time."""

    name: str
    bytes_moved: int
    samples_ns: tuple[int, ...]

    def _check(self) -> None:
        if not self.samples_ns:
            raise ValueError(f"{self.name}: no samples")

    @property
    def median_ns(self) -> float:
        """Return the median duration in ns."""
        self._check()
        return float(statistics.median(self.samples_ns))

    @property
    def gbps(self) -> float:
        """Return the effective bandwidth at the median duration, in GB/s (1e9 bytes)."""
        return self.bytes_moved / max(self.median_ns, 1.0)

    @property
    def gbps_range(self) -> tuple[float, float]:
        """Return (slowest, fastest) bandwidth over the samples, in GB/s."""
        self._check()
        return (
            self.bytes_moved / max(max(self.samples_ns), 1),
            self.bytes_moved / max(min(self.samples_ns), 1),
        )

    @property
    def spread(self) -> float:
        """Return (max - min) / median of the durations: 0 means perfectly steady."""
        self._check()
        return (max(self.samples_ns) - min(self.samples_ns)) / max(self.median_ns, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the samples and their summary."""
        slow, fast = self.gbps_range
        return {
            "name": self.name,
            "bytes_moved": self.bytes_moved,
            "samples_ns": list(self.samples_ns),
            "median_ns": self.median_ns,
            "gbps": self.gbps,
            "gbps_min": slow,
            "gbps_max": fast,
            "spread": self.spread,
        }


@dataclass(frozen=True)
class KernelBenchResult:
    """One benchmark run: the copy reference and every kernel on one device."""

    backend: str
    device: str
    elements: int
    repetitions: int
    warmup: int
    timing: Literal["device", "host"]
    copy: Measurement
    kernels: tuple[Measurement, ...]
    simulated: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def ratio(self, name: str) -> float:
        """Return the kernel's bandwidth divided by the copy bandwidth."""
        for m in self.kernels:
            if m.name == name:
                return m.gbps / self.copy.gbps
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Return the run as a JSON-ready dict (schema ``l0mem.bench.kernels/1``)."""
        return {
            "schema": SCHEMA,
            "l0mem_version": __version__,
            "backend": self.backend,
            "device": self.device,
            "simulated": self.simulated,
            "elements": self.elements,
            "repetitions": self.repetitions,
            "warmup": self.warmup,
            "timing": self.timing,
            "copy": self.copy.to_dict(),
            "kernels": [dict(m.to_dict(), ratio_to_copy=self.ratio(m.name)) for m in self.kernels],
            "details": self.details,
        }


def _time_host(op: Callable[[], Event]) -> int:
    start = time.perf_counter_ns()
    op().wait()
    return time.perf_counter_ns() - start


def _time_device(op: Callable[[], Event]) -> int | None:
    ev = op()
    ev.wait()
    return ev.elapsed_ns()


def run_kernel_bench(
    backend: Backend,
    device: int = 0,
    *,
    elements: int = DEFAULT_ELEMENTS,
    repetitions: int = 20,
    warmup: int = 3,
    kernels: Sequence[str] | None = None,
    timing: Literal["auto", "device", "host"] = "auto",
    simulated: bool = False,
) -> KernelBenchResult:
    """Measure each kernel and a same-size device copy on ``device``; return the results."""
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    if repetitions < 1 or warmup < 0:
        raise ValueError("repetitions must be >= 1 and warmup >= 0")
    names = list(KERNELS) if kernels is None else list(kernels)
    for name in names:
        if name not in KERNELS:
            raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    n = elements
    buffers: list[DeviceBuffer] = []
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

        ops: dict[str, Callable[[], Event]] = {
            COPY: lambda: backend.copy(f32_c, f32_a),
            "l0mem_f32_to_bf16": lambda: launch_elementwise(
                backend, "l0mem_f32_to_bf16", [f32_a, half], n
            ),
            "l0mem_bf16_add_to_f32": lambda: launch_elementwise(
                backend, "l0mem_bf16_add_to_f32", [half, f32_b], n
            ),
            "l0mem_f32_add": lambda: launch_elementwise(backend, "l0mem_f32_add", [f32_a, f32_b], n),
        }
        order = [COPY, *names]
        for _ in range(warmup):
            for name in order:
                ops[name]().wait()

        mode = timing
        if mode == "auto":
            mode = "device" if _time_device(ops[COPY]) is not None else "host"
        samples: dict[str, list[int]] = {name: [] for name in order}
        for _ in range(repetitions):
            for name in order:
                ns = _time_host(ops[name]) if mode == "host" else _time_device(ops[name])
                if ns is None:
                    raise RuntimeError(f"{backend.name}: {name} event carries no device timing")
                samples[name].append(ns)
    finally:
        with contextlib.suppress(Exception):
            backend.synchronize(device)
        for buf in buffers:
            buf.close()

    copy = Measurement(COPY, 2 * 4 * n, tuple(samples[COPY]))
    measured = tuple(
        Measurement(name, KERNELS[name].bytes_per_element() * n, tuple(samples[name]))
        for name in names
    )
    return KernelBenchResult(
        backend=backend.name,
        device=backend.device_name(device),
        elements=n,
        repetitions=repetitions,
        warmup=warmup,
        timing=mode,
        copy=copy,
        kernels=measured,
        simulated=simulated,
    )


__all__ = [
    "COPY",
    "DEFAULT_ELEMENTS",
    "SCHEMA",
    "KernelBenchResult",
    "Measurement",
    "run_kernel_bench",
]
