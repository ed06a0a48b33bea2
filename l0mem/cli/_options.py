"""The options the l0mem commands share, parsed the same way in every command.

Devices (``--device``), backends, repetitions, sizes, the JSON output path
and the host memory floor (``--floor`` of ``audit``; ``SIZE|PCT%``): a floor
of 0 turns the guard off and needs the command's explicit opt-out, and a floor
below :data:`SMALLEST_FLOOR` is refused as a forgotten unit (``--floor 1`` is
one byte, not one GiB). Bad values are usage errors (exit 2) before any work.
What a command shows and writes beside its report (``-q``, ``-v``, ``--plot``,
``--prometheus``, ``--label``) is :mod:`._output_options`, offered here too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from l0mem.cli._common import ExitCode, fail
from l0mem.cli._numbers import FloatRange, IntRange, real

# What a command shows and writes beside its report: defined there, offered here too.
from l0mem.cli._output_options import OWN_LABELS as OWN_LABELS
from l0mem.cli._output_options import answer_only_option as answer_only_option
from l0mem.cli._output_options import check_plot as check_plot
from l0mem.cli._output_options import command_name
from l0mem.cli._output_options import label_option as label_option
from l0mem.cli._output_options import plot_option as plot_option
from l0mem.cli._output_options import prometheus_option as prometheus_option
from l0mem.cli._output_options import verbose_option as verbose_option
from l0mem.cli._paths import NamedPath
from l0mem.probe import MeminfoError, read_meminfo
from l0mem.text import excerpt
from l0mem.units import format_bytes, format_size, parse_size

_F = TypeVar("_F", bound=Callable[..., Any])


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
    type=IntRange(2, MAX_DEVICES),
    help="SYCL: partition the selected device into N sub-devices (e.g. a CPU without GPUs).",
)
json_option = click.option(
    "--json",
    "json_path",
    type=NamedPath(readable=False, allow_dash=True, path_type=Path),
    metavar="PATH",
    help="Also write the result as JSON to PATH (checked before any work, written atomically; "
    "- is standard output).",
)


def _device_specs_well_formed(
    ctx: click.Context | None, param: click.Parameter | None, value: tuple[str, ...]
) -> tuple[str, ...]:
    """Click callback refusing a spec that names nothing, or an index of digits int() must not take (exit 2).

    str.isdigit() also takes digits int() refuses (superscripts) or converts
    slowly (thousands of them); those must not reach device selection.
    """
    for spec in value:
        if not spec.replace(",", "").strip():  # "", ",", blanks: given, yet naming no device
            raise click.BadParameter(
                f"{spec!r} names no device: give a device index as `l0mem info` lists it (or "
                "a comma list), or a SYCL filter such as opencl:cpu; leave --device out for "
                "the default"
            )
    for part in _spec_parts(value):
        if part.isdigit() and not part.isascii():
            raise click.BadParameter(f"device index {excerpt(part)!r} is not a decimal number")
    return value


def _spec_parts(value: tuple[str, ...]) -> Iterator[str]:
    """Yield every element of the ``--device`` specs given (comma lists split)."""
    for spec in value:
        yield from (p.strip() for p in spec.split(","))


def _device_indices_in_range(command: str, value: tuple[str, ...]) -> None:
    """Stop a device index that no machine has before any work (exit 3).

    A well-formed index no machine has is what an index this machine lacks
    is in every command, exit 3; it is checked once every option was parsed,
    so that a usage error anywhere on the command line (exit 2) comes first.
    """
    for part in _spec_parts(value):
        if not part.isdigit():
            continue
        digits = part.lstrip("0") or "0"
        if len(digits) > 4 or int(digits) >= MAX_DEVICES:
            fail(
                command,
                ExitCode.NO_DEVICE,
                f"no device {excerpt(part)}: device indices run from 0 to {MAX_DEVICES - 1} at most",
            )


def device_option(default_note: str = "") -> Callable[[_F], _F]:
    """Return the repeatable ``--device`` option; ``default_note`` ends its help text."""
    text = "Device index as `l0mem info` lists it (or a comma list), or a SYCL filter string; repeatable."
    option = click.option(
        "--device",
        "device_specs",
        multiple=True,
        callback=_device_specs_well_formed,
        help=f"{text} {default_note}" if default_note else text,
    )

    def decorate(f: _F) -> _F:
        @functools.wraps(f)
        def checked(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            _device_indices_in_range(command_name(ctx), kwargs.get("device_specs", ()))
            return f(*args, **kwargs)

        return option(cast(_F, checked))

    return decorate


def _count_option(name: str, minimum: int, default: int, text: str) -> Callable[[_F], _F]:
    return click.option(
        name,
        type=IntRange(minimum, MAX_REPS),
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


SMALLEST_FLOOR = 64 << 20


def parse_follow(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """Click callback for ``--follow``: seconds (0 to a year), or ``all`` (until every process ends)."""
    if value.strip().lower() == "all":
        return math.inf
    try:
        seconds = real(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: seconds (ASCII digits, like 10 or 2.5), or all") from None
    if not 0.0 <= seconds <= 365 * 86400.0:  # nan fails too
        raise click.BadParameter(f"{value!r}: seconds from 0 to a year, or all")
    return seconds


def parse_floor(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Return a ``SIZE|PCT%`` option value in bytes (a click callback), or None if not given."""
    if value is None:
        return None
    text = value.strip()
    if text.endswith("%"):
        try:
            share = real(text[:-1])
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


def checked_floor(
    command: str, option: str, floor_bytes: int | None, off: bool, off_flag: str
) -> int | None:
    """Return the floor to keep (0 when ``off``); a contradiction or a tiny floor exits 2."""
    if off:
        if floor_bytes:
            fail(
                command,
                ExitCode.USAGE,
                f"{off_flag} and a {option} above 0 contradict each other: give one of them",
            )
        return 0
    if floor_bytes == 0:
        fail(
            command,
            ExitCode.USAGE,
            f"{option} 0 turns the safety guard off: add {off_flag} to accept that the "
            f"{command} may take this machine out of memory",
        )
    if floor_bytes is not None and floor_bytes < SMALLEST_FLOOR:
        fail(
            command,
            ExitCode.USAGE,
            f"a {option} of {format_bytes(floor_bytes)} protects nothing (at least "
            f"{format_size(SMALLEST_FLOOR)}); a size without a unit is bytes: write 4G for "
            f"4 GiB, or {off_flag} to turn the floor off",
        )
    return floor_bytes


def hang_after_option(func: _F) -> _F:
    """Add ``--hang-after SECONDS``: the watchdog's base (:func:`l0mem.backends.copy_deadline`)."""
    from l0mem.backends.base import HANG_BASE_S

    return click.option(
        "--hang-after",
        type=FloatRange(0.01, 3600.0),
        callback=finite,
        default=HANG_BASE_S,
        show_default=True,
        metavar="SECONDS",
        help="The watchdog: an operation moving N bytes that has not completed after this plus "
        "N at 50 MB/s is reported as a hang (exit 1).",
    )(func)
