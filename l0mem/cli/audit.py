"""``l0mem audit``: measure how much host memory each GiB of device memory costs, per set-up.

The options, the run and the exit code live here; what the audit prints
(progress bars, tables, notes) is :mod:`l0mem.cli.audit_view`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from l0mem._ze.guard import timeout_from_env
from l0mem.audit.model import AuditReport, ReportFormatError, SetupRun
from l0mem.audit.remedies import ALL_SETUPS
from l0mem.audit.report import (
    write_json,
    write_junit,
)
from l0mem.audit.runner import AuditInterrupted, CancelEvent, DiscoveryError, run_audit
from l0mem.audit.setups import AuditOptions
from l0mem.cli._common import (
    STOP_SIGNALS,
    ExitCode,
    check_outputs,
    error,
    escape,
    exit_epilog,
    fail,
    output,
    rendering,
    reporting,
    signal_exit,
    stdout_is_tty,
    to_stdout,
)
from l0mem.cli._numbers import FloatRange, IntRange
from l0mem.cli._options import (
    answer_only_option,
    check_plot,
    checked_floor,
    device_option,
    finite,
    json_option,
    label_option,
    parse_floor,
    plot_option,
    prometheus_option,
    verbose_option,
)
from l0mem.cli._paths import NamedPath
from l0mem.cli._signals import handling
from l0mem.cli.audit_answer import answer_lines, first_reason
from l0mem.cli.audit_options import device_indices, env_option, setups_option, size_option
from l0mem.cli.audit_view import Bars, progress_bars, render, unavailable_lines
from l0mem.files import ReportWriteError
from l0mem.plots import MissingDependencyError, write_audit_plot
from l0mem.units import parse_size

_EPILOG = f"""\b
Set-ups: {", ".join(ALL_SETUPS)}.

{exit_epilog("audit")}"""

_F = TypeVar("_F", bound=Callable[..., Any])


def _cancel_on_signals(cancel: CancelEvent) -> AbstractContextManager[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into ``cancel``, which remembers the signal.

    The running child then frees its device memory cleanly and the partial
    report is written.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        cancel.request(signum)

    return handling(STOP_SIGNALS, handler)


def _write_outputs(
    report: AuditReport,
    json_path: Path | None,
    junit_path: Path | None,
    plot_path: Path | None,
    prometheus_path: Path | None = None,
    labels: dict[str, str] | None = None,
) -> list[str]:
    def write_prometheus(report: AuditReport, path: Path) -> None:
        from l0mem.cli import prometheus

        prometheus.write(path, prometheus.audit_metrics(report, labels))

    errors = []
    writers: tuple[tuple[Path | None, Callable[[AuditReport, Path], None]], ...] = (
        (json_path, write_json),
        (junit_path, write_junit),
        (plot_path, write_audit_plot),
        (prometheus_path, write_prometheus),
    )
    for path, writer in writers:
        if path is None:
            continue
        try:
            writer(report, path)
        except (ReportWriteError, ReportFormatError, MissingDependencyError, ValueError) as exc:
            errors.append(str(exc))
    return errors


def exit_code(report: AuditReport, fail_on_mirror: bool) -> int:
    """Return the exit code a finished audit ends with (see the epilog)."""
    return outcome(report, fail_on_mirror)[0]


def _why(runs: Sequence[SetupRun]) -> str:
    """Return the first run's label and reason, and how many more the report holds (one line, -q too)."""
    more = f"; {len(runs) - 1} more in the report" if len(runs) > 1 else ""
    return first_reason(runs) + more


