"""Kernel bandwidth vs copy bandwidth on a SYCL device, swept over work-group sizes.

    python benchmarks/bench_kernels.py                       # SYCL CPU device
    python benchmarks/bench_kernels.py --device level_zero:gpu --sizes 64,256,1024
    python benchmarks/bench_kernels.py --json sweep.json

Each work-group size is one :func:`l0mem.kernel_bench.run_kernel_bench` run
(the copy is re-measured in every run, so each ratio compares like with like).
``l0mem bench kernels`` is the single-run command-line form.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from l0mem.kernel_bench import KernelBenchResult, run_kernel_bench
from l0mem.kernels import KERNELS
from l0mem.sycl import SyclBackend, SyclUnavailableError

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
            used = b.work_group_size(0, "l0mem_f32_add")
            result = run_kernel_bench(b, elements=elements, repetitions=repetitions, warmup=warmup)
        out.append((used, result))
    return out


def to_json(runs: list[tuple[int, KernelBenchResult]]) -> dict[str, Any]:
    """Return the sweep as a JSON-ready dict."""
    return {
        "schema": SCHEMA,
        "runs": [dict(r.to_dict(), work_group_size=size) for size, r in runs],
    }


def _write_atomic(path: Path, payload: dict[str, Any]) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def render(runs: list[tuple[int, KernelBenchResult]], console: Console) -> None:
    """Print one row per work-group size: copy GB/s and each kernel's ratio to it."""
    first = runs[0][1]
    table = Table(title=escape(f"{first.device}: kernel / copy bandwidth ({first.elements:,} elements)"))
    table.add_column("work-group", justify="right")
    table.add_column("copy GB/s", justify="right")
    for name in KERNELS:
        table.add_column(name.removeprefix("l0mem_"), justify="right")
    for size, r in runs:
        table.add_row(
            str(size),
            f"{r.copy.gbps:.2f} (±{r.copy.spread:.0%})",
            *(f"{r.ratio(name):.2f}" for name in KERNELS),
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep from the command line; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:cpu", help="SYCL filter string")
    parser.add_argument(
        "--sizes",
        default="default,64,128,256,512,1024",
        help="comma-separated work-group sizes ('default' = the backend's choice)",
    )
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the sweep as JSON to this path")
    args = parser.parse_args(argv)
    try:
        sizes = [None if s.strip() == "default" else int(s) for s in args.sizes.split(",")]
    except ValueError:
        print(f"error: --sizes must be integers or 'default', got {args.sizes!r}", file=sys.stderr)
        return 2
    try:
        runs = sweep(
            args.device,
            sizes,
            elements=args.elements,
            repetitions=args.repetitions,
            warmup=args.warmup,
        )
    except (SyclUnavailableError, LookupError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    render(runs, Console())
    if args.json is not None:
        _write_atomic(args.json, to_json(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
