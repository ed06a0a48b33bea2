"""Exit codes, the one failure path, outputs and backends shared by the l0mem commands.

Every command reports a failure the same way: one line ``l0mem COMMAND: MESSAGE``
on stderr and a documented :class:`ExitCode` (:func:`fail`; the codes and what
each means in every command are the one table of :mod:`._exits`). The library
raises its own errors and never exits; which error means which exit code is
decided here once (:func:`classify`), for blocks that read or write reports
(:func:`reporting`) and for blocks that measure on a device (:func:`measuring`,
which also turns running out of memory into :attr:`ExitCode.NO_DEVICE` and
any other runtime failure into :attr:`ExitCode.DRIVER_ERROR`).
"""

from __future__ import annotations

import contextlib
import errno
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click
from rich.console import Console
from rich.markup import escape as _markup_escape

from l0mem.cli._exits import STOP_SIGNALS as STOP_SIGNALS
from l0mem.cli._exits import ExitCode as ExitCode
from l0mem.cli._exits import exit_epilog as exit_epilog
from l0mem.cli._exits import interrupt_signal as interrupt_signal
from l0mem.cli._exits import signal_exit as signal_exit
from l0mem.files import discard, is_stdout
from l0mem.text import os_text, printable

if TYPE_CHECKING:
    from l0mem.backends.select import ContextMode

_F = TypeVar("_F", bound=Callable[..., Any])


# audit and compare also print lines that are not failures (progress, notes,
# a verdict); theirs say "error:" so that a CI log can be searched for them.
_SAYS_ERROR = frozenset({"audit", "compare"})

# Library errors and the exit code each means, most specific first, as
# (module, class, code). Classes are looked up in sys.modules: an error can
# only have been raised if its module was imported, so the failure path never
# imports (and never fails on) a module of its own. tests/test_cli_common.py
# checks that every entry names an exception class.
LIBRARY_ERRORS: tuple[tuple[str, str, ExitCode], ...] = (
    # A driver that hung or crashed in zeInit, found in a child process first.
    ("l0mem._ze.guard", "DriverLoadError", ExitCode.DRIVER_ERROR),
    ("l0mem._ze.guard", "DriverTimeoutSettingError", ExitCode.USAGE),
    ("l0mem.files", "ReportWriteError", ExitCode.BAD_INPUT),
    ("l0mem.audit.model", "ReportFormatError", ExitCode.BAD_INPUT),
    ("l0mem.audit.compare", "ReportMismatchError", ExitCode.MISMATCH),
    ("l0mem.backends.select", "NoDeviceError", ExitCode.NO_DEVICE),
    ("l0mem.backends.select", "DeviceSelectionError", ExitCode.USAGE),
    # Too little memory, predicted or met, is one class: the machine cannot serve
    # the request as asked (a device too small, or the host).
    ("l0mem.bench.fit", "HostTooSmall", ExitCode.NO_DEVICE),
    ("l0mem._ze.errors", "OutOfDeviceMemoryError", ExitCode.NO_DEVICE),
    ("l0mem._ze.errors", "OutOfHostMemoryError", ExitCode.NO_DEVICE),
    ("l0mem.probe.host", "MeminfoError", ExitCode.DRIVER_ERROR),
    # No C compiler for the allocation tracer: this machine cannot serve --trace.
    ("l0mem.trace.errors", "TraceBuildError", ExitCode.NO_DEVICE),
    ("l0mem.audit.runner", "DiscoveryError", ExitCode.DRIVER_ERROR),
    # A copy or an all-reduce that hung is a finding about this machine's driver.
    ("l0mem.backends.base", "CopyTimeout", ExitCode.REGRESSION),
    # Any other driver error (a lost device, ...): its message names the call and the result.
    ("l0mem._ze.errors", "ZeError", ExitCode.DRIVER_ERROR),
)


# A write that failed for good: the reader has gone (EPIPE), the descriptor is closed
# (EBADF) or the terminal hung up (EIO, SIGHUP's usual company).
GONE = frozenset({errno.EPIPE, errno.EBADF, errno.EIO})
# ... or the file behind a redirection cannot grow: the output is lost, and said so.
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def notice(command: str, message: str) -> None:
    """Print the one line ``l0mem COMMAND: MESSAGE`` on stderr (``l0mem: MESSAGE`` without a command).

    A stderr that is gone (a closed terminal, a reader that left) takes the line
    quietly: the reports are written and the exit code is the command's own.
    """
    # Escapes are shown, not obeyed (click would drop them off a terminal, showing another name);
    # a name's byte that is not UTF-8 as its code, as every report shows it.
    text = printable(os_text(message))
    try:
        click.echo(f"l0mem {command}: {text}" if command else f"l0mem: {text}", err=True)
    except OSError:
        # Gone, or full (ENOSPC): there is nowhere else to say it; the exit code still does.
        discard(sys.stderr)


def error(command: str, message: str) -> None:
    """Print the one-line error ``l0mem COMMAND: MESSAGE`` on stderr without exiting."""
    notice(command, f"error: {message}" if command in _SAYS_ERROR else message)


