"""``l0mem compare``: compare two audit reports and fail on a mirroring regression.

The answer comes first, in at most five lines (:func:`answer_lines`): how
many runs were compared and the outcome, which runs are worse now, which
could not be judged, which are in one report only; then the run-by-run
table and a line per change worth a note. ``-q`` prints the answer alone.
Reports that cannot be compared (exit 5) have no answer: their one error
line says why.

``--plot PATH`` draws each run of both reports with its deciding slope before
and now (PNG or SVG), on a regression too; with no run in common it writes
nothing.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console, Group, RenderableType

from l0mem.audit.compare import (
    DEFAULT_SLOPE_TOLERANCE,
    Comparison,
    RunChange,
    compare_reports,
    load_pair,
)
from l0mem.audit.report import dumps_json
from l0mem.cli._common import (
    ExitCode,
    check_outputs,
    escape,
    exit_epilog,
    fail,
    output,
    rendering,
    reporting,
    save_plot,
    to_stdout,
)
from l0mem.cli._numbers import FloatRange
from l0mem.cli._options import answer_only_option, check_plot, finite, plot_option
from l0mem.cli._paths import NamedPath
from l0mem.cli.audit_view import NO_HARDWARE_MARK, SIMULATOR_MARK
from l0mem.cli.layout import fitted, whole
from l0mem.files import write_bytes
from l0mem.text import os_text
from l0mem.units import fixed


def _fmt_slope(value: float | None, sign: bool = False) -> str:
    # Whole MiB/GiB: a tiny negative value (or change) is "0", never "-0" or "+0".
    return "-" if value is None else fixed(value, sign=sign)


def _result_cell(change: RunChange) -> str:
    # A run that could not be judged fails the gate too (without --allow-unjudged),
    # but it is not a regression: the cell says what the answer says.
    if change.note.startswith("not judged"):
        return "[bold red]not judged[/]" if change.regression else "not judged"
    if change.regression:
        return "[bold red]REGRESSION[/]"
    return "ok"


def _table(
    console: Console, comparison: Comparison, baseline: Path, current: Path
) -> RenderableType:
    notes = ["(simulator numbers, not hardware)"] if comparison.simulated else []
    if comparison.no_hardware:
        notes.append("(no hardware: the GPU driver executed nothing)")
    title = [" ".join([f"{baseline} -> {current}", *notes])]
    if len(title[0]) > console.width:  # each report's path whole on a line of its own
        title = [str(baseline), f"-> {current}", *notes]
    headers = ("set-up", "baseline", "current", "before", "now", "change", "result")
    rows = [
        (
            escape(c.label),
            escape(c.baseline_verdict or c.baseline_status),
            escape(c.current_verdict or c.current_status),
            _fmt_slope(c.baseline_slope),
            _fmt_slope(c.current_slope),
            _fmt_slope(c.slope_change, sign=True),
            _result_cell(c),
        )
        for c in comparison.changes
    ]
    # Above the table, not its title: a title is folded at the table's width, a path with it.
    # Stacked where too wide: a verdict or a slope is never folded mid-word.
    return Group(
        *(whole(escape(line), style="italic") for line in title),
        fitted(
            console,
            "",
            headers,
            rows,
            caption="before/now/change: deciding slope, MiB of host memory per GiB of device memory",
            right=("before", "now", "change"),
        ),
    )


def _label(key: tuple[str, str | None]) -> str:
    setup, remedy = key
    return setup if remedy is None else f"{setup} [{remedy}]"


MAX_ANSWER = 5  # the outcome, worse now, not judged, in one report only


def _how(change: RunChange) -> str:
    """Return how a run got worse in a few words: its verdicts and its slope's rise, or the note."""
    before, now = change.baseline_verdict, change.current_verdict
    if before is None or now is None or change.current_status == "failed":
        return change.note  # a verdict lost: why, as the note says it
    parts = [f"{before} -> {now}"] if before != now else []
    if change.slope_change is not None:
        parts.append(f"{fixed(change.slope_change, sign=True)} MiB/GiB")
    return ", ".join(parts) or change.note


def answer_lines(comparison: Comparison, outcome: str, *, regression: bool) -> list[str]:
    """Return the answer, at most :data:`MAX_ANSWER` lines: the outcome, then which runs and why.

    ``outcome`` is the command's verdict (``no regression``, how many regressions);
    ``regression``: the comparison fails (exit 1), so a run that went missing is one.
    """
    marks = [SIMULATOR_MARK] if comparison.simulated else []
    marks += [NO_HARDWARE_MARK] if comparison.no_hardware else []
    prefix = "".join(f"[{m}] " for m in marks)
    n = len(comparison.changes)
    lines = [f"{prefix}Compared {n} run(s) with the baseline: {outcome}"]
    worse = [c for c in comparison.regressions if c.judged]
    if worse:
        lines.append("Worse now: " + ", ".join(f"{c.label} ({_how(c)})" for c in worse))
    # A skipped run is never judged, by design: a detail; a verdict missing is part of the answer.
    unjudged = [
        c
        for c in comparison.changes
        if c.note.startswith("not judged")
        and "skipped" not in (c.baseline_status, c.current_status)
    ]
    if unjudged:
        lines.append(
            "Not judged: "
            + ", ".join(f"{c.label} ({c.note.removeprefix('not judged: ')})" for c in unjudged)
        )
    only = []
    if comparison.missing:
        lost = " (had a verdict: REGRESSION)" if regression and comparison.lost else ""
        only.append("in the baseline only: " + ", ".join(map(_label, comparison.missing)) + lost)
    if comparison.new:
        only.append("in the current report only: " + ", ".join(map(_label, comparison.new)))
    if only:
        lines.append("Runs " + "; ".join(only))
    return lines[:MAX_ANSWER]


