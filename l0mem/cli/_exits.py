"""The exit codes of every l0mem command and what each means: one table for the docs and ``--help``.

Each failure class has one code in every command. 1 is a finding only (a
regression, a mirror, a sum outside its error bound), never a failure. 2 is a
command line that is wrong on any machine; 3 is a well-formed request this
machine cannot serve: no loader, driver or device for it, or too little
device or host memory for the sizes asked. A device lost or any other driver
or runtime failure while working is 6, wherever it happens (discovery
included). :data:`EXIT_TABLE` says which rows apply to which command;
:func:`readme_rows` renders the table docs/guide/exit-codes.md shows (a test
keeps the two equal) and :func:`exit_epilog` each command's ``--help`` part.
"""

from __future__ import annotations

import enum
import signal
import textwrap
from typing import NamedTuple


class ExitCode(enum.IntEnum):
    """Documented process exit codes of the l0mem command line."""

    OK = 0
    REGRESSION = 1  # a finding: a regression, a mirror (--fail-on-mirror), a sum out of bound
    USAGE = 2  # bad command-line usage (click's own code)
    NO_DEVICE = 3  # this machine cannot serve the request: no driver or device, too little memory
    BAD_INPUT = 4  # an input file is missing, unreadable or malformed, or an output unwritable
    MISMATCH = 5  # inputs are well-formed but cannot be compared
    DRIVER_ERROR = 6  # the driver or runtime failed while working (a lost device)
    INTERNAL = 70  # a bug in l0mem (EX_SOFTWARE): the traceback is printed
    CANNOT_EXECUTE = 126  # run: the command exists but cannot be executed (as a shell says)
    NOT_FOUND = 127  # run: no such command (as a shell says)
    INTERRUPTED = 130  # Ctrl-C (SIGINT); any stop signal N ends a command with 128 + N


