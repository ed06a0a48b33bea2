"""``l0mem run -- CMD`` and ``l0mem watch --pid PID``: what a real workload costs the host.

``run`` starts the command (in its own process group, in the terminal's
foreground when l0mem has it; stdin, stdout and stderr are l0mem's) and
passes its exit code on; ``watch`` attaches read-only
to a running process. Both sample the process tree every interval, show it
live, and end with the summary (:mod:`.run_view`) and the files asked for;
the options they share are :mod:`.run_options`'.
l0mem's own lines go to stderr under ``run`` (stdout is the workload's).
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click

from l0mem.audit.guard import default_floor
from l0mem.cli import run_outputs
from l0mem.cli._common import (
    STOP_SIGNALS,
    ExitCode,
    exit_epilog,
    fail,
    notice,
    output,
    reporting,
    signal_exit,
    to_stdout,
)
from l0mem.cli._numbers import FloatRange, IntRange
from l0mem.cli._options import checked_floor, finite, parse_floor, parse_follow
from l0mem.cli._signals import handling
from l0mem.cli.run_options import MAX_INTERVAL, MIN_INTERVAL, shared_options
from l0mem.cli.run_view import Progress
from l0mem.probe import read_environ
from l0mem.trace import TraceSession
from l0mem.watch import (
    DEFAULT_GRACE,
    LOOK,
    CommandError,
    FloorError,
    NoSuchProcess,
    NotPermitted,
    Watch,
    WatchResult,
    WatchSummary,
    run_workload,
    watch_pid,
)
from l0mem.watch.sysman import SysmanReader, child_environment

PID_MAX = 1 << 22  # the kernel's largest pid_max
MAX_REPEAT = 100


def _sysman(
    stack: contextlib.ExitStack, base: dict[str, str] | Any, workload: dict[str, str] | None
) -> SysmanReader:
    """Start Sysman's reader with the workload's driver settings; it ends with ``stack``."""
    reader = SysmanReader(child_environment(base, workload))
    stack.callback(reader.close)
    return reader


def _stop_on_signals(watch: Watch) -> contextlib.AbstractContextManager[None]:
    """Turn the stop signals into a stop request in the block; after it, ignore them once stopped.

    A command that was stopped ends with its signal's code as soon as its files
    are written: a later signal (a double Ctrl-C) must not kill it on the way out.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        watch.request_stop(signum)

    return handling(STOP_SIGNALS, handler, ignore_after=lambda: watch.stop_signal is not None)


