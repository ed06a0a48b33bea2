"""What ``l0mem p2p`` shows: the answer in a few lines, then the peer, bandwidth and check tables.

The answer (:func:`answer_lines`) comes first and alone with ``-q``: what
failed, how many pairs copy direct and how many through host memory, the
fastest and the slowest pair, and the checks. Without ``-q`` every pair
follows with its route and GB/s, then rich tables (numbers never cut): the
devices, peer access, the bandwidth per size, the staged copies against
their legs, and the copies checked byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from l0mem.cli._common import escape
from l0mem.units import format_size


def _cell(c: Any) -> str:
    if c is None:
        return ""
    m = c.measured
    if m is None:
        return "n/a"
    # The range goes on its own line: a cell never has to be cut to fit.
    return f"{m.gbps:.2f}\n({m.gbps_min:.2f}-{m.gbps_max:.2f})"


def _table(title: str, columns: Sequence[str], justify: str = "left") -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in columns:
        # Too narrow a terminal folds a cell onto more lines instead of cutting it.
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    return table


MAX_ANSWER = 5  # what failed, direct pairs, host-staged pairs, fastest and slowest, the checks
MAX_NAMED = 4  # a route's pairs are named in the answer up to this many (all: in the details)


def _largest(result: Any) -> dict[tuple[int, int], Any]:
    """Return each pair's largest measured copy by the route l0mem takes between them."""
    route = {(p.src, p.dst): p.route for p in result.peers}
    largest: dict[tuple[int, int], Any] = {}
    for c in result.copies:
        known = largest.get((c.src, c.dst))
        if (
            route.get((c.src, c.dst)) == c.kind
            and c.measured is not None
            and (known is None or c.nbytes > known.nbytes)
        ):
            largest[c.src, c.dst] = c
    return largest


def _reasons(result: Any) -> str:
    """Return why the host-staged pairs are not copied direct."""
    reasons = sorted(
        {p.route_reason for p in result.peers if p.route != "direct" and p.route_reason}
    )
    return "; ".join(reasons) or "no peer access"


def _pairs(result: Any, route: str) -> str:
    """Return every pair copied by ``route`` with the median GB/s of its largest copy."""
    largest = _largest(result)
    parts = []
    for peer in result.peers:
        if (peer.route == "direct") != (route == "direct"):
            continue
        c = largest.get((peer.src, peer.dst))
        speed = "" if c is None else f" {c.measured.gbps:.2f} GB/s at {format_size(c.nbytes)}"
        parts.append(f"{peer.src}>{peer.dst}{speed}")
    return ", ".join(parts)


def _routes(result: Any) -> list[str]:
    """Return how many pairs copy direct and how many through host memory (named where few)."""
    total = len(result.peers)
    lines = []
    for direct, name in ((True, "Direct"), (False, "Host-staged")):
        pairs = [f"{p.src}>{p.dst}" for p in result.peers if (p.route == "direct") == direct]
        if not pairs:
            continue
        line = (
            f"{name}: all {total} pairs"
            if len(pairs) == total
            else f"{name}: {len(pairs)} of {total} pairs"
        )
        named = [", ".join(pairs)] if len(pairs) < total and len(pairs) <= MAX_NAMED else []
        why = named if direct else [*named, _reasons(result)]
        lines.append(f"{line} ({'; '.join(why)})" if why else line)
    return lines


def _extremes(result: Any) -> str | None:
    """Return the fastest and the slowest pair at the largest size every route was timed at."""
    largest = _largest(result)
    if not largest:
        return None
    size = max(c.nbytes for c in largest.values())
    at = [c for c in largest.values() if c.nbytes == size]
    fast = max(at, key=lambda c: c.measured.gbps)
    slow = min(at, key=lambda c: c.measured.gbps)

    def pair(c: Any) -> str:
        return f"{c.src}>{c.dst} {c.measured.gbps:.2f} GB/s {c.kind}"

    if fast is slow:
        return f"At {format_size(size)}: {pair(fast)}"
    return f"At {format_size(size)}: fastest {pair(fast)}, slowest {pair(slow)}"


