"""What ``-v/--verbose`` adds to ``p2p``, ``allreduce`` and ``bench kernels``: every signal kept.

The default view shows summaries (medians, ranges, one row per pair and
route); ``-v`` prints, after it, what those summaries fold and the JSON
report already holds: each repetition's time in the order taken (exact to
the nanosecond), the clock of each measurement, every route and why it was
taken, every copy checked, each all-reduce call's copies, bytes and errors,
and the driver environment as measured. Nothing here measures: it only shows.

Numbers are never cut: a cell or a line wraps between numbers, so each sits
whole on one line at any width down to 80 columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from l0mem.cli._common import escape

# The copies of l0mem p2p as its default tables name them.
COPY_NAMES = {
    "same_device": "same device",
    "direct": "direct",
    "staged": "host-staged",
    "download": "src to host",
    "upload": "host to dst",
    "legs": "both at once",
}


def micros(ns: float) -> str:
    """Return a duration in ns as microseconds, exact to the nanosecond (``1,342.177``)."""
    return f"{ns / 1e3:,.3f}"


def millis(ns: float) -> str:
    """Return a duration in ns as milliseconds, exact to the nanosecond (``0.279016``)."""
    return f"{ns / 1e6:,.6f}"


def each(samples_ns: Iterable[float], unit: Any = micros) -> str:
    """Return every sample in ``unit``, in the order taken, separated by spaces (wraps between them)."""
    return " ".join(unit(ns) for ns in samples_ns) or "-"


# Columns of numbers: right-aligned, as in the default tables.
_NUMBERS = frozenset({"bytes", "bytes moved", "spread", "offsets src/dst"})


def _table(title: str, columns: Sequence[str], wide: str) -> Table:
    """Return a table whose ``wide`` column wraps between words and every other never wraps."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in columns:
        if col == wide:
            table.add_column(col, overflow="fold", ratio=1)
        else:
            table.add_column(col, no_wrap=True, justify="right" if col in _NUMBERS else "left")
    return table


def _facts(console: Console, title: str, rows: Sequence[tuple[str, str]]) -> None:
    """Print ``title`` and then a label and its text per row, the text wrapping between words."""
    console.print(escape(title))
    grid = Table.grid(padding=(0, 1), pad_edge=False)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold", ratio=1)
    for label, text in rows:
        grid.add_row(f"  {label}", text)
    console.print(grid)


def environment(console: Console, env: Mapping[str, str]) -> None:
    """Print the variables that change driver behaviour, as they were when measured."""
    if not env:
        console.print("Driver environment as measured: no variable that changes driver behaviour.")
        return
    _facts(
        console,
        "Driver environment as measured:",
        [(escape(k), escape(v)) for k, v in sorted(env.items())],
    )


# ------------------------------------------------------------------ l0mem p2p


def _check_result(c: Any) -> str:
    if c.hung:
        return "[bold red]HUNG[/bold red]"
    if c.skipped:
        return "not checked: " + escape(c.skipped)
    if c.mismatches:
        return (
            f"[bold red]CORRUPT[/bold red]: {c.mismatches:,} bytes wrong, first at offset "
            f"{c.first_mismatch:,}"
        )
    return "ok"


def render_p2p(result: Any, console: Console) -> None:
    """Print every route and why, each copy's repetitions and clock, and every copy checked."""
    console.print()
    if result.peers:
        routes = _table("Routes and why", ("src>dst", "route", "why"), "why")
        for p in result.peers:
            routes.add_row(f"{p.src}>{p.dst}", p.route, escape(p.route_reason or "-"))
        console.print(routes)
    if result.copies:
        table = _table(
            "Every repetition, in the order taken (µs)",
            ("bytes", "src>dst", "copy", "clock", "spread", "each repetition, µs"),
            "each repetition, µs",
        )
        for c in result.copies:
            m = c.measured
            pair = (f"{c.nbytes:,}", f"{c.src}>{c.dst}", COPY_NAMES.get(c.kind, c.kind))
            if m is None:
                why = "hung" if c.hung else (c.skipped or "no sample")
                table.add_row(*pair, "-", "-", "not measured: " + escape(why))
            else:
                table.add_row(*pair, m.timing, f"{m.spread:.0%}", each(m.samples_ns))
        console.print(table)
        console.print(
            "clock: device (event timestamps) or host (first enqueue to last completion); "
            "spread: (slowest - fastest) / median. src to host, host to dst: one device's "
            "copies into and out of pinned host memory; both at once: the two together."
        )
    if result.checks:
        checks = _table(
            f"Every copy checked byte for byte (seed {result.seed})",
            ("src>dst", "route", "bytes", "offsets src/dst", "result"),
            "result",
        )
        for c in result.checks:
            checks.add_row(
                f"{c.src}>{c.dst}",
                c.route,
                f"{c.nbytes:,}",
                f"{c.src_offset:,}/{c.dst_offset:,}",
                _check_result(c),
            )
        console.print(checks)
    environment(console, result.environment)


