"""``l0mem audit``: measure how much host memory each GiB of device memory costs, per set-up."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from l0mem.audit.analysis import remedy_effects
from l0mem.audit.model import AuditReport, ReportFormatError, SetupRun
from l0mem.audit.remedies import ALL_SETUPS, parse_env_assignments
from l0mem.audit.report import (
    MissingDependencyError,
    write_json,
    write_junit,
    write_plot,
)
from l0mem.audit.runner import AuditInterrupted, RunEvent, run_audit
from l0mem.audit.setups import AuditOptions, NoDeviceError, SetupPlan
from l0mem.cli._common import ExitCode, fail, notice
from l0mem.files import ReportWriteError
from l0mem.probe import MeminfoError, read_meminfo
from l0mem.units import format_bytes, parse_size

_EPILOG = f"""\b
Set-ups: {", ".join(ALL_SETUPS)}.
\b
Exit codes:
  {ExitCode.OK:<3d} the audit ran
  {ExitCode.REGRESSION:<3d} --fail-on-mirror and a set-up mirrored (fully or partly); not
      counted: CPU and integrated devices, whose device memory is host memory
  {ExitCode.USAGE:<3d} bad command-line usage
  {ExitCode.NO_DEVICE:<3d} no Level Zero or SYCL device to audit, or every set-up was skipped
  {ExitCode.BAD_INPUT:<3d} a report file could not be written
  {ExitCode.DRIVER_ERROR:<3d} a set-up failed (driver or runtime error); the report still
      holds every run
  {ExitCode.INTERRUPTED:<3d} interrupted: device memory was freed, the partial report written