def answer_lines(result: Any, answer_only: bool = False) -> list[str]:
    """Return the answer, at most :data:`MAX_ANSWER` lines whatever the device count.

    What failed comes first (the first copy: pair, route, size, what went
    wrong), so that ``-q``, which prints nothing else, still says which; then
    how many pairs copy direct and how many through host memory, the fastest
    and the slowest pair and the checks (after a failure, neither). Every pair with its GB/s is in the
    details (:func:`render` without ``-q``) and in ``--json``.
    """
    lines = []
    if failures := result.failures:
        if len(failures) == 1:
            lines.append(f"FAILED: {failures[0]}")
        else:
            rest = "the others: without -q, or in --json" if answer_only else "all of them below"
            lines.append(
                f"FAILED: {len(failures)} copies corrupted data or hung; the first: "
                f"{failures[0]} ({rest})"
            )
    lines += _routes(result)
    if not result.peers:
        lines.append("Only one device: no pairs to measure (SYCL: try --sub-devices 2).")
    # After a failure, what went wrong takes the lines of the speeds and the checks.
    if not failures and (extremes := _extremes(result)):
        lines.append(extremes)
    if result.checks and not failures:
        lines.append("Every copy checked byte for byte came back whole")
    if result.no_hardware:
        lines.append(f"Not timed: {result.no_hardware}")
    if result.simulated:
        # Whatever comes first carries the mark of numbers that are not hardware results.
        lines[0] = "[SIMULATOR] " + lines[0]
    return lines[:MAX_ANSWER]


def render(
    result: Any, console: Console, *, answer_only: bool = False, verbose: bool = False
) -> None:
    """Print a :class:`l0mem.bench.p2p.P2PResult`: the answer, rich tables (numbers never cut), ``verbose``: all."""
    for line in answer_lines(result, answer_only):
        # Wrapped between words: its tokens (pairs, GB/s, sizes) are short, none is cut.
        console.print(escape(line))
    if answer_only:
        return
    console.print()
    # The answer counts the pairs; here is every one, its route and GB/s.
    if direct := _pairs(result, "direct"):
        console.print(escape(f"Direct: {direct}"))
    if staged := _pairs(result, "staged"):
        console.print(escape(f"Staged through host memory: {staged} ({_reasons(result)})"))
    devices = _table(f"Devices ({result.backend})", ("#", "name"))
    for i, name in enumerate(result.devices):
        devices.add_row(str(i), escape(name))
    console.print(devices)
    if result.peers:
        peers = _table(
            "Peer access (src can access dst)",
            ("src", "dst", "access", "atomics", "P2P bandwidth", "latency", "l0mem copies"),
        )
        for p in result.peers:
            peers.add_row(
                str(p.src),
                str(p.dst),
                "?" if p.can_access is None else ("yes" if p.can_access else "no"),
                "?" if p.atomics is None else ("yes" if p.atomics else "no"),
                "-" if p.bandwidth is None else f"{p.bandwidth} {p.bandwidth_unit}",
                "-" if p.latency is None else f"{p.latency} {p.latency_unit}",
                p.route if p.route == "direct" else f"{p.route}: {p.route_reason}",
            )
        console.print(peers)
    if not result.verify_only:
        _render_timings(result, console)
    _render_checks(result, console)
    if verbose:
        from l0mem.cli.verbose_view import render_p2p

        render_p2p(result, console)
    if len(result.devices) < 2:
        console.print("Only one device: no pairs to measure (SYCL: try --sub-devices 2).")
    for note in result.notes:
        if result.no_hardware and result.no_hardware in note:
            continue
        style = "yellow" if "simulat" in note else "dim"
        console.print(f"[{style}]{escape(note)}[/{style}]")
    for line in result.failures:
        console.print(f"[bold red]FAILED[/bold red] {escape(line)}")