@click.command(
    "run",
    epilog=exit_epilog("run"),
    context_settings={"allow_interspersed_args": False},
)
@click.option(
    "--host-floor",
    "host_floor",
    callback=parse_floor,
    metavar="SIZE|PCT%",
    help="Stop the workload (SIGTERM, then SIGKILL after --grace) before the host's available "
    "memory falls below this (default: the audit's floor, the larger of 2 GiB and 10% of "
    "MemTotal); at least 64 MiB, 0 only with --no-host-floor.",
)
@click.option(
    "--no-host-floor",
    is_flag=True,
    help="Keep no floor (--host-floor 0): accept that the workload may take this machine out "
    "of memory (the OOM killer).",
)
@click.option(
    "--grace",
    type=FloatRange(0.1, MAX_INTERVAL),
    callback=finite,
    default=DEFAULT_GRACE,
    show_default=True,
    metavar="SECONDS",
    help="How long a stopped workload may take to end before SIGKILL.",
)
@click.option(
    "--follow",
    default="10",
    show_default=True,
    callback=parse_follow,
    metavar="SECONDS|all",
    help="How long processes of the workload that outlive its first one are followed (the "
    "floor kept for them) before they are named as left running; all: until every one ends.",
)
@click.option(
    "--trace",
    is_flag=True,
    help="Trace the workload's Level Zero allocations and residency calls (a driver proxy "
    "built on first use with the C compiler): device memory is then what it allocated.",
)
@click.option(
    "--no-peer-residency",
    is_flag=True,
    help="Workaround (implies --trace): skip zeContextMakeMemoryResident on a device other "
    "than the allocation's owner. Risk: a peer that really needs the memory resident pays "
    "at first touch.",
)
@click.option(
    "--repeat",
    type=IntRange(1, MAX_REPEAT),
    default=1,
    show_default=True,
    metavar="N",
    help="Run the workload N times, one run after another, and judge the runs' climbs "
    "together as the audit judges its climbs: a cost of the workload's own comes back at "
    "the same step of every run, another process's lump in one run is outvoted. Stops after "
    "a run that fails, is stopped, or leaves processes running.",
)
@shared_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def run(
    host_floor: int | None,
    no_host_floor: bool,
    grace: float,
    follow: float,
    trace: bool,
    no_peer_residency: bool,
    repeat: int,
    interval: float,
    answer_only: bool,
    verbose: bool,
    json_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
    prometheus_path: Path | None,
    labels: dict[str, str],
    no_sysman: bool,
    fail_on_mirror: bool,
    command: tuple[str, ...],
) -> None:
    """Run a command and measure what it costs the host per GiB of device memory.

    The command inherits stdin, stdout and stderr and runs in its own process
    group, which a stop signal is forwarded to; in a terminal that group is in
    the foreground, as a shell's job (it reads the terminal, Ctrl-C reaches it
    and l0mem reports what it sampled). l0mem's own lines go to stderr.
    """
    if not command:
        fail("run", ExitCode.USAGE, "no command given: l0mem run [OPTIONS] -- CMD [ARGS]...")
    if not command[0]:
        fail("run", ExitCode.NOT_FOUND, "'' (an empty command name): command not found")
    host_floor = checked_floor("run", "--host-floor", host_floor, no_host_floor, "--no-host-floor")
    run_outputs.check("run", json_path, csv_path, plot_path, prometheus_path)
    if host_floor is None:
        from l0mem.probe import mem_total

        with reporting("run"):
            host_floor = default_floor(mem_total())
    console = output(highlight=False, stderr=True)
    progress = Progress(console, "run", quiet=answer_only, live=console.is_terminal)
    with contextlib.ExitStack() as stack:
        session = None
        if trace or no_peer_residency:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="l0mem-run-"))
            with reporting("run"):
                session = stack.enter_context(
                    TraceSession(Path(workdir), no_peer_residency=no_peer_residency)
                )
        env = None if session is None else session.environment(os.environ)
        watch = Watch(
            interval=interval,
            floor=host_floor or None,
            grace=grace,
            on_sample=run_outputs.with_prometheus(
                progress,
                prometheus_path,
                run_outputs.metric_labels(
                    {"mode": "run", "command": command, "options": {"labels": labels}}
                ),
            ),
            tracer=session,
            sysman=None if no_sysman else _sysman(stack, os.environ, None),
            look=min(LOOK, interval),
        )
        stack.callback(watch.close)
        # Until the files are written: a second signal must not cost what was measured.
        stack.enter_context(_stop_on_signals(watch))
        progress.await_reader(watch.sysman, "the workload starts", watch.stopped)
        try:
            with reporting("run"), progress:
                # A report on standard output is l0mem's alone: the workload's lines go to stderr.
                result = run_workload(
                    watch,
                    command,
                    env,
                    stdout=2
                    if to_stdout(json_path, csv_path, plot_path, prometheus_path)
                    else None,
                    follow=follow,
                    repeat=repeat,
                )
        except CommandError as exc:
            fail("run", exc.code, str(exc))
        except FloorError as exc:
            fail("run", ExitCode.NO_DEVICE, str(exc))
        meta = {
            "mode": "run",
            "command": list(command),
            "pid": None,
            "environment": os.environ if env is None else env,
            "options": {
                "interval": interval,
                "look": watch.look,
                "host_floor": host_floor,
                "grace": grace,
                "follow": None if math.isinf(follow) else follow,
                "repeat": repeat,
                "trace": session is not None,
                "no_peer_residency": no_peer_residency,
                "sysman": not no_sysman,
                "labels": labels,
            },
        }
        paths = (json_path, csv_path, plot_path, prometheus_path)
        summary = run_outputs.finish(
            "run", result, paths, meta, _title(command), True, watch, answer_only, verbose
        )
        if result.floor_stop is not None:
            fail("run", ExitCode.NO_DEVICE, result.floor_stop.message)
    code = run_exit_code(result, summary, fail_on_mirror)
    runs = result.runs or 1
    if runs < repeat and watch.stop_signal is None:
        notice("run", f"{runs} of {repeat} runs made: run {runs} did not succeed whole; the report judges those")
    workload = result.returncode
    if workload and result.stop_signal is None:
        # The workload's own code is passed on: say so, or it reads as one of l0mem's.
        how = (
            f"was killed by {signal_exit(-workload)[1]}"
            if workload < 0
            else f"exited with {workload}"
        )
        notice("run", f"the workload {how}; l0mem exits with {code}, as the workload did")
    raise SystemExit(code)


