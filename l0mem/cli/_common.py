"""Exit codes, the one failure path, and the options shared by the l0mem commands.

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
import math
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click
from rich.console import Console

from l0mem.cli._exits import STOP_SIGNALS as STOP_SIGNALS
from l0mem.cli._exits import ExitCode as ExitCode
from l0mem.cli._exits import exit_epilog as exit_epilog
from l0mem.cli._exits import interrupt_signal as interrupt_signal
from l0mem.cli._exits import signal_exit as signal_exit
from l0mem.files import discard, is_stdout

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
)


def notice(command: str, message: str) -> None:
    """Print the one line ``l0mem COMMAND: MESSAGE`` on stderr."""
    click.echo(f"l0mem {command}: {message}", err=True)


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

    An interrupt (Ctrl-C, SIGTERM, SIGHUP) exits 128 + N; when it carries the
    ``partial`` result of what was measured, ``keep`` writes and prints it first.
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


# Upper bounds of the numeric options: far above any real use, they turn a
# mistyped or hostile number into a usage error (exit 2) before any work,
# instead of an allocation or a C conversion failing later (exit 6).
MAX_REPS = 100_000  # --reps and --warmup
MAX_DEVICES = 4096  # --count and --sub-devices
MAX_SEED = (1 << 63) - 1  # --seed: a non-negative 64-bit integer, as NumPy takes it


def finite(ctx: click.Context | None, param: click.Parameter | None, value: float | None) -> Any:
    """Click callback refusing nan, which every click.FloatRange lets through (exit 2)."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number, not nan")
    return value


# Options of the commands that measure on a backend (p2p, allreduce, bench).
backend_option = click.option(
    "--backend",
    type=click.Choice(["auto", "l0", "sycl"]),
    default="auto",
    show_default=True,
    help="Level Zero binding or SYCL (dpctl); auto: SYCL for a SYCL filter in --device, "
    "else Level Zero when a driver has a device, else SYCL.",
)
sub_devices_option = click.option(
    "--sub-devices",
    type=click.IntRange(2, MAX_DEVICES),
    help="SYCL: partition the selected device into N sub-devices (e.g. a CPU without GPUs).",
)
json_option = click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    metavar="PATH",
    help="Also write the result as JSON to PATH (checked before any work, written atomically; "
    "- is standard output).",
)


