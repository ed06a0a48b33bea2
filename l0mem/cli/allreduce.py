"""``l0mem allreduce``: time and check the FP32 / BF16-compressed all-reduce over N devices.

For every size of the sweep (bytes per device buffer, as ``--sizes`` means
in every l0mem command; each a whole number of FP32 elements, so a multiple
of 4) the command runs both paths of :class:`l0mem.allreduce.AllReduce`
(``f32`` and ``bf16``, whatever the threshold would pick; ``--threshold``
counts elements; the row the threshold picks is marked) on random inputs
and reports:

- time: host clock from the first enqueue until every device has finished,
  median and spread over the repetitions (inputs are re-uploaded,
  untimed, before each one);
- bytes that crossed between devices, as counted by the library per copy;
- bus bandwidth in the NCCL convention, ``4 nelem / time * 2 (N-1) / N``
  (FP32 payload, so compression shows as a higher figure), and the wire
  rate, total bytes crossed / time;
- the largest error against an FP64 NumPy sum, as a fraction of the bound
  the path's roundings allow (:func:`l0mem.allreduce.error_bound`), and
  whether every device holds the same bits.

``--count N`` runs over the first N of the selected devices (``--devices N``,
its old name, still works and prints a deprecation notice). ``--json PATH``
writes the run atomically (schema ``l0mem.allreduce/1``, documented in
docs/allreduce-json.md; non-finite numbers are written as null); the path is
checked before any device is opened. Before any input is made, the largest
size is checked against every device's memory and the host's available
memory.

Exit codes: as ``--help`` lists them (:mod:`l0mem.cli._exits`, the one table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import click
from rich.console import Console

from l0mem.cli._common import (
    ExitCode,
    check_outputs,
    escape,
    exit_epilog,
    fail,
    measuring,
    notice,
    open_backend,
    output,
    rendering,
    save_json,
    to_stdout,
)
from l0mem.cli._numbers import IntRange
from l0mem.cli._options import (
    MAX_DEVICES,
    MAX_SEED,
    answer_only_option,
    backend_option,
    device_option,
    hang_after_option,
    json_option,
    reps_option,
    sizes_option,
    sub_devices_option,
    verbose_option,
    warmup_option,
)
from l0mem.cli.layout import fitted
from l0mem.units import MAX_SIZE, format_bytes


def _ms(ns: float) -> str:
    ms = ns / 1e6
    return f"{ms:,.0f}" if ms >= 1000 else f"{ms:.4g}"


def _num(value: float | None, spec: str) -> str:
    # NaN (a device result holding NaN) is not equal to itself.
    return "-" if value is None or value != value else format(value, spec)


# Short headers on two lines keep the table narrow (stacked, a header is one label: "time ms").
_COLUMNS = (
    "elements",
    "path",
    "time\nms",
    "spread",
    "vs\npath",
    "crossed",
    "bus\nGB/s",
    "max\nerror",
    "err/\nbound",
    "same\nbits",
)


def answer_lines(report: dict[str, Any]) -> list[str]:
    """Return the answer first: were the sums right, and what BF16 saved at the largest size."""
    mark = "[SIMULATOR] " if report.get("simulated") else ""
    results = report["results"]
    if not results:
        return [f"{mark}Nothing measured"]
    wrong = [r for r in results if not r["within_bound"] or not r["identical"]]
    lines = [
        f"{mark}Every sum within its error bound and the same on every device"
        if not wrong
        else f"{mark}Wrong sums: "
        + ", ".join(
            f"{r['path']} at {r['nelem']:,} elements "
            f"({'outside its bound' if not r['within_bound'] else 'devices disagree'})"
            for r in wrong
        )
    ]
    top = max(r["nelem"] for r in results)
    at = {r["path"]: r for r in results if r["nelem"] == top}
    if "f32" in at and "bf16" in at:
        f32, bf16 = at["f32"]["time_ns"]["median"], at["bf16"]["time_ns"]["median"]
        picked = next((p for p, r in at.items() if r["auto"]), "-")
        lines.append(
            f"At {top:,} elements: bf16 {_ms(bf16)} ms, f32 {_ms(f32)} ms "
            f"(bf16 takes {bf16 / f32:.2f}x f32's time); the threshold picks {picked}"
        )
    if report.get("complete") is False:
        # Ctrl-C or a hang: the line on stderr says which, and where.
        lines.append("Stopped before the end: the sizes finished before the stop")
    return lines


def render(
    report: dict[str, Any], console: Console, *, answer_only: bool = False, verbose: bool = False
) -> None:
    """Print an all-reduce report: the answer, a table or its rows stacked (no number cut), ``verbose``: all."""
    if not report.get("no_hardware"):
        for line in answer_lines(report):
            console.print(escape(line))
        if answer_only:
            return
        console.print()
    names = ", ".join(f"{d['index']}: {d['name']}" for d in report["devices"])
    console.print(
        escape(f"All-reduce over {len(report['devices'])} devices ({report['backend']}): {names}")
    )
    if report.get("no_hardware"):
        console.print(
            f"[yellow]Not measured or checked: {escape(report['no_hardware'])}. Both paths ran "
            "once for every size; no time and no sum is shown.[/yellow]"
        )
        return
    routes = sorted(set(report["routes"].values()))
    rows = []
    for r in report["results"]:
        t = r["time_ns"]
        good = r["within_bound"]
        rows.append(
            (
                f"{r['nelem']:,}",
                f"{r['path']}{' *' if r['auto'] else ''}",
                _ms(t["median"]),
                f"{t['spread']:.0%}",
                _num(r.get("time_to_critical_path"), ".2f"),
                format_bytes(r["total_bytes_crossed"], digits=1),
                _num(r["busbw_gbps"], ".2f"),
                _num(r["max_abs_error"], ".2g"),
                f"[{'green' if good else 'red'}]{_num(r['max_error_to_bound'], '.3f')}[/]",
                "yes" if r["identical"] else "[red]no[/]",
            )
        )
    # A table where it fits the terminal, else one block per row: a number is never cut.
    title = f"threshold {report['threshold']:,} elements; copies {'/'.join(routes) or '-'}"
    table = fitted(
        console, escape(title), _COLUMNS, rows, right=_COLUMNS, compact=True, heading="{} elements"
    )
    console.print(table, crop=False)
    console.print()
    console.print(
        "ms: median time, spread: (slowest - fastest) / median; vs path: the time over the "
        "critical path of its copies and kernels, each timed alone in this run (1.00: no "
        "overhead); crossed: bytes between devices "
        "per call; bus GB/s: 4 elements / time x 2(N-1)/N. * = the path the threshold picks. "
        "err/bound <= 1 means within the bound the path's BF16/FP32 roundings allow (vs. an "
        "FP64 sum). --json has every sample and the wire rate."
    )
    if verbose:
        from l0mem.cli.verbose_view import render_allreduce

        render_allreduce(report, console)
    if report["simulated"]:
        console.print(
            "[yellow]Simulated driver: these are a simulator's numbers, not hardware results.[/yellow]"
        )


def _whole_fp32(nbytes: int) -> None:
    """Raise ValueError unless ``nbytes`` is a whole number of FP32 elements."""
    from l0mem.bench.allreduce import fp32_elements

    fp32_elements(nbytes)


@click.command(epilog=exit_epilog("allreduce"))
@backend_option
@device_option()
@click.option(
    "--count",
    type=IntRange(2, MAX_DEVICES),
    metavar="N",
    help="Use the first N of the selected devices (default: all of them).",
)
# The old name of --count: still accepted, with a notice, so that scripts keep running.
@click.option("--devices", "old_count", type=IntRange(2, MAX_DEVICES), hidden=True)
@sub_devices_option
@sizes_option("16K,128K,4M,64M", "multiples of 4: FP32", check=_whole_fp32)
@click.option(
    "--threshold",
    type=IntRange(0, MAX_SIZE // 4),
    default=32768,
    show_default=True,
    help="FP32 element count (not bytes) from which the BF16-compressed path is used.",
)
@click.option(
    "--transport",
    type=click.Choice(["auto", "staged"]),
    default="auto",
    show_default=True,
    help="Copy directly where possible, or always through host memory.",
)
@reps_option(5)
@warmup_option(1)
@click.option(
    "--seed",
    type=IntRange(0, MAX_SEED),
    default=0,
    show_default=True,
    help="Seed of the random inputs (0 to 2**63-1).",
)
@hang_after_option
@json_option
@answer_only_option
@verbose_option(
    "each call's time per repetition, the critical path, the wire rate, bytes crossed per "
    "pair, copies and launches, the error and its bound, the routes, the driver environment"
)
def allreduce(
    backend: str,
    device_specs: tuple[str, ...],
    count: int | None,
    old_count: int | None,
    sub_devices: int | None,
    sizes: list[int],
    threshold: int,
    transport: Literal["auto", "staged"],
    reps: int,
    warmup: int,
    seed: int,
    hang_after: float,
    json_path: Path | None,
    answer_only: bool,
    verbose: bool,
) -> None:
    """Time the FP32 and BF16-compressed all-reduce and check its sums against FP64."""
    from l0mem.backends import NoDeviceError, SyclBackend
    from l0mem.bench.allreduce import check_sizes, measure

    if old_count is not None:
        if count is not None and count != old_count:
            raise click.UsageError("--devices is the old name of --count: give one of them")
        notice("allreduce", "--devices N is deprecated: use --count N")
        count = old_count
    check_outputs("allreduce", [("--json", json_path)])

    def keep(report: dict[str, Any]) -> None:
        # The report first: a reader of the tables that goes away (| head) must not lose it.
        if json_path is not None:
            save_json("allreduce", json_path, report)
        with rendering():
            render(
                report,
                output(stderr=to_stdout(json_path)),
                answer_only=answer_only,
                verbose=verbose,
            )

    # Interrupted, the rows that finished are written and shown, marked incomplete.
    with measuring("allreduce", keep), open_backend(backend, device_specs, sub_devices) as b:
        available = b.device_count()
        want = available if count is None else count
        if want > available or available < 2:
            # Only SYCL can split one device into several (the CPU, without a GPU).
            hint = " (SYCL: try --sub-devices 2)" if isinstance(b, SyclBackend) else ""
            raise NoDeviceError(
                f"all-reduce needs {max(want, 2)} devices, {available} available{hint}"
            )
        check_sizes(b, list(range(want)), sizes)
        report = measure(
            b,
            list(range(want)),
            sizes,
            threshold=threshold,
            reps=reps,
            warmup=warmup,
            seed=seed,
            transport=transport,
            watchdog=hang_after,
        )
    keep(report)
    if report["ok"] is False:
        fail(
            "allreduce",
            ExitCode.REGRESSION,
            "a result is outside its error bound or devices disagree",
        )


__all__ = ["allreduce", "render"]
