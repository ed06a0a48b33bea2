"""``l0mem bench``: benchmarks; ``l0mem bench kernels`` compares kernel and copy bandwidth.

``kernels`` runs l0mem's three kernels and a device-to-device copy of the same
size on one device (round-robin, after warm-up) and prints each kernel's
effective bandwidth (bytes read + written per second) and its ratio to the copy
bandwidth. ``--json PATH`` writes the run atomically (schema
``l0mem.bench.kernels/1``, see :meth:`l0mem.kernel_bench.KernelBenchResult.to_dict`);
the path is checked before measuring, so a bad one does not cost the run.

Exit codes: 0 on success, 2 on bad options (including a work-group size above
the kernels' limit on the device), 3 when the backend or device is unavailable
(including a missing dpctl for ``--backend sycl``), 4 when the ``--json`` path
cannot be written, 6 when the runtime fails while measuring, 130 on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from l0mem.cli._common import ExitCode

GOAL_RATIO = 0.9
MIB = 1 << 20


class _Unavailable(Exception):
    """The requested backend or device cannot be used here."""


def _fail(code: ExitCode, message: str) -> None:
    click.echo(f"l0mem bench kernels: {message}", err=True)
    raise SystemExit(int(code))


@contextlib.contextmanager
def _open_backend(
    backend: str, device: str | None, context: str, work_group_size: int | None
) -> Iterator[tuple[Any, int, bool]]:
    """Yield (backend object, device index, simulated) for the options given."""
    if backend == "sycl":
        from l0mem.sycl import SyclBackend, SyclNoDeviceError, SyclUnavailableError

        try:
            sb = SyclBackend(
                None if device is None else [device],
                context="single" if context == "single" else "default",
                profiling=True,
            )
        except (SyclUnavailableError, SyclNoDeviceError) as err:
            raise _Unavailable(str(err)) from None
        try:
            try:
                sb.set_work_group_size(work_group_size)
            except ValueError as err:
                raise click.BadParameter(str(err), param_hint="--work-group-size") from None
            yield sb, 0, False
        finally:
            sb.close()
        return
    if work_group_size is not None:
        raise click.UsageError("--work-group-size applies to --backend sycl only")
    from l0mem._ze.errors import LoaderError, UninitializedError
    from l0mem.core import drivers
    from l0mem.core.backend import LevelZeroBackend

    try:
        found = drivers()
    except (LoaderError, UninitializedError) as err:
        raise _Unavailable(f"no usable Level Zero driver: {err}") from None
    devs = found[0].devices() if found else []
    if not devs:
        raise _Unavailable("no Level Zero device found")
    index = 0
    if device is not None:
        if not device.isdigit() or int(device) >= len(devs):
            raise click.BadParameter(
                f"expected a Level Zero device index 0..{len(devs) - 1}, got {device!r}",
                param_hint="--device",
            )
        index = int(device)
    b = LevelZeroBackend([devs[index]], context="single" if context == "single" else "multi")
    try:
        yield b, 0, bool(os.environ.get("ZE_ENABLE_ALT_DRIVERS"))
    finally:
        b.close()


def render(result: Any, console: Console) -> None:
    """Print a kernel benchmark result as a rich table."""
    title = escape(
        f"Kernel bandwidth on {result.device} ({result.backend}, {result.elements:,} elements)"
    )
    table = Table(title=title)
    table.add_column("operation", no_wrap=True)
    # Numbers must never be cut, even at 80 columns; two-line headers keep it narrow.
    for col in ("MiB\nmoved", "median\nGB/s", "range\nGB/s", "spread", "x copy"):
        table.add_column(col, justify="right", no_wrap=True)

    def row(m: Any, ratio: str) -> None:
        slow, fast = m.gbps_range
        table.add_row(
            m.name,
            f"{m.bytes_moved / MIB:,.1f}",
            f"{m.gbps:.2f}",
            f"{slow:.1f}-{fast:.1f}",
            f"{m.spread:.0%}",
            ratio,
        )

    row(result.copy, "1.00")
    for m in result.kernels:
        r = result.ratio(m.name)
        style = "green" if r >= GOAL_RATIO else "red"
        row(m, f"[{style}]{r:.2f}[/{style}]")
    console.print(table)
    console.print(
        f"{result.repetitions} repetitions after {result.warmup} warm-up rounds, "
        f"{result.timing} timing; goal: each kernel >= {GOAL_RATIO:.2f} x copy."
    )
    if result.simulated:
        console.print(
            "[yellow]Simulated driver (ZE_ENABLE_ALT_DRIVERS): these are a simulator's "
            "numbers, not hardware results.[/yellow]"
        )


@click.group()
def bench() -> None:
    """Benchmarks of l0mem's building blocks."""


@bench.command()
@click.option(
    "--backend",
    type=click.Choice(["sycl", "l0"]),
    default="sycl",
    show_default=True,
    help="Run through dpctl (SYCL) or the Level Zero binding.",
)
@click.option(
    "--device",
    help="SYCL filter string (e.g. level_zero:gpu:0, opencl:cpu) or Level Zero device index.",
)
@click.option(
    "--context",
    type=click.Choice(["default", "single"]),
    default="default",
    show_default=True,
    help="Platform default (multi-device) context or a context holding the device alone.",
)
@click.option(
    "--elements",
    type=click.IntRange(min=1),
    default=1 << 24,
    show_default=True,
    help="Elements per kernel launch (the copy moves 4 bytes per element).",
)
@click.option("--repetitions", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option(
    "--work-group-size",
    type=click.IntRange(min=1),
    help="Override the work-group size (SYCL only).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as JSON to PATH.",
)
def kernels(
    backend: str,
    device: str | None,
    context: str,
    elements: int,
    repetitions: int,
    warmup: int,
    work_group_size: int | None,
    json_path: Path | None,
) -> None:
    """Measure each kernel's bandwidth against the same device's copy bandwidth."""
    from l0mem.kernel_bench import check_writable, run_kernel_bench, write_json

    if backend == "sycl" and device is not None:
        from l0mem.sycl import parse_filter

        try:
            parse_filter(device)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--device") from None
    if json_path is not None:
        try:
            check_writable(json_path)
        except OSError as err:
            _fail(ExitCode.BAD_INPUT, f"cannot write {json_path}: {err.strerror or err}")
    try:
        with _open_backend(backend, device, context, work_group_size) as (b, index, simulated):
            result = run_kernel_bench(
                b,
                index,
                elements=elements,
                repetitions=repetitions,
                warmup=warmup,
                simulated=simulated,
            )
    except _Unavailable as err:
        _fail(ExitCode.NO_DEVICE, str(err))
    except KeyboardInterrupt:
        _fail(ExitCode.INTERRUPTED, "interrupted; device memory was freed")
    except MemoryError as err:
        _fail(ExitCode.DRIVER_ERROR, f"out of device memory: {err}")
    except click.ClickException:
        raise
    except Exception as err:
        _fail(ExitCode.DRIVER_ERROR, f"{type(err).__name__}: {err}".splitlines()[0])
    render(result, Console())
    if json_path is not None:
        try:
            write_json(json_path, result)
        except OSError as err:
            _fail(ExitCode.BAD_INPUT, f"cannot write {json_path}: {err.strerror or err}")
