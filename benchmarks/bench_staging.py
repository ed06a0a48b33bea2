"""Host-staged copies: the pinned ring against its legs and against the naive way, one run.

    python -m benchmarks.bench_staging                                   # SYCL CPU sub-devices
    python -m benchmarks.bench_staging --backend l0 --context single     # Level Zero devices
    python -m benchmarks.bench_staging --chunks 2M,4M,8M --slots 2,3,4 --sizes 16M,64M

For each size and each ring shape (chunk bytes, slots) it times, round-robin
in one run (:func:`l0mem.bench.timing.time_ops`, host clock): the download
from device 0 into pinned host memory, the upload from pinned host memory to
device 1, the staged copy through a :class:`l0mem.backends.staging.Stager`
of that shape, and the naive staged copy (a fresh pageable buffer, download
then upload: what l0mem did before the ring). It prints the staged copy's
bandwidth over the slower leg's (the goal: 0.8 or more) and over the naive
copy's. On l0mem's simulator set ``ZESIM_LINK_GBPS`` (e.g. 1) so that copies
take a link's time on engines that run at once; its numbers are a
simulator's. Options are checked before anything is measured.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.args import positive
from l0mem.backends import (
    Backend,
    DeviceBuffer,
    Event,
    HostMemory,
    NoDeviceError,
    open_backend,
)
from l0mem.backends.staging import Stager
from l0mem.bench.timing import time_ops
from l0mem.units import format_size, parse_sizes


def naive_staged(backend: Backend, dst: DeviceBuffer, src: DeviceBuffer, n: int) -> Sequence[Event]:
    """Copy through a fresh pageable buffer, download then upload (the reference)."""
    staging = bytearray(n)
    down = backend.download(src.view(0, n), staging)
    return (down, backend.upload(dst.view(0, n), staging, wait_for=[down]))


def _leg(op: Callable[..., Event], buf: DeviceBuffer, host: HostMemory, n: int) -> Sequence[Event]:
    return (op(buf.view(0, n), host.view(0, n)),)


def _ring_copy(stager: Stager, dst: DeviceBuffer, src: DeviceBuffer, n: int) -> Sequence[Event]:
    return stager.copy(dst.view(0, n), src.view(0, n), n)


def measure(
    backend: Backend,
    sizes: Sequence[int],
    shapes: Sequence[tuple[int, int]],
    *,
    reps: int,
    warmup: int,
) -> list[dict[str, Any]]:
    """Return one row per size and ring shape: GB/s of the legs, the ring and the naive copy."""
    if backend.device_count() < 2:
        raise NoDeviceError("the benchmark needs two devices (SYCL: --sub-devices 2)")
    biggest = max(sizes)
    src, dst = backend.allocate(0, biggest), backend.allocate(1, biggest)
    down_host, up_host = backend.allocate_host(0, biggest), backend.allocate_host(1, biggest)
    stagers = {shape: Stager(backend, chunk=shape[0], slots=shape[1]) for shape in shapes}
    rows = []
    try:
        backend.fill(src, b"\x5a").wait()
        for n in sizes:
            ops: dict[Any, tuple[Callable[[], Sequence[Event]], int]] = {
                "download": (partial(_leg, backend.download, src, down_host, n), n),
                "upload": (partial(_leg, backend.upload, dst, up_host, n), n),
                "naive": (partial(naive_staged, backend, dst, src, n), n),
            }
            for shape, stager in stagers.items():
                ops[shape] = (partial(_ring_copy, stager, dst, src, n), n)
            got = time_ops(ops, reps=reps, warmup=warmup, timing="host")
            leg = min(got["download"].gbps, got["upload"].gbps)
            for shape in shapes:
                staged = got[shape].gbps
                rows.append(
                    {
                        "nbytes": n,
                        "chunk": shape[0],
                        "slots": shape[1],
                        "download_gbps": got["download"].gbps,
                        "upload_gbps": got["upload"].gbps,
                        "naive_gbps": got["naive"].gbps,
                        "staged_gbps": staged,
                        "ratio_to_leg": staged / leg,
                        "ratio_to_naive": staged / got["naive"].gbps,
                    }
                )
    finally:
        backend.synchronize()
        for stager in stagers.values():
            stager.close()
        for item in (down_host, up_host, src, dst):
            item.close()
    return rows


def render(rows: list[dict[str, Any]], title: str, console: Console) -> None:
    """Print the rows as one table."""
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for col in (
        "size",
        "chunk x slots",
        "to host",
        "from host",
        "naive",
        "ring",
        "ring/leg",
        "ring/naive",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            format_size(r["nbytes"]),
            f"{format_size(r['chunk'])}x{r['slots']}",
            f"{r['download_gbps']:.2f}",
            f"{r['upload_gbps']:.2f}",
            f"{r['naive_gbps']:.2f}",
            f"{r['staged_gbps']:.2f}",
            f"{r['ratio_to_leg']:.2f}",
            f"{r['ratio_to_naive']:.2f}",
        )
    console.print(table)
    console.print(
        "GB/s, medians, host clock. ring/leg: the staged copy over the slower leg (goal >= 0.8); "
        "ring/naive: over a fresh pageable buffer, download then upload."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, measure, print; return the exit code."""
    p = argparse.ArgumentParser(prog="bench_staging.py", description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("sycl", "l0"), default="sycl")
    p.add_argument("--context", choices=("default", "single"), default="default")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("16M,64M"))
    p.add_argument("--chunks", type=parse_sizes, default=parse_sizes("4M,8M"))
    p.add_argument("--slots", default="3,4", help="comma-separated slot counts, each >= 2")
    p.add_argument("--reps", type=positive, default=5)
    p.add_argument("--warmup", type=positive, default=1)
    args = p.parse_args(argv)
    try:
        slots = [int(s) for s in args.slots.split(",")]
    except ValueError:
        p.error(f"--slots: expected comma-separated integers, got {args.slots!r}")
    if any(s < 2 for s in slots):
        p.error("--slots: each slot count must be at least 2")
    shapes = [(c, s) for c in args.chunks for s in slots]
    devices: list[int | str] = ["opencl:cpu"] if args.backend == "sycl" else [0, 1]
    try:
        backend = open_backend(
            args.backend,
            devices,
            context=args.context,
            sub_devices=2 if args.backend == "sycl" else None,
        )
    except NoDeviceError as err:
        print(f"bench_staging.py: {err}", file=sys.stderr)
        return 3
    with backend:
        title = f"Host-staged copies, {backend.device_name(0)} > {backend.device_name(1)}"
        if not backend.same_context(0, 1):
            title += " (separate contexts)"
        rows = measure(backend, args.sizes, shapes, reps=args.reps, warmup=args.warmup)
        render(rows, title, Console())
        if backend.simulated:
            Console().print("[yellow]simulated driver: a simulator's numbers[/yellow]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