def outcome(report: AuditReport, fail_on_mirror: bool) -> tuple[int, str | None]:
    """Return the exit code a finished audit ends with and its error line (None: no error)."""
    # One failed set-up already means the report lacks a measurement CI relies on;
    # a set-up skipped because discovering its devices failed (a device lost while
    # listing them) is a driver failure as in every command, not a missing device.
    broken = [r for r in report.runs if r.status == "failed" or r.discovery_failed]
    if broken:
        return ExitCode.DRIVER_ERROR, f"set-up(s) failed: {_why(broken)}"
    ran = [r for r in report.runs if r.status != "skipped"]
    if not ran:
        return ExitCode.NO_DEVICE, f"every set-up was skipped: {_why(report.runs)}"
    if not any(s.phase == "alloc" for r in ran for s in r.samples):
        # Nothing measured: the class of what stopped the first step decides.
        if all(r.no_room for r in ran):
            return (
                ExitCode.NO_DEVICE,
                f"no set-up measured a single step: no room for the first allocation ({_why(ran)})",
            )
        stops = [r.stop_signal for r in ran if r.stop_signal is not None]
        if stops:
            code = signal_exit(getattr(signal.Signals, stops[0], signal.SIGINT))[0]
            return code, f"no set-up measured a single step: stopped by {stops[0]}"
        return ExitCode.DRIVER_ERROR, f"no set-up measured a single step ({_why(ran)})"
    if fail_on_mirror and any(r.mirrors for r in ran):
        return ExitCode.REGRESSION, None
    return ExitCode.OK, None


