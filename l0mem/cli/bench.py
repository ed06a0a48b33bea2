"""``l0mem bench``: benchmarks; ``l0mem bench kernels`` compares kernel and copy bandwidth.

``kernels`` runs l0mem's three kernels and a device-to-device copy of the same
size on one device (round-robin, after warm-up) and prints each kernel's
effective bandwidth (bytes read + written per second) and its ratio to the copy
bandwidth. ``--json PATH`` writes the run atomically (schema
``l0mem.bench.kernels/1``, described in :mod:`l0mem.bench.kernels`);
the path is checked before measuring, so a bad one does not cost the run.
Interrupted (Ctrl-C, SIGTERM, SIGHUP), it writes and prints the repetitions
taken so far, marked incomplete (``"complete": false``), and exits 128 + N.

Exit codes of ``bench kernels``: as its ``--help`` lists them (:mod:`l0mem.cli._exits`,
the one table).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from l0mem.cli._common import (
    check_outputs,
    escape,
    exit_epilog,
    measuring,
    open_backend,
    output,
    rendering,
    save_json,
    to_stdout,
)
from l0mem.cli._numbers import IntRange
from l0mem.cli._options import (
    answer_only_option,
    backend_option,
    device_option,
    json_option,
    reps_option,
    verbose_option,
    warmup_option,
)
from l0mem.units import MIB

# Far above any device's largest work-group (1024 on Intel GPUs, 8192 on CPUs):
# only absurd numbers stop here; the backend names the kernels' own limit.
MAX_WORK_GROUP = 1 << 20

GOAL_RATIO = 0.9


def answer_lines(result: Any) -> list[str]:
    """Return the answer first: which kernels reach the goal against a copy, in at most three lines."""
    mark = "[SIMULATOR] " if result.simulated else ""
    ratios = {name: result.ratio(name) for name in result.kernels}
    slow = [f"{n} {r:.2f}x" for n, r in ratios.items() if r < GOAL_RATIO]
    fast = [f"{n} {r:.2f}x" for n, r in ratios.items() if r >= GOAL_RATIO]
    lines = [
        f"{mark}Against a copy of {result.copy.gbps:.2f} GB/s: "
        + (f"below the goal ({GOAL_RATIO:.2f}x): {', '.join(slow)}" if slow else "every kernel "
           f"reaches the goal ({GOAL_RATIO:.2f}x)")
    ]  # fmt: skip
    if slow and fast:
        lines.append(f"At the goal: {', '.join(fast)}")
    if not result.complete:
        lines.append("Interrupted: from the repetitions taken before the stop")
    return lines


def render(
    result: Any,
    console: Console,
    *,
    answer_only: bool = False,
    verbose: bool = False,
    launch: Sequence[tuple[str, str]] = (),
) -> None:
    """Print a kernel benchmark result: the answer, the table; ``verbose``: every signal, ``launch`` too."""
    title = escape(
        f"Kernel bandwidth on {result.device} ({result.backend}, {result.elements:,} elements)"
    )
    if result.copy is None and not result.complete:
        console.print(title)
        console.print("[yellow]Interrupted before any timed repetition: nothing measured.[/yellow]")
        return
    if result.copy is None:
        console.print(title)
        console.print(
            f"[yellow]Not measured: {escape(result.no_hardware or 'no data')}. The copy and "
            "each kernel ran once, untimed.[/yellow]"
        )
        return
    for line in answer_lines(result):
        console.print(escape(line))
    if answer_only:
        return
    console.print()
    table = Table(title=title)
    table.add_column("operation", no_wrap=True)
    # Numbers must never be cut, even at 80 columns; two-line headers keep it narrow.
    for col in ("MiB\nmoved", "median\nGB/s", "range\nGB/s", "spread", "x copy"):
        table.add_column(col, justify="right", no_wrap=True)

    def row(name: str, m: Any, ratio: str) -> None:
        table.add_row(
            name,
            f"{m.bytes_moved / MIB:,.1f}",
            f"{m.gbps:.2f}",
            f"{m.gbps_min:.1f}-{m.gbps_max:.1f}",
            f"{m.spread:.0%}",
            ratio,
        )

    row("copy", result.copy, "1.00")
    for name, m in result.kernels.items():
        r = result.ratio(name)
        style = "green" if r >= GOAL_RATIO else "red"
        row(name, m, f"[{style}]{r:.2f}[/{style}]")
    console.print(table)
    console.print(
        f"{result.repetitions} repetitions after {result.warmup} warm-up rounds, "
        f"{result.timing} timing; goal: each kernel >= {GOAL_RATIO:.2f} x copy."
        if result.complete
        else f"[yellow]Interrupted: partial results after {len(result.copy.samples_ns)} of "
        f"{result.repetitions} repetitions of the copy (a kernel never timed is not shown), "
        f"{result.timing} timing.[/yellow]"
    )
    if result.note:
        console.print(f"[yellow]Note: {result.note}.[/yellow]")
    if result.simulated:
        console.print(
            "[yellow]Simulated driver: these are a simulator's "
            "numbers, not hardware results.[/yellow]"
        )
    if verbose:
        from l0mem.cli.verbose_view import render_kernels

        render_kernels(result, console, launch)


def _sycl_only(work_group_size: int | None, kind: str, backend: str) -> None:
    """Raise a usage error when ``--work-group-size`` is given and ``kind`` is Level Zero."""
    if work_group_size is not None and kind == "l0":
        where = " on this machine" if backend == "auto" else ""
        raise click.UsageError(
            f"--work-group-size applies to --backend sycl only; --backend {backend} "
            f"selects Level Zero{where}"
        )


@click.group()
def bench() -> None:
    """Benchmarks of l0mem's building blocks."""