# ------------------------------------------------------------------ l0mem allreduce


def _yes(flag: bool) -> str:
    return "yes" if flag else "[red]no[/]"


def _number(value: float | None, spec: str) -> str:
    # NaN (a device result holding NaN) is not equal to itself.
    return "-" if value is None or value != value else format(value, spec)


def render_allreduce(report: dict[str, Any], console: Console) -> None:
    """Print each call's repetitions, its critical path, copies, bytes per pair and errors."""
    console.print()
    routes = ", ".join(f"{pair} {route}" for pair, route in report["routes"].items())
    console.print(
        escape(
            f"{report['reps']} repetitions after {report['warmup']} warm-up rounds; inputs "
            f"seeded {report['seed']}; transport {report['transport']}; routes: {routes or '-'}"
        )
    )
    for r in report["results"]:
        t = r["time_ns"]
        crossed = ", ".join(f"{pair} {n:,}" for pair, n in r["bytes_crossed"].items())
        critical = r.get("critical_path_ns")
        picked = " (the threshold picks it)" if r["auto"] else ""
        _facts(
            console,
            f"{r['nelem']:,} elements ({r['nbytes']:,} bytes a device), {r['path']}{picked}, "
            f"algorithm {r['algorithm']}:",
            [
                ("each call, ms", each(t["samples"], millis)),
                ("fastest, slowest", f"{millis(t['min'])} ms, {millis(t['max'])} ms"),
                (
                    "critical path",
                    "-"
                    if critical is None
                    else f"{millis(critical)} ms (each step alone, device timestamps where "
                    f"it has them; the call: host clock), the call over it "
                    f"{_number(r.get('time_to_critical_path'), '.2f')}",
                ),
                (
                    "rates",
                    f"wire {_number(r['wire_gbps'], '.3f')} GB/s (bytes crossed / time), bus "
                    f"{_number(r['busbw_gbps'], '.3f')} GB/s",
                ),
                ("bytes crossed", f"{crossed or '-'} (in all {r['total_bytes_crossed']:,})"),
                (
                    "operations",
                    f"{r['copies']:,} copies ({r['local_copies']:,} on one device, "
                    f"{r['staged_copies']:,} host-staged), {r['kernel_launches']:,} kernel "
                    "launches",
                ),
                (
                    "error",
                    f"largest {_number(r['max_abs_error'], '.6g')}; bound "
                    f"{_number(r['error_gamma'], '.6g')} x sum of |inputs|; err/bound "
                    f"{_number(r['max_error_to_bound'], '.6f')}; within: {_yes(r['within_bound'])}"
                    f"; same bits on every device: {_yes(r['identical'])}",
                ),
            ],
        )
    environment(console, report.get("environment") or {})


# ------------------------------------------------------------------ l0mem bench kernels


def render_kernels(result: Any, console: Console, launch: Sequence[tuple[str, str]] = ()) -> None:
    """Print each operation's repetitions (round-robin order), exact bytes, and how it launched."""
    console.print()
    table = _table(
        f"Every repetition, in the order taken ({result.timing} clock, µs)",
        ("operation", "bytes moved", "each repetition, µs"),
        "each repetition, µs",
    )
    for name, m in (("copy", result.copy), *result.kernels.items()):
        table.add_row(name, f"{m.bytes_moved:,}", each(m.samples_ns))
    console.print(table)
    if launch:
        _facts(console, "Launches:", [(label, escape(text)) for label, text in launch])
    environment(console, result.environment)


__all__ = [
    "COPY_NAMES",
    "each",
    "environment",
    "micros",
    "millis",
    "render_allreduce",
    "render_kernels",
    "render_p2p",
]