"""

_F = TypeVar("_F", bound=Callable[..., Any])

# Signals shown per set-up besides the prioritised ones: where a mirror also shows.
_EXTRA_SIGNALS = ("meminfo.Shmem", "meminfo.Committed_AS", "proc.RssAnon")


def _size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _floor_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1])
        except ValueError:
            raise click.BadParameter(f"not a percentage: {value!r}") from None
        if not 0 <= share < 100:
            raise click.BadParameter(f"percentage must lie in [0, 100), got {value}")
        try:
            total = read_meminfo()["meminfo.MemTotal"]
        except MeminfoError as exc:
            raise click.BadParameter(str(exc)) from None
        return int(total * share / 100)
    try:
        return parse_size(value, minimum=0)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _setups_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    names = [n.strip() for item in value for n in item.split(",") if n.strip()]
    if not names:
        return ALL_SETUPS
    unknown = [n for n in names if n not in ALL_SETUPS]
    if unknown:
        raise click.BadParameter(
            f"unknown set-up {unknown[0]!r}; choose from {', '.join(ALL_SETUPS)}"
        )
    return tuple(dict.fromkeys(names))


def _env_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    try:
        return parse_env_assignments(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _output_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    # Checked before the audit runs: a typo must not cost a long measurement.
    if value is None:
        return None
    if value.is_dir():
        raise click.BadParameter(f"{value} is a directory")
    parent = value.parent if str(value.parent) else Path(".")
    if not parent.is_dir():
        raise click.BadParameter(f"directory {parent} does not exist")
    if param.name == "plot_path" and value.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter("the plot file must end in .png or .svg")
    return value


def _output_option(flag: str, dest: str, help: str) -> Callable[[_F], _F]:
    """Return an option naming a report file, checked by :func:`_output_path`."""
    return click.option(
        flag, dest, type=click.Path(path_type=Path), callback=_output_path, help=help
    )


def _fail(code: ExitCode, message: str) -> NoReturn:
    fail("audit", code, f"error: {message}")


@contextmanager
def _cancel_on_signals(cancel: threading.Event) -> Iterator[None]:
    """Turn SIGINT and SIGTERM into ``cancel`` so the running child can free cleanly."""

    def handler(signum: int, frame: FrameType | None) -> None:
        cancel.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Bars:
    """Rich progress bars, one per set-up run, fed by the runner's events."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[int, TaskID] = {}

    def __call__(self, event: RunEvent) -> None:
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
        elif event.kind == "sample" and event.sample is not None and event.sample.phase == "alloc":
            step = max(event.plan.step_bytes, 1)
            done = -(-event.sample.device_bytes // step)
            self.progress.update(
                task, completed=done, state=format_bytes(event.sample.device_bytes)
            )
        elif event.kind == "end" and event.run is not None:
            state = event.run.status
            if event.run.status == "ok":
                self.progress.update(task, completed=max(event.plan.steps, 1))
            self.progress.update(task, state=state)

    @staticmethod
    def _initial(plan: SetupPlan) -> str:
        return "skipped" if plan.skip_reason is not None else "waiting"


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


SIMULATOR_MARK = "SIMULATOR"


def _simulator_note(runs: list[SetupRun]) -> str:
    """Return the title's note on simulated runs: all of them, some (marked), or none."""
    simulated = [r for r in runs if r.simulated]
    if not simulated:
        return ""
    if len(simulated) == len(runs):
        return f" ({SIMULATOR_MARK}: simulated Level Zero driver, not hardware results)"
    return f" (runs marked {SIMULATOR_MARK}: simulated Level Zero driver, not hardware results)"


def _source(run: SetupRun) -> str:
    """Return where a run measured: the simulator, or hardware (whose memory may be host memory)."""
    if run.simulated:
        return SIMULATOR_MARK
    return "hardware (host memory)" if run.host_memory else "hardware"


def _verdict_cell(run: SetupRun) -> str:
    assert run.result is not None
    verdict = run.result.verdict
    if run.host_memory and verdict in ("mirror", "partial"):
        return f"{verdict} (expected)"
    return {"mirror": "[bold red]mirror[/]", "partial": "[yellow]partial[/]"}.get(verdict, verdict)


def _summary_table(report: AuditReport) -> Table:
    title = "l0mem audit" + _simulator_note(report.runs)
    if not report.complete:
        title += " (partial)"
    table = Table(
        title=escape(title),
        title_justify="left",
        caption="MiB/GiB: MiB of host memory per GiB of device memory (1024 is a 1:1 mirror)",
        caption_justify="left",
    )
    columns = ("set-up", "measured on", "status", "verdict", "MiB/GiB", "deciding signal")
    for name in (*columns, "released", "VmRSS"):
        justify = "right" if name == "MiB/GiB" else "left"
        table.add_column(name, justify=justify, no_wrap=name == "set-up")  # type: ignore[arg-type]
    for run in report.runs:
        res = run.result
        if res is None:
            table.add_row(escape(run.label), _source(run), run.status, "-", "-", "-", "-", "-")
            continue
        rss = res.fit("proc.VmRSS")
        if res.vmrss_would_miss:
            rss_cell = "[bold]misses it[/]"
        else:
            rss_cell = _fmt(None if rss is None else rss.slope)
        table.add_row(
            escape(run.label),
            _source(run),
            run.status,
            _verdict_cell(run),
            _fmt(res.slope),
            escape(res.deciding_signal or "-"),
            _yes_no(res.released),
            rss_cell,
        )
    return table


def _signal_table(report: AuditReport, run: SetupRun) -> Table | None:
    res = run.result
    if res is None or not (res.host or res.device):
        return None
    priority = (report.analysis.priority if report.analysis else ()) + _EXTRA_SIGNALS
    shown = [f for name in priority if (f := res.fit(name)) is not None]
    shown += res.device
    where = f" ({SIMULATOR_MARK})" if run.simulated else ""
    table = Table(title=escape(f"{run.label}{where}: {res.verdict}"), title_justify="left")
    for name in ("signal", "side", "MiB/GiB", "+/-", "R^2", "note"):
        table.add_column(name, justify="right" if name in ("MiB/GiB", "+/-", "R^2") else "left")
    for fit in shown:
        if fit.signal == res.deciding_signal:
            note = "deciding"
        else:
            note = res.passed_over.get(fit.signal, "")
        table.add_row(
            escape(fit.signal),
            fit.side,
            _fmt(fit.slope),
            _fmt(fit.uncertainty),
            _fmt(fit.r2, ".3f"),
            escape(note),
        )
    return table


def _remedy_table(report: AuditReport) -> Table | None:
    effects = remedy_effects(report)
    if not effects:
        return None
    table = Table(title="Remedies tried on the set-ups that mirrored", title_justify="left")
    for name in ("set-up", "remedy", "environment", "status", "verdict", "MiB/GiB", "removes it"):
        table.add_column(name)
    for e in effects:
        env = " ".join(f"{k}={v}" for k, v in e.env.items())
        table.add_row(
            escape(e.setup),
            escape(e.remedy),
            escape(env),
            e.status,
            e.verdict or "-",
            _fmt(None if e.ratio is None else e.ratio * 1024),
            "-" if e.removed is None else ("[bold green]yes[/]" if e.removed else "no"),
        )
    return table


def render(report: AuditReport, console: Console) -> None:
    """Print the audit's tables: summary, per-set-up signals, remedies, notes."""
    console.print(_summary_table(report))
    for run in report.runs:
        table = _signal_table(report, run)
        if table is not None:
            console.print(table)
    remedies = _remedy_table(report)
    if remedies is not None:
        console.print(remedies)
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
    for run in report.runs:
        if run.status != "ok" and run.reason:
            console.print(escape(f"{run.label}: {run.status}: {run.reason}"), soft_wrap=True)


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


def _write_outputs(
    report: AuditReport, json_path: Path | None, junit_path: Path | None, plot_path: Path | None
) -> list[str]:
    errors = []
    for path, writer in (
        (json_path, write_json),
        (junit_path, write_junit),
        (plot_path, write_plot),
    ):
        if path is None:
            continue
        try:
            writer(report, path)
        except (ReportWriteError, ReportFormatError, MissingDependencyError, ValueError) as exc:
            errors.append(str(exc))
    return errors


def exit_code(report: AuditReport, fail_on_mirror: bool) -> ExitCode:
    """Return the exit code a finished audit ends with (see the epilog)."""
    ran = [r for r in report.runs if r.status != "skipped"]
    if not ran:
        return ExitCode.NO_DEVICE
    # One failed set-up already means the report lacks a measurement CI relies on.
    if any(r.status == "failed" for r in ran):
        return ExitCode.DRIVER_ERROR
    if fail_on_mirror and any(r.mirrors for r in ran):
        return ExitCode.REGRESSION
    return ExitCode.OK


@click.command("audit", epilog=_EPILOG)
@click.option(
    "--setups",
    "setups",
    multiple=True,
    callback=_setups_option,
    metavar="NAMES",
    help="Set-ups to run, comma-separated or repeated (default: all).",
)
@click.option(
    "--device",
    "devices",
    type=click.IntRange(min=0),
    multiple=True,
    help="Level Zero device index, counting the devices of every driver in order (with one "
    "driver: the index `l0mem info` shows); repeatable; the first owns the allocations "
    "(default: every GPU).",
)
@click.option("--sycl-device", metavar="FILTER", help="SYCL device filter, e.g. level_zero:gpu:0.")
@click.option(
    "--size",
    "size_bytes",
    callback=_size_option,
    metavar="SIZE",
    help="Device memory each set-up allocates in total (default: the smaller of 4 GiB and "
    "half the free device memory).",
)
@click.option(
    "--steps", type=click.IntRange(3, 1000), default=8, show_default=True, help="Allocation steps."
)
@click.option(
    "--floor",
    "floor_bytes",
    callback=_floor_option,
    metavar="SIZE|PCT%",
    help="MemAvailable never goes below this (default: the larger of 2 GiB and 10% of MemTotal).",
)
@click.option(
    "--settle",
    type=click.FloatRange(0.0, 60.0),
    default=0.1,
    show_default=True,
    metavar="SECONDS",
    help="Wait after each step before sampling.",
)
@click.option(
    "--remedies", is_flag=True, help="Rerun set-ups that mirrored under known workarounds."
)
@click.option(
    "--env",
    "env",
    multiple=True,
    callback=_env_option,
    metavar="KEY=VALUE",
    help="A custom remedy: rerun set-ups that mirrored with these variables (repeatable).",
)
@click.option(
    "--fail-on-mirror",
    is_flag=True,
    help="Exit 1 when a set-up mirrors (not counting CPU or integrated devices, whose device "
    "memory is host memory).",
)
@_output_option("--json", "json_path", "Write the report as JSON (schema l0mem.audit/1.x).")
@_output_option(
    "--junit", "junit_path", "Write the report as JUnit XML (mirrors fail, failed set-ups error)."
)
@_output_option("--plot", "plot_path", "Plot host memory against device memory (.png or .svg).")
def audit(
    setups: tuple[str, ...],
    devices: tuple[int, ...],
    sycl_device: str | None,
    size_bytes: int | None,
    steps: int,
    floor_bytes: int | None,
    settle: float,
    remedies: bool,
    env: dict[str, str],
    fail_on_mirror: bool,
    json_path: Path | None,
    junit_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Measure the host memory each set-up's device allocations cost, and say which mirror."""
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            _fail(ExitCode.USAGE, "--plot needs matplotlib: pip install 'l0mem[plot]'")
    if sycl_device is not None:
        from l0mem.sycl import parse_filter

        try:
            parse_filter(sycl_device)
        except ValueError as exc:
            _fail(ExitCode.USAGE, str(exc))
    try:
        options = AuditOptions(
            setups=setups,
            devices=devices,
            sycl_device=sycl_device,
            size_bytes=size_bytes,
            steps=steps,
            floor_bytes=floor_bytes,
            remedies=remedies,
            env=env,
            settle_s=settle,
        )
    except ValueError as exc:
        _fail(ExitCode.USAGE, str(exc))
    # Off a terminal (CI logs, pipes) rich would wrap the tables at 80 columns.
    out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True, highlight=False)
    cancel = threading.Event()
    interrupted = False
    columns: list[Any] = [
        TextColumn("{task.description}", style="bold"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
    ]
    try:
        with _cancel_on_signals(cancel), Progress(*columns, console=err, transient=False) as bars:
            report = run_audit(options, progress=_Bars(bars), cancel=cancel)
    except AuditInterrupted as exc:
        report, interrupted = exc.report, True
    except NoDeviceError as exc:
        _fail(ExitCode.NO_DEVICE, str(exc))
    except MeminfoError as exc:
        _fail(ExitCode.DRIVER_ERROR, str(exc))
    errors = _write_outputs(report, json_path, junit_path, plot_path)
    render(report, out)
    if interrupted:
        notice("audit", "interrupted: device memory was freed, partial results kept")
    for message in errors:
        notice("audit", f"error: {message}")
    if interrupted:
        raise SystemExit(int(ExitCode.INTERRUPTED))
    if errors:
        raise SystemExit(int(ExitCode.BAD_INPUT))
    code = exit_code(report, fail_on_mirror)
    if code == ExitCode.NO_DEVICE:
        notice("audit", "error: every set-up was skipped (reasons above)")
    elif code == ExitCode.DRIVER_ERROR:
        failed = [r.label for r in report.runs if r.status == "failed"]
        notice("audit", f"error: set-up(s) failed: {', '.join(failed)} (reasons above)")
    raise SystemExit(int(code))