# A stop signal ends a command as Ctrl-C does, exit code 128 + N as a shell reports
# a signal: SIGHUP 129, SIGINT 130 (ExitCode.INTERRUPTED), SIGTERM 143.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_exit(signum: int) -> tuple[int, str]:
    """Return the exit code (128 + N) and the name of stop signal ``signum``."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return 128 + signum, name


def interrupt_signal(err: BaseException) -> int:
    """Return the signal an interrupt stands for: its ``signum``, else SIGINT (Ctrl-C)."""
    signum = getattr(err, "signum", None)
    return signum if isinstance(signum, int) else int(signal.SIGINT)


def code_label(code: ExitCode) -> str:
    """Return how the table shows ``code``: its number, or ``128+N`` for the stop signals."""
    return "128+N" if code == ExitCode.INTERRUPTED else str(int(code))


class Row(NamedTuple):
    """One meaning of an exit code, for the commands it applies to."""

    code: ExitCode
    text: str  # Markdown as the docs show it; --help drops the backticks
    commands: frozenset[str]


COMMANDS = (
    "info",
    "audit",
    "compare",
    "matrix",
    "p2p",
    "allreduce",
    "bench kernels",
    "run",
    "watch",
    "demo",
)
_ALL = frozenset(COMMANDS)
_WATCHING = frozenset({"run", "watch"})
_BACKEND = frozenset({"p2p", "allreduce", "bench kernels"})
_DEVICE = _BACKEND | {"audit"}
_SUB_DEVICES = frozenset({"p2p", "allreduce"})


def _only(*names: str) -> frozenset[str]:
    return frozenset(names)


EXIT_TABLE: tuple[Row, ...] = (
    Row(ExitCode.OK, "success", _ALL - {"compare", "run"}),
    Row(ExitCode.OK, "`compare`: no regression", _only("compare")),
    Row(
        ExitCode.OK,
        "`run`: the workload succeeded; any other exit code of the workload is passed "
        "through as it is (a workload killed by signal N: 128+N, as a shell says)",
        _only("run"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`compare`: a regression (a verdict got worse, a slope rose beyond "
        "`--slope-tolerance`, or, unless `--allow-unjudged`, a run with a verdict in the "
        "baseline failed, is inconclusive or is missing, or a run has no verdict in the "
        "baseline to hold it to)",
        _only("compare"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`matrix --baseline STACK`: a cell worse than the baseline row's cell of the same "
        "set-up, by `compare`'s rule",
        _only("matrix"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`audit --fail-on-mirror`: a mirror on a device whose memory is not host memory "
        "(a CPU or integrated device's 1:1 is a positive control)",
        _only("audit"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`allreduce`: a sum outside its error bound, devices that disagree, or a call that "
        "hung (not finished within its watchdog bound; the line names the path, the size and "
        "where in its run it hung)",
        _only("allreduce"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`p2p`: a copy that corrupted data (the pair, route, size, first wrong offset and the "
        "pattern's seed are named) or hung (not finished within the `--hang-after` bound)",
        _only("p2p"),
    ),
    Row(
        ExitCode.REGRESSION,
        "`run --fail-on-mirror`, `watch --fail-on-mirror`: a mirror: the host paid at least "
        "the audit's mirror threshold per GiB of the workload's device memory (`run`: when "
        "the workload itself succeeded)",
        _WATCHING,
    ),
    Row(
        ExitCode.USAGE,
        "bad command-line usage: an unknown option, or a bad value (a number outside the "
        "range `--help` shows, a malformed size, a list that names nothing: `--setups \"\"`, "
        "`--device ,`)",
        _ALL,
    ),
    Row(
        ExitCode.USAGE,
        "`-q` (the answer only) with `-v` (every signal)",
        _BACKEND | {"audit"} | _WATCHING,
    ),
    Row(
        ExitCode.USAGE,
        "a device spec that cannot name a device (malformed, given twice, a filter string "
        "for `--backend l0`)",
        _BACKEND,
    ),
    Row(
        ExitCode.USAGE,
        "`$L0MEM_DRIVER_TIMEOUT` that is not a positive number of seconds",
        _ALL - {"compare", "matrix", "demo"} - _WATCHING,
    ),
    Row(
        ExitCode.USAGE,
        "`audit`: a `--device` that is not a list of Level Zero indices, or names one twice",
        _only("audit"),
    ),
    Row(
        ExitCode.USAGE,
        "`audit`: `--floor 0` without `--no-floor`, or `--no-floor` with a floor above 0",
        _only("audit"),
    ),
    Row(
        ExitCode.USAGE,
        "`run`: `--host-floor 0` without `--no-host-floor`, `--no-host-floor` with a floor "
        "above 0, or a floor below 64 MiB (a size without a unit is bytes)",
        _only("run"),
    ),
    Row(
        ExitCode.USAGE,
        "an output path that is also an input or another output (after symlinks)",
        _only("audit", "compare", "run", "watch"),
    ),
    Row(
        ExitCode.USAGE,
        "`--plot` without matplotlib installed (`pip install 'l0mem[plot]'`)",
        _only("audit", "run", "watch", "p2p", "matrix", "compare"),
    ),
    Row(
        ExitCode.USAGE,
        "`matrix`: a `--baseline` that matches no stack of the reports, or several (the line "
        "lists them), or an empty REPORT name",
        _only("matrix"),
    ),
    Row(
        ExitCode.USAGE,
        "`bench kernels`: `--work-group-size` with the Level Zero backend, or above the "
        "kernels' limit",
        _only("bench kernels"),
    ),
    Row(ExitCode.NO_DEVICE, "no Level Zero loader, driver or device", _BACKEND | {"info"}),
    Row(
        ExitCode.NO_DEVICE,
        "`--backend sycl`: no dpctl or SYCL device (the line names the setting that hid the "
        "devices, such as `OCL_ICD_FILENAMES` or `ZE_ENABLE_ALT_DRIVERS`, and what to install)",
        _BACKEND,
    ),
    Row(ExitCode.NO_DEVICE, "`audit`: no Level Zero or SYCL device at all", _only("audit")),
    Row(
        ExitCode.NO_DEVICE,
        "`demo`: this l0mem has no simulated driver (a wheel built without it, a checkout "
        "without `$L0MEM_SIM_LIBRARY`, or that variable names no file)",
        _only("demo"),
    ),
    Row(
        ExitCode.NO_DEVICE,
        "a device index no driver has (any number), or a SYCL filter no device matches",
        _DEVICE,
    ),
    Row(
        ExitCode.NO_DEVICE,
        "too few devices (`allreduce`), or compute units for `--sub-devices`",
        _SUB_DEVICES,
    ),
    Row(
        ExitCode.NO_DEVICE,
        "`allreduce`: NumPy is not installed (`pip install 'l0mem[bench]'`)",
        _only("allreduce"),
    ),
    Row(
        ExitCode.NO_DEVICE,
        "a device too small or out of device memory for the request (the line names the "
        "allocation's size and device), or too little host memory for it",
        _BACKEND,
    ),
    Row(
        ExitCode.NO_DEVICE,
        "`audit`: every set-up was skipped, or none measured a single step (the first "
        "allocation ran out of device memory, or the floor left no host memory for it; "
        "the report is written)",
        _only("audit"),
    ),
    Row(
        ExitCode.NO_DEVICE,
        "`run`: the host's available memory was about to fall below `--host-floor`: the "
        "workload was stopped (SIGTERM, SIGKILL after `--grace`; the report is written), or "
        "it was at the floor already and nothing was started",
        _only("run"),
    ),
    Row(
        ExitCode.NO_DEVICE,
        "`run --trace`, `--no-peer-residency`: the allocation tracer cannot be built (no C "
        "compiler, or it failed)",
        _only("run"),
    ),
    Row(
        ExitCode.NO_DEVICE,
        "`watch`: no process has the pid, or its memory cannot be read (another user's process), "
        "or it is a kernel thread (no memory of its own)",
        _only("watch"),
    ),
    Row(
        ExitCode.BAD_INPUT,
        "`compare`: a report is missing, unreadable or malformed",
        _only("compare"),
    ),
    Row(
        ExitCode.BAD_INPUT,
        "`matrix`: a report is missing, unreadable or malformed, a directory holds none, or "
        "none of the files given is an audit or run/watch report that holds a measured set-up "
        "(an audit report of no run, or only skipped ones, is left out as well; each file left "
        "out beside usable ones is a warning)",
        _only("matrix"),
    ),
    Row(
        ExitCode.BAD_INPUT,
        "a report cannot be written (checked before the command does any work), or one "
        "sent to `--json -` could not be delivered",
        _ALL,
    ),
    Row(
        ExitCode.MISMATCH,
        "the reports are well-formed but cannot be compared (different schema major "
        "versions, no run in common, a report that holds no measured set-up (no run, or only "
        "skipped ones; the line names it), the two from different platforms (hardware, the "
        "simulator, a GPU driver running without hardware), or with `--fail-on-missing` a "
        "run in only one of them)",
        _only("compare"),
    ),
    Row(
        ExitCode.DRIVER_ERROR,
        "the driver or runtime failed (a lost device, at any point); `info`, `p2p`, "
        "`allreduce`, `bench kernels`: it crashed the process that runs the command in a call "
        "(SIGABRT, SIGSEGV: the line names the signal; killed by SIGKILL, the OOM killer: "
        "137 and a line)",
        _ALL - {"compare", "matrix", "demo"} - _WATCHING,
    ),
    Row(
        ExitCode.DRIVER_ERROR,
        "a driver that hung in `zeInit` (no return within `$L0MEM_DRIVER_TIMEOUT` seconds, "
        "60 by default) or crashed there, found by trying it in a child process first",
        _ALL - {"compare", "matrix", "demo"} - _WATCHING,
    ),
    Row(
        ExitCode.DRIVER_ERROR,
        "`demo`: one of its steps (`audit`, `run`) failed; the step's own line says why",
        _only("demo"),
    ),
    Row(
        ExitCode.DRIVER_ERROR,
        "`audit`: a set-up failed (its driver crashed, or a call did not return: its child "
        "wrote nothing for `$L0MEM_DRIVER_TIMEOUT` seconds plus the settle time where that is "
        "set, 300 s otherwise), or device discovery did (the report is written)",
        _only("audit"),
    ),
    Row(
        ExitCode.INTERNAL,
        "a bug in l0mem: an error no rule above covers; the traceback is printed, to be "
        "reported (never 1, which is a finding)",
        _ALL,
    ),
    Row(
        ExitCode.INTERRUPTED,
        "interrupted by signal N, every command alike: SIGHUP 129, SIGINT (Ctrl-C) 130, "
        "SIGTERM 143. Device memory was freed and the line names the signal; `audit` writes "
        "its partial report, `p2p`, `allreduce` and `bench kernels` write and show what they "
        'finished (`"complete": false`); `run` forwards the signal to the workload\'s process '
        "group and waits for it (SIGKILL after `--grace`), `run` and `watch` write and show "
        "what they sampled",
        _ALL,
    ),
    Row(
        ExitCode.CANNOT_EXECUTE,
        "`run`: the command was found but cannot be executed (as a shell says)",
        _only("run"),
    ),
    Row(ExitCode.NOT_FOUND, "`run`: the command was not found (as a shell says)", _only("run")),
)


def _rows(command: str | None) -> list[tuple[ExitCode, list[str]]]:
    """Return each code with its meanings, for ``command`` (None: every command)."""
    out: dict[ExitCode, list[str]] = {}
    for row in EXIT_TABLE:
        if command is None or command in row.commands:
            out.setdefault(row.code, []).append(row.text)
    return sorted(out.items())


def readme_rows() -> list[tuple[str, str]]:
    """Return the rows of the exit-code table in the docs: each code's label and its meanings joined."""
    return [(code_label(code), "; ".join(texts)) for code, texts in _rows(None)]


def exit_epilog(command: str) -> str:
    """Return the "Exit codes:" part of ``command``'s ``--help`` (click keeps its lines)."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    lines = ["\b", "Exit codes:"]
    for code, texts in _rows(command):
        # The command's own help need not name it again.
        mine = [t.removeprefix(f"`{command}`: ") for t in texts]
        lines += textwrap.wrap(
            "; ".join(mine).replace("`", ""),
            width=78,
            initial_indent=f"  {code_label(code):<6s}",
            subsequent_indent=" " * 8,
            break_on_hyphens=False,
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "COMMANDS",
    "EXIT_TABLE",
    "STOP_SIGNALS",
    "ExitCode",
    "Row",
    "code_label",
    "exit_epilog",
    "interrupt_signal",
    "readme_rows",
    "signal_exit",
]