def fail(command: str, code: int, message: str) -> NoReturn:
    """Print a one-line error for ``command`` and exit with ``code`` (an ExitCode, or 128+N)."""
    error(command, message)
    raise SystemExit(int(code))


def classify(err: BaseException) -> tuple[ExitCode, str] | None:
    """Return the exit code and one-line message of a library error, or None for any other."""
    for module, name, code in LIBRARY_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(err, cls):
            return code, _first_line(str(err))
    return None


# A message quotes what it refuses; a hostile input (a megabyte-long schema
# string) must not make the one line a megabyte long.
MAX_MESSAGE = 400


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


@contextlib.contextmanager
def reporting(command: str) -> Iterator[None]:
    """Turn a library error raised in the block into ``command``'s one-line error and exit code.

    Anything else (a bug) propagates with its traceback.
    """
    try:
        yield
    except Exception as err:
        mapped = classify(err)
        if mapped is None:
            raise
        fail(command, *mapped)


def _release_warning() -> type[Warning]:
    from l0mem.core import ReleaseWarning

    return ReleaseWarning


def _replay(caught: Sequence[warnings.WarningMessage], *, skip_release: bool) -> None:
    """Show the held warnings again, leaving out ReleaseWarnings when ``skip_release``."""
    release = _release_warning() if caught else Warning
    for w in caught:
        if skip_release and issubclass(w.category, release):
            continue
        warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def _memory_message(err: MemoryError) -> str:
    # NumPy and bytearray fail on the host (the former with its own subclass,
    # the latter with no message); the backends name the device they failed on.
    text = str(err).splitlines()[0] if str(err) else ""
    if not text or type(err).__module__.startswith("numpy"):
        return f"out of host memory{': ' + text if text else ''}"
    return f"out of device memory: {text}"


@contextlib.contextmanager
def measuring(command: str, keep: Callable[[Any], None] | None = None) -> Iterator[None]:
    """Turn a failure while ``command`` measures into its one-line error and exit code.

    An interrupt (Ctrl-C, SIGTERM, SIGHUP) exits 128 + N; when it, or any
    other failure, carries the ``partial`` result of what was measured,
    ``keep`` writes and prints it first.
    Handles that fail to release during the teardown after a failure (every
    call fails once a device is lost) would each print a ReleaseWarning; they
    are dropped then, so the one line names the original failure.
    """
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
        except BaseException as err:
            failure: BaseException | None = err
        else:
            failure = None
    if failure is None:
        _replay(caught, skip_release=False)
        return
    _replay(caught, skip_release=True)
    # Objects the traceback still holds are freed at exit: keep that quiet too.
    warnings.simplefilter("ignore", _release_warning())
    partial = getattr(failure, "partial", None)
    if keep is not None and partial is not None and not isinstance(failure, KeyboardInterrupt):
        # What finished before a hang or a lost device is written and shown first.
        keep(partial)
        error(command, "stopped by the failure below; what finished before it was kept")
    mapped = classify(failure)
    if mapped is not None:
        fail(command, *mapped)
    if isinstance(failure, KeyboardInterrupt):
        code, name = signal_exit(interrupt_signal(failure))
        partial = getattr(failure, "partial", None)
        if keep is not None and partial is not None:
            keep(partial)
            error(command, f"interrupted by {name}; device memory was freed, partial results kept")
        else:
            error(command, f"interrupted by {name}; device memory was freed")
        raise SystemExit(code)
    if isinstance(failure, MemoryError):
        fail(command, ExitCode.NO_DEVICE, _memory_message(failure))
    if isinstance(failure, Exception) and not isinstance(failure, click.ClickException):
        fail(command, ExitCode.DRIVER_ERROR, _first_line(f"{type(failure).__name__}: {failure}"))
    raise failure


def check_output(command: str, path: Path | None) -> None:
    """Fail ``command`` with BAD_INPUT (exit 4) unless ``path`` is None or could be written.

    Every command calls it first, before any device is opened: a bad path
    must not throw a long run away.
    """
    if path is None:
        return
    from l0mem.files import check_writable

    with reporting(command):
        check_writable(path)


def check_outputs(
    command: str,
    outputs: Sequence[tuple[str, Path | None]],
    inputs: Sequence[tuple[str, Path]] = (),
) -> None:
    """Check ``command``'s output paths, given as (option, path), before any work.

    An output that is also an input, or two outputs naming one file (after
    symlinks), is a usage error (exit 2): one would overwrite the other. Then
    each output must be writable (:func:`check_output`, exit 4).
    """
    from l0mem.files import same_path

    given = [(name, path) for name, path in outputs if path is not None]
    for pos, (name, path) in enumerate(given):
        for other, earlier in given[:pos]:
            # Two reports on one stream would be one unreadable file (same_path misses "-").
            if is_stdout(path) and is_stdout(earlier):
                fail(
                    command,
                    ExitCode.USAGE,
                    f"{other} {earlier} and {name} {path} both write standard output: "
                    "give a file for one",
                )
        for other, earlier in [*inputs, *given[:pos]]:
            if same_path(path, earlier):
                fail(command, ExitCode.USAGE, f"{name} {path} is also {other}: give another path")
    for _, path in given:
        check_output(command, path)