@bench.command(epilog=exit_epilog("bench kernels"))
@backend_option
@device_option("Default: the first device.")
@click.option(
    "--context",
    type=click.Choice(["default", "single"]),
    default="default",
    show_default=True,
    help="The runtime's default (multi-device) context or a context holding the device alone.",
)
@click.option(
    "--elements",
    type=IntRange(min=1, max=1 << 40),
    default=1 << 24,
    show_default=True,
    help="Elements per kernel launch (the copy moves 4 bytes per element).",
)
@reps_option(20)
@warmup_option(3)
@click.option(
    "--work-group-size",
    type=IntRange(1, MAX_WORK_GROUP),
    help=f"Override the work-group size (SYCL backend only; 1 to {MAX_WORK_GROUP}).",
)
@json_option
@answer_only_option
@verbose_option(
    "each operation's time per repetition in the round-robin order, the exact bytes moved, "
    "the context and work-group size, the driver environment"
)
def kernels(
    backend: str,
    device_specs: tuple[str, ...],
    context: str,
    elements: int,
    reps: int,
    warmup: int,
    work_group_size: int | None,
    json_path: Path | None,
    answer_only: bool,
    verbose: bool,
) -> None:
    """Measure each kernel's bandwidth against the same device's copy bandwidth."""
    from l0mem._ze.guard import check_drivers_load
    from l0mem.backends import SyclBackend, select_devices
    from l0mem.bench.fit import check_fits
    from l0mem.bench.kernels import KernelBenchResult, run_kernel_bench

    check_outputs("bench kernels", [("--json", json_path)])
    if len(device_specs) > 1 or "," in "".join(device_specs):
        raise click.BadParameter("bench kernels runs on one device", param_hint="--device")
    # --backend l0 contradicts the option on any machine; auto is known once resolved.
    _sycl_only(work_group_size, backend, backend)
    with measuring("bench kernels"):
        check_drivers_load()  # a driver that hangs or crashes in zeInit takes a child, not l0mem
        kind, chosen = select_devices(backend, device_specs)
    _sycl_only(work_group_size, kind, backend)

    def keep(result: KernelBenchResult) -> None:
        # The report first: a reader of the tables that goes away (| head) must not lose it.
        if json_path is not None:
            save_json("bench kernels", json_path, result.to_dict())
        with rendering():
            render(
                result,
                output(stderr=to_stdout(json_path)),
                answer_only=answer_only,
                verbose=verbose,
                launch=launch,
            )

    # How the kernels were launched, read once they ran (shown by -v only).
    launch: list[tuple[str, str]] = []

    # Interrupted, the repetitions taken are written and shown, marked incomplete.
    with measuring("bench kernels", keep), open_backend(kind, chosen[:1], context=context) as b:
        if work_group_size is not None and isinstance(b, SyclBackend):
            try:
                b.set_work_group_size(work_group_size)
            except ValueError as err:
                raise click.BadParameter(str(err), param_hint="--work-group-size") from None
        # Three FP32 buffers and one BF16 buffer, the largest 4 bytes an element,
        # checked like every command's sizes before anything is allocated.
        check_fits(
            b,
            [0],
            per_device=14 * elements,
            largest=4 * elements,
            host=0,
            what=f"--elements {elements:,} (14 bytes each)",
        )
        result = run_kernel_bench(b, 0, elements=elements, repetitions=reps, warmup=warmup)
        if verbose:
            launch.extend(launch_facts(b, context, elements, work_group_size))
    keep(result)


def launch_facts(
    b: Any, context: str, elements: int, work_group_size: int | None
) -> list[tuple[str, str]]:
    """Return how the kernels were launched: the context and each kernel's work-group size."""
    from l0mem.backends import SyclBackend
    from l0mem.backends.kernels import KERNELS

    where = "the runtime's multi-device one" if context == "default" else "the device alone"
    facts = [("context", f"{context} ({where})"), ("work-items", f"{elements:,} per launch")]
    if not isinstance(b, SyclBackend):
        facts.append(
            (
                "work-group size",
                "the Level Zero driver's suggestion for each launch "
                "(zeKernelSuggestGroupSize), not recorded",
            )
        )
        return facts
    given = "" if work_group_size is None else " (--work-group-size)"
    for name in KERNELS:
        try:
            size = f"{b.work_group_size(0, name, elements):,}{given}"
        except ValueError as err:
            size = str(err)
        facts.append((f"work-group {name}", size))
    return facts
