"""What ``l0mem audit`` shows: progress bars while it runs, then the report's tables and notes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from l0mem.audit.analysis import remedy_effects
from l0mem.audit.costs import RemedyCost, remedy_advice
from l0mem.audit.model import AuditReport, Platform, Sample, SetupRun
from l0mem.audit.runner import RunEvent
from l0mem.audit.setups import SetupPlan
from l0mem.cli._common import escape
from l0mem.cli.fits_view import fits_table, number
from l0mem.cli.layout import fitted
from l0mem.units import format_bytes

# Signals shown per set-up besides the prioritised ones: where a mirror also shows.
_EXTRA_SIGNALS = ("meminfo.Shmem", "meminfo.Committed_AS", "proc.RssAnon")


def progress_bars(console: Console) -> Progress:
    """Return the progress display of a running audit (one bar per set-up run) on ``console``."""
    columns: list[Any] = [
        TextColumn("{task.description}", style="bold"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
    ]
    return Progress(*columns, console=console, transient=False)


class Bars:
    """Rich progress bars, one per set-up run, fed by the runner's events."""

    def __init__(self, progress: Progress) -> None:
        """Draw the bars on ``progress`` (see :func:`progress_bars`)."""
        self.progress = progress
        self.tasks: dict[int, TaskID] = {}

    def __call__(self, event: RunEvent) -> None:
        """Update the bars for one event of :func:`l0mem.audit.run_audit`."""
        if event.kind == "plan":
            for plan in event.plans:
                self.tasks[id(plan)] = self.progress.add_task(
                    escape(plan.label), total=max(plan.steps, 1), state=self._initial(plan)
                )
            return
        if event.plan is None or id(event.plan) not in self.tasks:
            return
        task = self.tasks[id(event.plan)]
        if event.kind == "start" and event.plan.skip_reason is None:
            self.progress.update(task, state="running")
        elif event.kind == "sample" and event.sample is not None and _climbs(event.sample, event.plan):
            step = max(event.plan.step_bytes, 1)
            done = -(-event.sample.device_bytes // step)
            allocated = format_bytes(event.sample.device_bytes)
            self.progress.update(task, completed=done, state=allocated)
            if not self.progress.console.is_terminal:
                # Off a terminal (a CI log) the bars show only at the end: a line per step.
                self.progress.console.print(
                    escape(
                        f"l0mem audit: {event.plan.label}: {allocated} allocated "
                        f"(step {done} of {event.plan.steps})"
                    ),
                    soft_wrap=True,
                )
        elif event.kind == "end" and event.run is not None:
            state = event.run.status
            if event.run.status == "ok":
                self.progress.update(task, completed=max(event.plan.steps, 1))
            self.progress.update(task, state=state)

    @staticmethod
    def _initial(plan: SetupPlan) -> str:
        return "skipped" if plan.skip_reason is not None else "waiting"


def _climbs(sample: Sample, plan: SetupPlan) -> bool:
    """Return True for the sample that ends a step of the staircase up (one line each)."""
    if sample.step is None:
        return sample.phase == "alloc"
    return sample.edge == "after" and sample.step <= plan.steps


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


SIMULATOR_MARK = "SIMULATOR"


NO_HARDWARE_MARK = "NO HARDWARE"

# The mark of each platform whose numbers are not hardware results, and what it is.
PLATFORM_MARKS: dict[Platform, tuple[str, str]] = {
    "simulator": (SIMULATOR_MARK, "simulated Level Zero driver"),
    "no-hardware": (NO_HARDWARE_MARK, "GPU driver without hardware, nothing executed"),
}


def _platform_note(report: AuditReport) -> str:
    """Return the title's note on runs that are not hardware results: all, some (marked), none."""
    notes = []
    platforms: list[Platform] = [p for p in map(report.run_platform, report.runs) if p != "none"]
    for platform, (mark, what) in PLATFORM_MARKS.items():
        count = platforms.count(platform)
        if count:
            marked = mark if count == len(platforms) else f"runs marked {mark}"
            notes.append(f" ({marked}: {what}, not hardware results)")
    return "".join(notes)


def _source(report: AuditReport, run: SetupRun) -> str:
    """Return where a run measured: the simulator, a driver without hardware, hardware, or -."""
    platform = report.run_platform(run)
    if platform == "none":
        return "-"
    if platform in PLATFORM_MARKS:
        return PLATFORM_MARKS[platform][0]
    return "hardware (host memory)" if run.host_memory else "hardware"


def _verdict_cell(run: SetupRun) -> str:
    assert run.result is not None
    verdict = run.result.verdict
    if run.host_memory and verdict in ("mirror", "partial"):
        return f"{verdict} (expected)"
    return {"mirror": "[bold red]mirror[/]", "partial": "[yellow]partial[/]"}.get(verdict, verdict)


def _summary_table(report: AuditReport, console: Console) -> RenderableType:
    title = "l0mem audit" + _platform_note(report)
    if not report.complete:
        title += " (partial)"
    headers = (
        "set-up", "measured on", "status", "verdict", "MiB/GiB", "deciding signal", "released", "VmRSS",
    )  # fmt: skip
    rows: list[tuple[str, ...]] = []
    for run in report.runs:
        res = run.result
        if res is None:
            rows.append((escape(run.label), _source(report, run), run.status, "-", "-", "-", "-", "-"))
            continue
        rss = res.fit("proc.VmRSS")
        if res.vmrss_would_miss:
            rss_cell = "[bold]misses it[/]"
        else:
            rss_cell = number(None if rss is None else rss.slope)
        rows.append(
            (
                escape(run.label),
                _source(report, run),
                run.status,
                _verdict_cell(run),
                number(res.slope),
                escape(res.deciding_signal or "-"),
                _yes_no(res.released),
                rss_cell,
            )
        )
    return fitted(
        console,
        escape(title),
        headers,
        rows,
        caption="MiB/GiB: MiB of host memory per GiB of device memory (1024 is a 1:1 mirror)",
        right=("MiB/GiB",),
    )


def _signal_table(
    report: AuditReport, run: SetupRun, console: Console, verbose: bool = False
) -> RenderableType | None:
    res = run.result
    if res is None or not (res.host or res.device):
        return None
    priority = (report.analysis.priority if report.analysis else ()) + _EXTRA_SIGNALS
    if verbose:
        priority += tuple(f.signal for f in res.host)
    mark = PLATFORM_MARKS.get(report.run_platform(run))
    where = f" ({mark[0]})" if mark else ""
    return fits_table(console, escape(f"{run.label}{where}: {res.verdict}"), res, priority)


def _costs(report: AuditReport) -> dict[tuple[str, str | None], RemedyCost]:
    return {(c.setup, c.remedy): c for c in map(RemedyCost.from_dict, report.remedy_costs)}


def _removes(e: Any, cost: RemedyCost | None) -> str:
    if cost is not None and not cost.applicable:
        unread = ", ".join(k for k, v in cost.known.items() if v is False)
        return f"not applicable (the runtime does not read {unread})"
    return "-" if e.removed is None else ("[bold green]yes[/]" if e.removed else "no")


def _cost_table(report: AuditReport, console: Console) -> tuple[RenderableType | None, str | None]:
    """Return the table of what each remedy that removed a mirror costs, and the advice."""
    costs = _costs(report)
    measured = [c for c in costs.values() if c.error is None]
    if not measured:
        return None, None
    headers = (
        "set-up", "remedy", "setting", "MiB/GiB", "peer access", "peer copies", "direct GB/s",
        "copies checked",
    )  # fmt: skip
    effects = {(e.setup, e.remedy): e for e in remedy_effects(report)}
    rows: list[tuple[str, ...]] = []
    for c in measured:
        e = effects.get((c.setup, c.remedy)) if c.remedy else None
        base = next((x for x in effects.values() if x.setup == c.setup), None)
        ratio = e.ratio if e is not None else (base.baseline_ratio if base else None)
        access = set(c.peer_access.values())
        rows.append(
            (
                escape(c.setup),
                escape(c.remedy or "(default)"),
                escape(" ".join(f"{k}={v}" for k, v in c.env.items()) or "-"),
                number(None if ratio is None else ratio * 1024),
                "-"
                if not access
                else ("yes" if access == {True} else "no" if access == {False} else "some"),
                c.route or "-",
                number(c.direct_gbps),
                "-" if c.copies_ok is None else ("ok" if c.copies_ok else "[bold red]CORRUPT[/]"),
            )
        )
    title = "What each remedy costs peer copies (measured in its environment)"
    return fitted(console, title, headers, rows), remedy_advice(report)


def _remedy_table(report: AuditReport, console: Console) -> RenderableType | None:
    effects = remedy_effects(report)
    if not effects:
        return None
    costs = _costs(report)
    headers = ("set-up", "remedy", "environment", "status", "verdict", "MiB/GiB", "removes it")
    rows = [
        (
            escape(e.setup),
            escape(e.remedy),
            escape(" ".join(f"{k}={v}" for k, v in e.env.items())),
            e.status,
            e.verdict or "-",
            number(None if e.ratio is None else e.ratio * 1024),
            _removes(e, costs.get((e.setup, e.remedy))),
        )
        for e in effects
    ]
    return fitted(console, "Remedies tried on the set-ups that mirrored", headers, rows)


def render(report: AuditReport, console: Console, *, verbose: bool = False) -> None:
    """Print the audit's tables: summary, per-set-up signals (``verbose``: all), remedies, notes."""
    # crop=False: a stacked row's long line (a setting to copy) is the terminal's to wrap.
    console.print(_summary_table(report, console), crop=False)
    for run in report.runs:
        table = _signal_table(report, run, console, verbose)
        if table is not None:
            console.print(table, crop=False)
    remedies = _remedy_table(report, console)
    if remedies is not None:
        console.print(remedies, crop=False)
    costs, sentence = _cost_table(report, console)
    if costs is not None:
        console.print(costs, crop=False)
    if sentence:
        console.print(escape(sentence), soft_wrap=True)
    missed = [r.label for r in report.runs if r.result is not None and r.result.vmrss_would_miss]
    if missed:
        console.print(
            escape(
                "VmRSS alone would have missed the host memory taken by: "
                + ", ".join(missed)
                + " (the pages are the kernel's, not a mapping of the process)"
            ),
            soft_wrap=True,
        )
    on_host = [r.label for r in report.runs if r.host_memory and r.status != "skipped"]
    if on_host:
        console.print(
            escape(
                "On a CPU or integrated device, device memory is host memory: about 1024 MiB/GiB "
                "is expected there (a positive control, not a mirror): " + ", ".join(on_host)
            ),
            soft_wrap=True,
        )
    for line in unavailable_lines(report.runs):
        console.print(escape(line), soft_wrap=True)
    if report.no_hardware:
        console.print(escape(f"No hardware: {report.no_hardware}"), soft_wrap=True)
    for run in report.runs:
        if run.status != "ok" and run.reason:
            console.print(escape(f"{run.label}: {run.status}: {run.reason}"), soft_wrap=True)
    for run in report.runs:
        advice = None if run.result is None else run.result.next_steps
        if advice is not None:
            console.print(escape(f"{run.label}: inconclusive: {advice.text}"), soft_wrap=True)


def unavailable_lines(runs: list[SetupRun]) -> list[str]:
    """Return lines naming the signals the runs could not read: what all lacked, then the rest."""
    ran = [r for r in runs if r.status != "skipped"]
    if not ran:
        return []
    common = set(ran[0].unavailable.items())
    for run in ran[1:]:
        common &= set(run.unavailable.items())
    lines = [f"not available here: {_gap_text(common)}"] if common else []
    extras: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for run in ran:
        rest = tuple(sorted(set(run.unavailable.items()) - common))
        if rest:
            extras.setdefault(rest, []).append(run.label)
    word = "also not" if common else "not"
    for gaps, labels in extras.items():
        lines.append(f"{word} available to {', '.join(labels)}: {_gap_text(gaps)}")
    return lines


def _gap_text(gaps: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{name} ({why})" for name, why in sorted(gaps))


__all__ = [
    "NO_HARDWARE_MARK",
    "PLATFORM_MARKS",
    "SIMULATOR_MARK",
    "Bars",
    "progress_bars",
    "render",
    "unavailable_lines",
]
