"""``l0mem compare``: compare two audit reports and fail on a mirroring regression.

``--plot PATH`` draws each run of both reports with its deciding slope before
and now (PNG or SVG), on a regression too; with no run in common it writes
nothing.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console, RenderableType

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
from l0mem.cli._options import check_plot, finite, plot_option
from l0mem.cli.layout import fitted
from l0mem.files import write_bytes


def _fmt_slope(value: float | None, sign: str = "") -> str:
    # Rounded to whole MiB/GiB first so that tiny negative values do not print as "-0".
    return "-" if value is None else f"{round(value):{sign}d}"


def _result_cell(change: RunChange) -> str:
    if change.regression:
        return "[bold red]REGRESSION[/]"
    if change.note.startswith("not judged"):
        return "not judged"
    return "ok"


def _table(
    console: Console, comparison: Comparison, baseline: Path, current: Path
) -> RenderableType:
    title = f"{baseline} -> {current}"
    if comparison.simulated:
        title += " (simulator numbers, not hardware)"
    if comparison.no_hardware:
        title += " (no hardware: the GPU driver executed nothing)"
    if len(title) > console.width:  # each report's path whole on a line of its own
        title = title.replace(" -> ", "\n-> ", 1)
    headers = ("set-up", "baseline", "current", "before", "now", "change", "result")
    rows = [
        (
            escape(c.label),
            escape(c.baseline_verdict or c.baseline_status),
            escape(c.current_verdict or c.current_status),
            _fmt_slope(c.baseline_slope),
            _fmt_slope(c.current_slope),
            _fmt_slope(c.slope_change, "+"),
            _result_cell(c),
        )
        for c in comparison.changes
    ]
    # Stacked where too wide: a verdict or a slope is never folded mid-word.
    return fitted(
        console,
        escape(title),
        headers,
        rows,
        caption="before/now/change: deciding slope, MiB of host memory per GiB of device memory",
        right=("before", "now", "change"),
    )


def _label(key: tuple[str, str | None]) -> str:
    setup, remedy = key
    return setup if remedy is None else f"{setup} [{remedy}]"


@click.command("compare", epilog=exit_epilog("compare"))
@click.argument("baseline", type=click.Path(readable=False, path_type=Path))
@click.argument("current", type=click.Path(readable=False, path_type=Path))
@click.option(
    "--slope-tolerance",
    # A slope is at most 1024 MiB/GiB (1:1); the cap only refuses absurd numbers.
    type=click.FloatRange(0.0, 1e6),
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
    type=click.Path(readable=False, path_type=Path),
    default=None,
    help="Also write the comparison as JSON (schema l0mem.compare/1) to this file.",
)
@plot_option(
    "each run of both reports: its deciding slope before and now joined by an arrow, over "
    "the verdict zones, regressions in red; written on a regression too, not when no run "
    "is in common"
)
def compare(
    baseline: Path,
    current: Path,
    slope_tolerance: float,
    allow_new_setups: bool,
    allow_unjudged: bool,
    json_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Compare two audit reports (BASELINE, CURRENT) run by run and flag regressions."""
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
                f"{unjudged} run(s) not judged: a verdict is missing to hold them to "
                "(--allow-unjudged lists them without failing)"
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
            baseline=str(baseline),
            current=str(current),
            fail_on_missing=not allow_new_setups,
            exit_code=int(code),
        )
        with reporting("compare"):
            write_bytes(json_path, dumps_json(data, json_path))
    if plot_path is not None and comparison.changes:
        from l0mem.plots import write_compare_plot

        save_plot("compare", plot_path, lambda p: write_compare_plot(comparison, p))

    console = output(highlight=False, stderr=to_stdout(json_path))
    with rendering():
        if comparison.changes:
            console.print(_table(console, comparison, baseline, current), crop=False)
        # Wrapped at spaces (not soft-wrapped past the width): a note carries verdicts and slopes.
        for c in comparison.changes:
            if c.note:
                console.print(escape(f"{c.label}: {c.note}"))
        for key in comparison.missing:
            # A regression only where the comparison is one (exit 1), not beside exit 5.
            judged = (
                "REGRESSION: it had a verdict"
                if code == ExitCode.REGRESSION
                else "it had a verdict"
            )
            lost = f" ({judged})" if key in comparison.lost else ""
            line = escape(f"only in baseline: {_label(key)}") + lost
            console.print(line)
        for key in comparison.new:
            line = escape(f"only in current: {_label(key)}")
            console.print(line)
        if code in (ExitCode.OK, ExitCode.REGRESSION):
            console.print(message)
    if code not in (ExitCode.OK, ExitCode.REGRESSION):
        fail("compare", code, message)
    raise SystemExit(int(code))
