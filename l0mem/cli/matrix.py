"""``l0mem matrix REPORT...``: many audit reports as one matrix of driver stacks and set-ups.

Rows are driver stacks (driver, loader, kernel, SYCL runtime, the
behaviour-changing environment), columns are set-ups and remedies; a cell
holds the verdicts, the median MiB per GiB and the number of machines, and is
flagged when machines of one stack disagree. The simulator's, no-hardware and
hardware reports, and reports of different schema majors, get tables of their
own; files that are not audit reports (a ``run``/``watch`` report, a schema
this l0mem cannot read) are counted apart, and so are audit reports that
hold no measured set-up (every device discovery failed, every set-up was
skipped): each is a warning, and inputs none of which holds a measured set-up
are exit 4, never an empty matrix. A directory stands for the
``*.json`` files in it. ``--baseline STACK`` (the whole row, or a part unique
to one) holds every other row to it by ``l0mem compare``'s rule: exit 1 on
any regression. ``--plot PATH`` draws the matrix as a heatmap (PNG or SVG).

Exit codes: as ``--help`` lists them (:mod:`l0mem.cli._exits`, the one table).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, NamedTuple

import click

from l0mem.cli._common import (
    check_outputs,
    escape,
    exit_epilog,
    fail,
    notice,
    output,
    rendering,
    reporting,
    save_json,
    save_plot,
    to_stdout,
)
from l0mem.cli._exits import ExitCode
from l0mem.cli._numbers import FloatRange
from l0mem.cli._options import check_plot, finite, json_option, plot_option
from l0mem.cli._paths import NamedPath
from l0mem.cli.layout import fitted
from l0mem.text import excerpt, os_text

# The longest schema name a "not in the matrix" line shows.
KIND_CHARS = 48


def _paths(reports: tuple[Path, ...]) -> list[Path]:
    """Return the report files named (a directory: its ``*.json``), each file once.

    A file named twice (again, through its directory, or through a link) is one
    machine's report: counted twice it would outvote the others in its cell.
    """
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for p in reports:
        try:
            directory = p.is_dir()
        except OSError:
            directory = False  # a name too long or the like: reported when it is read
        for path in sorted(p.glob("*.json")) if directory else [p]:
            try:
                st = path.stat()
            except OSError:
                out.append(path)  # read later, and reported there as unreadable
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                out.append(path)
    return out


class Skipped(NamedTuple):
    """A file the matrix left out: its name, the kind it is counted as, and what it is."""

    path: Path
    # The schema without "l0mem." (cut to KIND_CHARS), or "unknown"; None for an
    # audit report that holds no measured set-up (counted apart from the others).
    kind: str | None
    what: str  # for the user: what the file is instead of an audit report with cells


def _kind(schema: str) -> str:
    """Return how a file of ``schema`` is counted: its name without ``l0mem.``, cut short."""
    kind = schema.split(".", 1)[-1] if schema.startswith("l0mem.") else "unknown"
    return excerpt(kind, KIND_CHARS)  # a name is shown and counted, never a file's whole text


def _what(schema: str, kind: str) -> str:
    """Return what a file of ``schema`` is, said to a user who gave it as an audit report."""
    if schema.startswith("l0mem.audit/"):
        return f"an audit report of schema {kind}, a major version this l0mem does not read"
    if schema.startswith("l0mem.watch/1."):
        return f"a run/watch report (schema {kind}) without a summary to take a verdict from"
    if schema.startswith("l0mem.watch/"):
        return f"a run/watch report of schema {kind}, a major version this l0mem does not read"
    if kind != "unknown":
        return f"an l0mem {kind.split('/', 1)[0]} report (schema {kind}), not an audit or run/watch one"
    if schema:
        return 'not an l0mem report (its "schema" is none of l0mem\'s)'
    return 'not an l0mem report (no "schema")'


def _read(paths: list[Path]) -> tuple[list[tuple[str, Any]], list[Skipped]]:
    """Return the audit (and run/watch) reports among ``paths``, and the files left out."""
    from l0mem.audit.loading import load_json_data, report_from_data
    from l0mem.audit.matrix import from_watch, summarized
    from l0mem.audit.model import ReportFormatError
    from l0mem.jsonfields import json_kind

    reports: list[tuple[str, Any]] = []
    skipped: list[Skipped] = []
    for path in paths:
        data = load_json_data(path)
        schema = data.get("schema", "")
        if not isinstance(schema, str):  # there, but not a name: say what it is
            what = f'not an l0mem report (its "schema" is {json_kind(schema)}, not a string)'
            skipped.append(Skipped(path, "unknown", what))
            continue
        if schema.startswith("l0mem.watch/1.") and isinstance(data.get("summary"), dict):
            try:
                reports.append((str(path), from_watch(data)))
            except (KeyError, TypeError, ReportFormatError) as exc:
                raise ReportFormatError(f"{path}: not a readable watch report ({exc})") from None
            continue
        if not schema.startswith("l0mem.audit/1"):
            kind = _kind(schema)
            skipped.append(Skipped(path, kind, _what(schema, kind)))
            continue
        report = report_from_data(data, path)
        why = report.unmeasured
        if why is not None:  # a row of no cells, or a group heading alone, would say nothing
            what = f"an audit report that holds no measured set-up ({why})"
            skipped.append(Skipped(path, None, what))
            continue
        # Read one at a time and kept without samples: a fleet's reports never all in memory.
        reports.append((str(path), summarized(report)))
    return reports, skipped


# How many files a "none is an audit report" line names before "and N more".
NAMED_FILES = 3


def _none_usable(skipped: list[Skipped]) -> str:
    """Return the line for inputs of which none is an audit or run/watch report with a cell."""
    if len(skipped) == 1 and skipped[0].kind is None:
        return f"{skipped[0].path}: {skipped[0].what}: no matrix to show"
    named = "; ".join(f"{s.path}: {s.what}" for s in skipped[:NAMED_FILES])
    more = f"; and {len(skipped) - NAMED_FILES} more" if len(skipped) > NAMED_FILES else ""
    if any(s.kind is None for s in skipped):
        return f"none of the {len(skipped)} file(s) given holds a measured set-up ({named}{more})"
    return (
        f"none of the {len(skipped)} file(s) given is an audit or run/watch report ({named}{more})"
    )


# How many stacks an ambiguous --baseline line lists before "and N more".
NAMED_STACKS = 5


def _baseline_stack(matrices: list[Any], baseline: str) -> str:
    """Return the one stack ``--baseline`` names; a usage error (exit 2) when none or several match."""
    from l0mem.audit import matrix as mx

    hits = mx.stacks_named(matrices, baseline) if baseline.strip() else []
    if len(hits) == 1:
        return hits[0]
    if not hits:
        fail(
            "matrix",
            ExitCode.USAGE,
            f"--baseline {baseline!r} matches no stack of the reports: give a whole row as "
            "the table shows it, or a part of one (a driver version)",
        )
    listed = "; ".join(repr(h) for h in hits[:NAMED_STACKS])
    more = f"; and {len(hits) - NAMED_STACKS} more" if len(hits) > NAMED_STACKS else ""
    fail(
        "matrix",
        ExitCode.USAGE,
        f"--baseline {baseline!r} is ambiguous: it matches {len(hits)} stacks ({listed}{more}); "
        "give more of the one meant, or its whole row",
    )


def _write_text(command: str, path: Path, text: str) -> None:
    from l0mem.files import ReportWriteError, write_bytes

    try:
        write_bytes(path, text.encode())
    except ReportWriteError as exc:
        fail(command, ExitCode.BAD_INPUT, str(exc))


@click.command(epilog=exit_epilog("matrix"))
@click.argument(
    "reports", nargs=-1, required=True, type=NamedPath(readable=False, path_type=Path)
)
@click.option(
    "--baseline",
    metavar="STACK",
    help="Hold every other stack to this one (the whole row, or a part of it unique to one "
    "row, e.g. a driver version): exit 1 on a regression.",
)
@click.option(
    "--slope-tolerance",
    type=FloatRange(0.0, 1e6),
    callback=finite,
    default=64.0,
    show_default=True,
    metavar="MIB_PER_GIB",
    help="How far a slope may rise over the baseline's before it is a regression.",
)
@json_option
@click.option(
    "--markdown",
    "markdown_path",
    type=NamedPath(readable=False, path_type=Path),
    metavar="PATH",
    help="Also write the matrix as Markdown tables (for an issue).",
)
@click.option(
    "--csv",
    "csv_path",
    type=NamedPath(readable=False, path_type=Path),
    metavar="PATH",
    help="Also write one CSV row per cell.",
)
@plot_option(
    "the matrix as a heatmap: a cell per stack and set-up, coloured by verdict, labelled with "
    "the median ratio and the machines"
)
def matrix(
    reports: tuple[Path, ...],
    baseline: str | None,
    slope_tolerance: float,
    json_path: Path | None,
    markdown_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Show many audit reports as one matrix: driver stacks against set-ups and remedies."""
    from l0mem.audit import matrix as mx

    paths = _paths(reports)
    check_outputs(
        "matrix",
        [
            ("--json", json_path),
            ("--markdown", markdown_path),
            ("--csv", csv_path),
            ("--plot", plot_path),
        ],
        [("REPORT", p) for p in paths],
    )
    check_plot("matrix", plot_path)
    if not paths:  # after the command line's own errors (exit 2): an input error is 4
        named = ", ".join(str(r) for r in reports)
        fail(
            "matrix",
            ExitCode.BAD_INPUT,
            f"no report in {named} (a directory is read for its *.json)",
        )
    with reporting("matrix"):
        read, skipped = _read(paths)
    if not read:  # a table of nothing would read as a fleet without findings
        fail("matrix", ExitCode.BAD_INPUT, _none_usable(skipped))
    matrices = mx.build(read)
    stack = None
    found: list[Any] = []
    if baseline is not None:
        stack = _baseline_stack(matrices, baseline)
        found = mx.regressions(matrices, stack, slope_tolerance)
    apart: dict[str, int] = {}
    empty: list[str] = []
    for left in skipped:  # said once the command line is known good: a usage error is one line
        notice("matrix", f"warning: {left.path}: left out: {left.what}")
        if left.kind is None:
            empty.append(os_text(str(left.path)))
        else:
            apart[left.kind] = apart.get(left.kind, 0) + 1
    if json_path is not None:
        save_json("matrix", json_path, mx.to_dict(matrices, found, stack, apart, empty))
    if markdown_path is not None:
        _write_text("matrix", markdown_path, mx.markdown(matrices))
    if csv_path is not None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(mx.csv_rows(matrices))
        _write_text("matrix", csv_path, buf.getvalue())
    if plot_path is not None:
        from l0mem.plots import write_matrix_plot

        save_plot("matrix", plot_path, lambda p: write_matrix_plot(matrices, p, baseline=stack))
    console = output(stderr=to_stdout(json_path))
    with rendering():
        for m in matrices:
            # Stacked where too wide: a verdict, a ratio or a stack's setting is never folded.
            rows = [
                [escape(s + (" (baseline)" if s == stack else ""))]
                + [escape(m.cells[s][c].text()) if c in m.cells[s] else "" for c in m.columns]
                for s in m.stacks
            ]
            headers = ["stack", *(escape(c) for c in m.columns)]
            console.print(fitted(console, escape(m.group), headers, rows), crop=False)
        console.print("cells: verdict(s), median MiB of host per GiB of device, machines (n)")
        for kind, n in sorted(apart.items()):
            console.print(f"not in the matrix: {n} file(s) of schema {escape(kind)}")
        if empty:
            console.print(
                f"not in the matrix: {len(empty)} audit report(s) that hold no measured set-up"
            )
        for r in found:
            console.print(
                f"[bold red]REGRESSION[/] {escape(r.stack)} {escape(r.column)}: {escape(r.note)}"
            )
    if found:
        raise SystemExit(int(ExitCode.REGRESSION))


__all__ = ["matrix"]