@click.command("audit", epilog=_EPILOG)
@click.option(
    "--setups",
    "setups",
    multiple=True,
    callback=setups_option,
    metavar="NAMES",
    help="Set-ups to run, comma-separated or repeated (default: all).",
)
@device_option(
    "The audit takes Level Zero indices only (the SYCL set-ups' device is --sycl-device); "
    "the first owns the allocations. Default: every GPU."
)
@click.option(
    "--sycl-device",
    metavar="FILTER",
    help="SYCL filter string (e.g. level_zero:gpu:0, opencl:cpu) naming the device of the "
    "sycl set-ups (default: the first Level Zero GPU, else dpctl's default device).",
)
@click.option(
    "--size",
    "size_bytes",
    callback=size_option,
    metavar="SIZE",
    help="Device memory each set-up allocates in total (default: the smaller of 4 GiB and "
    "half the free device memory).",
)
@click.option(
    "--steps", type=IntRange(3, 1000), default=8, show_default=True, help="Allocation steps."
)
@click.option(
    "--floor",
    "floor_bytes",
    callback=parse_floor,
    metavar="SIZE|PCT%",
    help="MemAvailable never goes below this (default: the larger of 2 GiB and 10% of MemTotal); "
    "0 only with --no-floor; at least 64 MiB.",
)
@click.option(
    "--no-floor",
    is_flag=True,
    help="Turn the floor off (--floor 0): accept that the audit may take this machine out of "
    "memory (the OOM killer).",
)
@click.option(
    "--settle",
    type=FloatRange(0.0, 60.0),
    callback=finite,
    default=0.1,
    show_default=True,
    metavar="SECONDS",
    help="Pause between step windows (each pause is drawn from half to one and a half times "
    "this, so that no other process's rhythm can keep step with them).",
)
@click.option(
    "--budget",
    type=FloatRange(0.0, 3600.0),
    callback=finite,
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="On a busy machine, time each set-up may spend allocating and freeing a step again "
    "while its slope's interval spans two verdicts or 10% of the slope (0: never).",
)
@click.option(
    "--remedies", is_flag=True, help="Rerun set-ups that mirrored under known workarounds."
)
@click.option(
    "--env",
    "env",
    multiple=True,
    callback=env_option,
    metavar="KEY=VALUE",
    help="A custom remedy: rerun set-ups that mirrored with these variables (repeatable).",
)
@click.option(
    "--fail-on-mirror",
    is_flag=True,
    help="Exit 1 when a set-up mirrors (not counting CPU or integrated devices, whose device "
    "memory is host memory).",
)
@json_option
@click.option(
    "--junit",
    "junit_path",
    type=NamedPath(readable=False, allow_dash=True, path_type=Path),
    metavar="PATH",
    help="Also write the report as JUnit XML (mirrors fail, failed set-ups error).",
)
@plot_option(
    "host memory against device memory per set-up, each run with its fitted line and the 1:1 "
    "and 0 references"
)
@prometheus_option
@label_option
@answer_only_option
@verbose_option("every signal each set-up recorded, not the chosen ones")
def audit(
    setups: tuple[str, ...],
    device_specs: tuple[str, ...],
    sycl_device: str | None,
    size_bytes: int | None,
    steps: int,
    floor_bytes: int | None,
    no_floor: bool,
    settle: float,
    budget: float,
    remedies: bool,
    env: dict[str, str],
    fail_on_mirror: bool,
    json_path: Path | None,
    junit_path: Path | None,
    plot_path: Path | None,
    prometheus_path: Path | None,
    labels: dict[str, str],
    answer_only: bool,
    verbose: bool,
) -> None:
    """Measure the host memory each set-up's device allocations cost, and say which mirror.

    The answer comes first (which allocation paths take host memory, how much per
    GiB of device memory, what to do), then the details.
    """
    floor_bytes = checked_floor("audit", "--floor", floor_bytes, no_floor, "--no-floor")
    # Before anything runs: a typo in a path must not cost a long measurement.
    check_outputs(
        "audit",
        [
            ("--json", json_path),
            ("--junit", junit_path),
            ("--plot", plot_path),
            ("--prometheus", prometheus_path),
        ],
    )
    check_plot("audit", plot_path)
    if sycl_device is not None:
        from l0mem.sycl import parse_filter

        try:
            parse_filter(sycl_device)
        except ValueError as exc:
            fail("audit", ExitCode.USAGE, str(exc))
    with reporting("audit"):
        devices = device_indices(device_specs)
        timeout_from_env()  # a bad $L0MEM_DRIVER_TIMEOUT is a usage error before any child starts
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
            budget_s=budget,
        )
    except ValueError as exc:
        fail("audit", ExitCode.USAGE, str(exc))
    # Off a terminal (CI logs, pipes) rich would wrap the tables at 80 columns:
    # 160 there, unless COLUMNS says how wide (rich reads it, as on a terminal).
    # A report on standard output (-) sends the tables to stderr.
    out = output(
        highlight=False,
        width=None if stdout_is_tty() or os.environ.get("COLUMNS", "").isdigit() else 160,
        stderr=to_stdout(json_path, junit_path, plot_path),
    )
    cancel = CancelEvent()
    interrupted: int | None = None  # the stop signal that cut the audit short
    # No device at all, or none with a --device index, is exit 3; MemAvailable
    # unreadable (no floor to keep) exit 6. A stop signal while the report is
    # written is remembered, not raised: the report is written whole either way.
    with reporting("audit"), _cancel_on_signals(cancel):
        try:
            if answer_only:  # the answer alone: no bars, no line per step
                report = run_audit(options, cancel=cancel)
            else:
                with progress_bars(output(stderr=True, highlight=False)) as bars:
                    report = run_audit(options, progress=Bars(bars), cancel=cancel)
        except AuditInterrupted as exc:
            report, interrupted = exc.report, exc.signum
        except DiscoveryError as exc:
            # The report the exit table promises (no set-up run), then the failure's line.
            if exc.report is not None:
                for message in _write_outputs(
                    exc.report, json_path, junit_path, plot_path, prometheus_path, labels
                ):
                    error("audit", message)
            raise
        errors = _write_outputs(report, json_path, junit_path, plot_path, prometheus_path, labels)
    with rendering():
        for line in answer_lines(report, answer_only):
            out.print(escape(line), soft_wrap=True)
        if not answer_only:
            out.print()
            render(report, out, verbose=verbose)
    how = "device memory was freed, partial results kept"
    if interrupted is None and cancel.is_set():
        interrupted, how = cancel.signum, "after the last set-up; the report is complete"
    if interrupted is not None:
        error("audit", f"interrupted by {signal_exit(interrupted)[1]}; {how}")
    for message in errors:
        error("audit", message)
    if interrupted is not None:
        raise SystemExit(signal_exit(interrupted)[0])
    if errors:
        raise SystemExit(int(ExitCode.BAD_INPUT))
    code, why = outcome(report, fail_on_mirror)
    if why is not None:
        fail("audit", code, why)
    raise SystemExit(int(code))


__all__ = [
    "audit",
    "device_indices",
    "exit_code",
    "outcome",
    "parse_size",
    "render",
    "unavailable_lines",
]