def _title(command: Sequence[str]) -> str:
    text = " ".join(command)
    return "l0mem run " + (text if len(text) <= 60 else text[:57] + "...")


def run_exit_code(result: WatchResult, summary: WatchSummary, fail_on_mirror: bool) -> int:
    """Return ``run``'s exit code: the workload's (128+N for a signal), else 1 for a mirror asked about."""
    code = result.returncode
    if code is None:
        return int(ExitCode.OK)
    if code < 0:
        return signal_exit(-code)[0]
    if code == 0 and fail_on_mirror and summary.verdict == "mirror":
        return int(ExitCode.REGRESSION)
    return code


@click.command("watch", epilog=exit_epilog("watch"))
@click.option(
    "--pid",
    type=IntRange(1, PID_MAX),
    required=True,
    help="The process to watch, with every process it starts (read-only).",
)
@click.option(
    "--duration",
    type=FloatRange(MIN_INTERVAL, 10 * 365 * 86400.0),
    callback=finite,
    metavar="SECONDS",
    help="Stop watching after this long (default: until the process ends or Ctrl-C).",
)
@shared_options
def watch(
    pid: int,
    duration: float | None,
    interval: float,
    answer_only: bool,
    verbose: bool,
    json_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
    prometheus_path: Path | None,
    labels: dict[str, str],
    no_sysman: bool,
    fail_on_mirror: bool,
) -> None:
    """Watch a running process: what it costs the host per GiB of device memory."""
    run_outputs.check("watch", json_path, csv_path, plot_path, prometheus_path)
    console = output(highlight=False, stderr=True)
    progress = Progress(console, "watch", quiet=answer_only, live=console.is_terminal)
    environment = read_environ(pid)  # at attach: gone once the process ended
    with contextlib.ExitStack() as stack:
        sysman = None if no_sysman else _sysman(stack, os.environ, environment or {})
        on_sample = run_outputs.with_prometheus(
            progress,
            prometheus_path,
            run_outputs.metric_labels({"mode": "watch", "pid": pid, "options": {"labels": labels}}),
        )
        watcher = Watch(
            interval=interval, on_sample=on_sample, sysman=sysman, look=min(LOOK, interval)
        )
        stack.callback(watcher.close)
        # Until the files are written: a second signal must not cost what was measured.
        stack.enter_context(_stop_on_signals(watcher))
        progress.await_reader(sysman, "watching starts", watcher.stopped)
        try:
            with reporting("watch"), progress:
                result = watch_pid(watcher, pid, duration=duration)
        except (NoSuchProcess, NotPermitted) as exc:
            fail("watch", ExitCode.NO_DEVICE, str(exc))
        meta = {
            "mode": "watch",
            "command": None,
            "pid": pid,
            "environment": environment,
            "options": {
                "interval": interval,
                "look": watcher.look,
                "duration": duration,
                "sysman": not no_sysman,
                "labels": labels,
            },
        }
        paths = (json_path, csv_path, plot_path, prometheus_path)
        summary = run_outputs.finish(
            "watch",
            result,
            paths,
            meta,
            f"l0mem watch --pid {pid}",
            False,
            watcher,
            answer_only,
            verbose,
        )
    if fail_on_mirror and summary.verdict == "mirror":
        raise SystemExit(int(ExitCode.REGRESSION))
    raise SystemExit(int(ExitCode.OK))


__all__ = ["run", "run_exit_code", "watch"]