def escape(text: str) -> str:
    """Return ``text`` for rich markup, shown as written: markup escaped, control characters as their code.

    Every text a command prints from a report or another process goes
    through here: an escape sequence in a watched command's name or a
    report's label is shown, never sent to the terminal (newlines and tabs
    stay), and a name's byte that is not UTF-8 as its code (``\\xff``).
    """
    return _markup_escape(printable(os_text(text), keep="\n\t"))


def stopped_printing(err: OSError, stream: Any) -> None:
    """Stop writing to ``stream`` after ``err``; say why where the reader did not simply go.

    A reader that left (``| head``) or a terminal that hung up is no news. A
    full disk or another write error behind a redirection is: the output the
    user asked for is missing, so one line on stderr says so. Either way the
    reports are written and the command keeps its own exit code.
    """
    if err.errno not in GONE and stream is not sys.stderr:
        ctx = click.get_current_context(silent=True)
        command = ctx.command_path.partition(" ")[2] if ctx is not None else ""
        name = "standard output" if stream is sys.stdout else getattr(stream, "name", "output")
        notice(
            command,
            f"{name}: {err.strerror or err}: the output stops here (reports are written before it)",
        )
    discard(stream)


def to_stdout(*paths: Path | None) -> bool:
    """Return whether one of the report ``paths`` is standard output: the tables then go to stderr."""
    return any(path is not None and is_stdout(path) for path in paths)


def stdout_is_tty() -> bool:
    """Return whether standard output is a terminal (False when it is closed)."""
    return sys.stdout is not None and sys.stdout.isatty()


class _Output(Console):
    """A rich Console that goes quiet when its reader or terminal has gone, instead of exiting 1."""

    def on_broken_pipe(self) -> None:
        """Stop printing; the command goes on to its own exit code (rich would exit 1)."""
        self.quiet = True
        discard(self.file)

    def _check_buffer(self) -> None:
        # rich answers a broken pipe only; a terminal that hung up (EIO, as the live
        # view stops), a closed descriptor or a full disk all end the printing.
        try:
            super()._check_buffer()
        except OSError as err:
            if err.errno not in GONE | FULL:
                raise
            del self._buffer[:]
            self.quiet = True
            stopped_printing(err, self.file)


# Narrower than this a table has no room for a single word per cell: COLUMNS below
# it (COLUMNS=5) renders at this width rather than as empty boxes.
MIN_COLUMNS = 40


def output(*, stderr: bool = False, **options: Any) -> Console:
    """Return the Console a command prints its result with (stderr when a report is on stdout)."""
    console = _Output(stderr=stderr, **options)
    if console.width < MIN_COLUMNS:
        console.width = MIN_COLUMNS
    return console


@contextlib.contextmanager
def rendering() -> Iterator[None]:
    """Print a result; a closed or broken standard output (``| head``) ends the block quietly.

    Reports are written before this block, so nothing is lost and the command
    goes on to the exit code it would have had.
    """
    try:
        yield
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as err:
        if err.errno not in GONE | FULL:
            raise
        stopped_printing(err, sys.stdout)


@contextlib.contextmanager
def open_backend(
    kind: str,
    specs: Sequence[Any] = (),
    sub_devices: int | None = None,
    *,
    context: str = "default",
) -> Iterator[Any]:
    """Yield an open backend (:func:`l0mem.backends.open_backend`); close it afterwards."""
    from l0mem._ze.guard import check_drivers_load
    from l0mem.backends import open_backend as open_library_backend

    mode = cast("ContextMode", context)  # click.Choice has checked it
    check_drivers_load()  # a driver that hangs or crashes in zeInit takes a child, not l0mem
    backend = open_library_backend(kind, specs, sub_devices=sub_devices, context=mode)
    try:
        yield backend
    except BaseException:
        close_quietly(backend)
        raise
    backend.close()


def close_quietly(backend: Any) -> None:
    """Close ``backend`` after a failure: its own errors and ReleaseWarnings are dropped.

    With a lost device every release fails too; the caller reports the
    failure that came first.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _release_warning())
        with contextlib.suppress(Exception):
            backend.close()


def save_json(command: str, path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically, or fail ``command`` with BAD_INPUT."""
    from l0mem.files import write_json

    try:
        write_json(path, data)
    except OSError as err:
        fail(command, ExitCode.BAD_INPUT, str(err))


def save_plot(command: str, path: Path, draw: Callable[[Path], None]) -> None:
    """Write a plot with ``draw(path)`` (atomic, as every report), or fail ``command`` with BAD_INPUT."""
    from l0mem.plots import MissingDependencyError

    try:
        draw(path)
    except (OSError, MissingDependencyError, ValueError) as err:
        fail(command, ExitCode.BAD_INPUT, str(err))