def floor_value(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> int | None:
    """Click callback: a floor of host memory as a size or a share of MemTotal (``10%``), in bytes."""
    if value is None:
        return None
    from l0mem.probe import MeminfoError, read_meminfo
    from l0mem.units import parse_size

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


def _device_indices_in_range(
    ctx: click.Context | None, param: click.Parameter | None, value: tuple[str, ...]
) -> tuple[str, ...]:
    """Click callback stopping a device index that no machine has before any work.

    str.isdigit() also takes digits int() refuses (superscripts) or converts
    slowly (thousands of them); those must not reach device selection. Such
    a spec is malformed (exit 2); a well-formed index no machine has is what
    an index this machine lacks is in every command, exit 3.
    """
    for spec in value:
        for part in (p.strip() for p in spec.split(",")):
            if not part.isdigit():
                continue
            if not part.isascii():
                raise click.BadParameter(f"device index {part[:24]!r} is not a decimal number")
            digits = part.lstrip("0") or "0"
            if len(digits) > 4 or int(digits) >= MAX_DEVICES:
                shown = part if len(part) <= 24 else part[:21] + "..."
                fail(
                    _command_name(ctx),
                    ExitCode.NO_DEVICE,
                    f"no device {shown}: device indices run from 0 to {MAX_DEVICES - 1} at most",
                )
    return value


def _command_name(ctx: click.Context | None) -> str:
    """Return the command as its failure lines name it (``bench kernels``, ``p2p``)."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    if not names and ctx is not None:
        names = [ctx.info_name or ""]
    return " ".join(n for n in names if n) or "l0mem"


def device_option(default_note: str = "") -> Callable[[_F], _F]:
    """Return the repeatable ``--device`` option; ``default_note`` ends its help text."""
    text = "Device index as `l0mem info` lists it (or a comma list), or a SYCL filter string; repeatable."
    return click.option(
        "--device",
        "device_specs",
        multiple=True,
        callback=_device_indices_in_range,
        help=f"{text} {default_note}" if default_note else text,
    )


def _count_option(name: str, minimum: int, default: int, text: str) -> Callable[[_F], _F]:
    return click.option(
        name,
        type=click.IntRange(minimum, MAX_REPS),
        default=default,
        show_default=True,
        metavar="N",
        help=text,
    )


def reps_option(default: int) -> Callable[[_F], _F]:
    """Return the ``--reps N`` option (timed repetitions, at least 1) with the command's default."""
    return _count_option(
        "--reps", 1, default, f"Timed repetitions of each measurement (1 to {MAX_REPS})."
    )


def warmup_option(default: int) -> Callable[[_F], _F]:
    """Return the ``--warmup N`` option (untimed rounds, 0 or more) with the command's default."""
    return _count_option(
        "--warmup", 0, default, f"Untimed rounds before the timed repetitions (0 to {MAX_REPS})."
    )


class SizeList(click.ParamType):
    """A comma-separated list of sizes in l0mem's grammar (:func:`l0mem.units.parse_sizes`).

    The value is the list of bytes, in the order given, repeats dropped; each
    size must also pass ``check`` (which raises ValueError with one line).
    """

    name = "sizes"

    def __init__(self, check: Callable[[int], object] | None = None) -> None:
        self.check = check

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> list[int]:
        """Return the sizes in ``value`` in bytes, or raise click.BadParameter (exit 2)."""
        if isinstance(value, list):
            return value
        from l0mem.units import parse_sizes

        try:
            sizes = parse_sizes(str(value))
            if self.check is not None:
                for nbytes in sizes:
                    self.check(nbytes)
        except ValueError as err:
            # The option's name as the usage line spells it, without click's quotes.
            hint = "/".join(param.opts) if param is not None else None
            raise click.BadParameter(str(err), ctx=ctx, param=param, param_hint=hint) from None
        return sizes


def sizes_option(
    default: str, note: str = "", *, check: Callable[[int], object] | None = None
) -> Callable[[_F], _F]:
    """Return the ``--sizes LIST`` option: bytes per device buffer, parsed by :class:`SizeList`.

    ``note`` (what the sizes mean to this command) goes into the help text;
    ``check`` refuses a size this command cannot take.
    """
    text = (
        "Bytes per device buffer, comma-separated, each a whole number of bytes "
        "with an optional K/M/G/T (binary) suffix"
    )
    return click.option(
        "--sizes",
        type=SizeList(check),
        default=default,
        show_default=True,
        metavar="LIST",
        help=f"{text} ({note})." if note else f"{text}.",
    )


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
        for other, earlier in [*inputs, *given[:pos]]:
            if same_path(path, earlier):
                fail(command, ExitCode.USAGE, f"{name} {path} is also {other}: give another path")
    for _, path in given:
        check_output(command, path)


def to_stdout(*paths: Path | None) -> bool:
    """Return whether one of the report ``paths`` is standard output: the tables then go to stderr."""
    return any(path is not None and is_stdout(path) for path in paths)


def stdout_is_tty() -> bool:
    """Return whether standard output is a terminal (False when it is closed)."""
    return sys.stdout is not None and sys.stdout.isatty()


class _Output(Console):
    """A rich Console that goes quiet when its reader has gone, instead of exiting 1."""

    def on_broken_pipe(self) -> None:
        """Stop printing; the command goes on to its own exit code (rich would exit 1)."""
        self.quiet = True
        discard(self.file)


def output(*, stderr: bool = False, **options: Any) -> Console:
    """Return the Console a command prints its result with (stderr when a report is on stdout)."""
    return _Output(stderr=stderr, **options)


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
        # EIO: the terminal hung up (SIGHUP's usual company).
        if err.errno not in (errno.EPIPE, errno.EBADF, errno.EIO):
            raise
        discard(sys.stdout)


@contextlib.contextmanager
def open_backend(
    kind: str,
    specs: Sequence[Any] = (),
    sub_devices: int | None = None,
    *,
    context: str = "default",
) -> Iterator[Any]:
    """Yield an open backend (:func:`l0mem.backends.open_backend`); close it afterwards."""
    from l0mem.backends import open_backend as open_library_backend

    mode = cast("ContextMode", context)  # click.Choice has checked it
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