def _render_checks(result: Any, console: Console) -> None:
    """Print one row per pair and route: how many copies were checked and what came out wrong."""
    if not result.checks:
        return
    table = _table(
        f"Copies checked byte for byte (seeded pattern, seed {result.seed})",
        ("src>dst", "route", "copies", "result"),
    )
    groups: dict[tuple[int, int, str], list[Any]] = {}
    for c in result.checks:
        groups.setdefault((c.src, c.dst, c.route), []).append(c)
    for (src, dst, route), checks in groups.items():
        made = [c for c in checks if not c.skipped and not c.hung]
        bad = [c for c in made if c.mismatches]
        if any(c.hung for c in checks):
            verdict = "[bold red]HUNG[/bold red]"
        elif bad:
            first = bad[0]
            verdict = (
                f"[bold red]CORRUPT[/bold red] in {len(bad)} of {len(made)}: first at offset "
                f"{first.first_mismatch:,} of {first.nbytes:,} bytes"
            )
        elif made:
            verdict = "ok"
        else:
            verdict = "not checked: " + escape(checks[0].skipped or "")
        table.add_row(f"{src}>{dst}", route, str(len(made)), verdict)
    console.print(table)
    sizes = sorted({c.nbytes for c in result.checks})
    console.print(
        f"Sizes checked: {', '.join(f'{n:,}' for n in sizes)} bytes, each from aligned and "
        "unaligned offsets."
    )


def _render_timings(result: Any, console: Console) -> None:
    """Print the bandwidth table, the staged copies against their legs, and what was not measured."""
    from l0mem.bench.copies import DEVICE_TIMED_KINDS, PINNED_KINDS

    table = _table(
        "Copy bandwidth, GB/s (1e9 bytes/s): median (slowest-fastest)",
        ("size", "src>dst", "same device", "direct", "host-staged", "clock"),
        justify="right",
    )
    rows: dict[tuple[int, int, int], dict[str, Any]] = {}
    for c in result.copies:
        if c.kind in PINNED_KINDS:
            continue  # the legs: in the staging table
        rows.setdefault((c.nbytes, c.src, c.dst), {})[c.kind] = c
    for (nbytes, src, dst), kinds in rows.items():
        clocks = sorted(
            {c.measured.timing for k, c in kinds.items() if c.measured and k in DEVICE_TIMED_KINDS}
        )
        table.add_row(
            format_size(nbytes),
            f"{src}>{dst}",
            *(_cell(kinds.get(k)) for k in ("same_device", "direct", "staged")),
            "/".join(clocks) or "-",
        )
    console.print(table)
    console.print(
        "clock: how the same-device and direct copies were timed (device timestamps, or the "
        "host clock where events carry none)."
    )
    _render_staging(result, console)
    skipped = sorted(
        {
            f"{c.src}>{c.dst}: {c.skipped}"
            for c in result.copies
            if c.skipped and c.skipped != result.no_hardware
        }
    )
    if skipped:
        console.print("Not measured (direct): " + "; ".join(skipped))
    if result.no_hardware:
        # Every copy ran once, untimed: a time without a GPU executing would be no fact.
        console.print(f"[yellow]Not measured: {escape(result.no_hardware)}.[/yellow]")
    else:
        console.print(f"{result.reps} repetitions after {result.warmup} warm-up rounds per copy.")


def _render_staging(result: Any, console: Console) -> None:
    """Print each staged copy's bandwidth over the slower of its legs, measured in the same run."""
    ratios = result.staging
    if not ratios:
        return
    table = _table(
        "Host-staged copies against the host link (same run)",
        ("size", "src>dst", "staged", "src to host", "host to dst", "both at once", "ratio"),
        justify="right",
    )
    for r in ratios:
        table.add_row(
            format_size(r.nbytes),
            f"{r.src}>{r.dst}",
            f"{r.gbps:.2f}",
            f"{r.download_gbps:.2f}",
            f"{r.upload_gbps:.2f}",
            "-" if r.together_gbps is None else f"{r.together_gbps:.2f}",
            f"{r.ratio:.2f}",
        )
    console.print(table)
    console.print(
        "GB/s, medians. src to host, host to dst: the legs, each device's copies into and out "
        "of pinned host memory; both at once: the two submitted together, the most any "
        "staging can reach where the legs cannot overlap. ratio: the staged copy over the "
        "slower leg; 1.00 is the host link's speed."
    )


__all__ = ["MAX_ANSWER", "MAX_NAMED", "answer_lines", "render"]
