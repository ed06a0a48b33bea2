"""Kernel bandwidth vs copy bandwidth on a SYCL device, swept over work-group sizes.

    python -m benchmarks.bench_kernels                       # SYCL CPU device
    python -m benchmarks.bench_kernels --device level_zero:gpu --work-group-sizes 64,256,1024
    python -m benchmarks.bench_kernels --json sweep.json

Each work-group size is one :func:`l0mem.bench.kernels.run_kernel_bench` run
(the copy is re-measured in every run, so each ratio compares like with like).
``l0mem bench kernels`` is the single-run command-line form. Options and the
``--json`` path are checked before anything is measured. (The sweep option is
``--work-group-sizes``: in l0mem, ``--sizes`` always means bytes per buffer.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmarks.args import non_negative, positive
from l0mem.backends import SyclBackend
from l0mem.backends.kernels import KERNELS
from l0mem.bench.kernels import KernelBenchResult, run_kernel_bench
from l0mem.files import check_writable, write_json
from l0mem.sycl import SyclNoDeviceError, SyclUnavailableError, parse_filter

SCHEMA = "l0mem.bench.kernels-sweep/1"


def sweep(
    device: str,
    sizes: list[int | None],
    *,
    elements: int,
    repetitions: int,
    warmup: int,
) -> list[tuple[int, KernelBenchResult]]:
    """Return (work-group size, result) for each size; None means the backend's default."""
    out: list[tuple[int, KernelBenchResult]] = []
    for size in sizes:
        with SyclBackend([device], profiling=True, work_group_size=size) as b:
            used = b.work_group_size(0, "l0mem_f32_add", elements)
            result = run_kernel_bench(b, elements=elements, repetitions=repetitions, warmup=warmup)
        out.append((used, result))
    return out


def check_sizes(device: str, sizes: list[int | None]) -> None:
    """Raise ValueError unless every work-group size fits the kernels on ``device``."""
    with SyclBackend([device]) as b:
        for size in sizes:
            b.set_work_group_size(size)


def to_json(runs: list[tuple[int, KernelBenchResult]]) -> dict[str, Any]:
    """Return the sweep as a JSON-ready dict."""
    return {
        "schema": SCHEMA,
        "runs": [dict(r.to_dict(), work_group_size=size) for size, r in runs],
    }


def render(runs: list[tuple[int, KernelBenchResult]], console: Console) -> None:
    """Print one row per work-group size: copy GB/s and each kernel's ratio to it."""
    first = runs[0][1]
    table = Table(
        title=escape(f"{first.device}: kernel / copy bandwidth ({first.elements:,} elements)")
    )
    table.add_column("work-group", justify="right")
    table.add_column("copy GB/s", justify="right")
    for name in KERNELS:
        table.add_column(name.removeprefix("l0mem_"), justify="right")
    for size, r in runs:
        if r.copy is None:
            table.add_row(str(size), f"not measured: {r.no_hardware}")
            continue
        table.add_row(
            str(size),
            f"{r.copy.gbps:.2f} (±{r.copy.spread:.0%})",
            *(f"{r.ratio(name):.2f}" for name in KERNELS),
        )
    console.print(table)


def _sizes(text: str) -> list[int | None]:
    sizes: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "default":
            sizes.append(None)
            continue
        try:
            sizes.append(positive(part))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"work-group sizes must be positive integers or 'default', got {text!r}"
            ) from None
    return sizes


def _error(message: str) -> None:
    print(f"bench_kernels.py: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep from the command line; return the exit status.

    0 on success, 2 on bad options, 3 when the device is unavailable, 4 when
    the JSON file cannot be written, 6 when the runtime fails while measuring.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:cpu", help="SYCL filter string")
    parser.add_argument(
        "--work-group-sizes",
        type=_sizes,
        default="default,64,128,256,512,1024",
        help="comma-separated work-group sizes ('default' = the backend's choice)",
    )
    parser.add_argument("--elements", type=positive, default=1 << 24)
    parser.add_argument("--reps", type=positive, default=20)
    parser.add_argument("--warmup", type=non_negative, default=3)
    parser.add_argument("--json", type=Path, help="write the sweep as JSON to this path")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        parse_filter(args.device)
    except ValueError as err:
        _error(f"--device: {err}")
        return 2
    if args.json is not None:
        try:
            check_writable(args.json)
        except OSError as err:
            _error(str(err))
            return 4
    try:
        check_sizes(args.device, args.work_group_sizes)
    except (SyclUnavailableError, SyclNoDeviceError) as err:
        _error(str(err))
        return 3
    except ValueError as err:
        _error(f"--work-group-sizes: {err}")
        return 2
    try:
        runs = sweep(
            args.device,
            args.work_group_sizes,
            elements=args.elements,
            repetitions=args.reps,
            warmup=args.warmup,
        )
    except (SyclUnavailableError, SyclNoDeviceError) as err:
        _error(str(err))
        return 3
    except KeyboardInterrupt:
        _error("interrupted; device memory was freed")
        return 130
    except Exception as err:
        _error(f"{type(err).__name__}: {err}".splitlines()[0])
        return 6
    render(runs, Console())
    if args.json is not None:
        try:
            write_json(args.json, to_json(runs))
        except OSError as err:
            _error(str(err))
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