def _details(
    console: Console, comparison: Comparison, baseline: Path, current: Path, code: ExitCode
) -> None:
    """Print what follows the answer: the run-by-run table, notes, runs in one report only."""
    if comparison.changes:
        console.print(_table(console, comparison, baseline, current), crop=False)
    # Wrapped at spaces (not soft-wrapped past the width): a note carries verdicts and slopes.
    for c in comparison.changes:
        if c.note:
            console.print(escape(f"{c.label}: {c.note}"))
    for key in comparison.missing:
        # A regression only where the comparison is one (exit 1), not beside exit 5.
        judged = (
            "REGRESSION: it had a verdict" if code == ExitCode.REGRESSION else "it had a verdict"
        )
        lost = f" ({judged})" if key in comparison.lost else ""
        console.print(escape(f"only in baseline: {_label(key)}") + lost)
    for key in comparison.new:
        console.print(escape(f"only in current: {_label(key)}"))


@click.command("compare", epilog=exit_epilog("compare"))
@click.argument("baseline", type=NamedPath(readable=False, path_type=Path))
@click.argument("current", type=NamedPath(readable=False, path_type=Path))
@click.option(
    "--slope-tolerance",
    # A slope is at most 1024 MiB/GiB (1:1); the cap only refuses absurd numbers.
    type=FloatRange(0.0, 1e6),
    default=DEFAULT_SLOPE_TOLERANCE,
    show_default=True,
    metavar="MiB/GiB",
    callback=finite,
    help="Largest rise of a deciding slope that is not a regression.",
)
@click.option(
    "--allow-new-setups/--fail-on-missing",
    default=True,
    show_default=True,
    help="Whether a run present in only one report is merely listed, or fails (exit 5). "
    "A listed run that had a verdict in the baseline still counts as a regression unless "
    "--allow-unjudged.",
)
@click.option(
    "--allow-unjudged",
    is_flag=True,
    help="A run with a verdict in the baseline that failed, is inconclusive or is missing "
    "in CURRENT, and a run without a verdict in BASELINE (inconclusive or failed there: "
    "nothing to hold CURRENT to), is only listed, not a failure.",
)
@click.option(
    "--json",
    "json_path",
    type=NamedPath(readable=False, path_type=Path),
    default=None,
    help="Also write the comparison as JSON (schema l0mem.compare/1) to this file.",
)
@plot_option(
    "each run of both reports: its deciding slope before and now joined by an arrow, over "
    "the verdict zones, regressions in red; written on a regression too, not when no run "
    "is in common"
)
@answer_only_option
def compare(
    baseline: Path,
    current: Path,
    slope_tolerance: float,
    allow_new_setups: bool,
    allow_unjudged: bool,
    json_path: Path | None,
    plot_path: Path | None,
    answer_only: bool,
) -> None:
    """Compare two audit reports (BASELINE, CURRENT) run by run and flag regressions.

    The answer comes first (the outcome, which runs are worse and why), then the table.
    """
    # Writing the comparison over BASELINE or CURRENT would destroy an input: exit 2.
    check_outputs(
        "compare",
        [("--json", json_path), ("--plot", plot_path)],
        [("BASELINE", baseline), ("CURRENT", current)],
    )
    check_plot("compare", plot_path)
    # A missing or malformed report is exit 4, reports that cannot be compared exit 5.
    with reporting("compare"):
        before, after = load_pair(baseline, current)
        comparison = compare_reports(before, after, slope_tolerance, allow_unjudged=allow_unjudged)

    if not comparison.changes:
        code, message = ExitCode.MISMATCH, "the reports have no set-up run in common"
    elif comparison.regressions:
        unjudged = len(comparison.unjudged)
        worse = len(comparison.regressions) - unjudged
        parts = [f"{worse} regression(s)"] if worse else []
        if unjudged:
            parts.append(
                f"{unjudged} run(s) not judged (--allow-unjudged lists them without failing)"
            )
        code, message = ExitCode.REGRESSION, "; ".join(parts)
    elif (comparison.missing or comparison.new) and not allow_new_setups:
        code, message = ExitCode.MISMATCH, "some runs are present in only one report"
    elif comparison.lost:
        n = len(comparison.lost)
        code, message = ExitCode.REGRESSION, f"{n} regression(s): judged run(s) missing"
    else:
        code, message = ExitCode.OK, "no regression"

    if json_path is not None:
        data = comparison.to_dict()
        data.update(
            baseline=os_text(str(baseline)),
            current=os_text(str(current)),
            fail_on_missing=not allow_new_setups,
            exit_code=int(code),
        )
        with reporting("compare"):
            write_bytes(json_path, dumps_json(data, json_path))
    if plot_path is not None and comparison.changes:
        from l0mem.plots import write_compare_plot

        save_plot("compare", plot_path, lambda p: write_compare_plot(comparison, p))

    console = output(highlight=False, stderr=to_stdout(json_path))
    judged = code in (ExitCode.OK, ExitCode.REGRESSION)  # else exit 5: its error line says why
    with rendering():
        if judged:
            regression = code == ExitCode.REGRESSION
            # Wrapped at spaces (not soft-wrapped past the width): it carries verdicts and slopes.
            for line in answer_lines(comparison, message, regression=regression):
                console.print(escape(line))
        if not answer_only:
            if judged:
                console.print()
            _details(console, comparison, baseline, current, code)
    if not judged:
        fail("compare", code, message)
    raise SystemExit(int(code))
