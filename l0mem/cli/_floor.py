"""The host memory floor option (``--floor`` of ``audit``, ``--host-floor`` of ``run``): parse and check.

A floor is a size (``4G``) or a share of MemTotal (``10%``). 0 turns the floor
off and needs the command's explicit opt-out; a floor below
:data:`SMALLEST_FLOOR` is refused as a forgotten unit (``--floor 1`` is one
byte, not one GiB).
"""

from __future__ import annotations

import click

from l0mem.cli._common import fail
from l0mem.cli._exits import ExitCode
from l0mem.probe import MeminfoError, read_meminfo
from l0mem.units import format_bytes, format_size, parse_size

SMALLEST_FLOOR = 64 << 20


def parse_floor(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Return a ``SIZE|PCT%`` option value in bytes (a click callback), or None if not given."""
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


def checked_floor(
    command: str, option: str, floor_bytes: int | None, off: bool, off_flag: str
) -> int | None:
    """Return the floor to keep (0 when ``off``); a contradiction or a tiny floor exits 2."""
    if off:
        if floor_bytes:
            fail(command, ExitCode.USAGE, f"{off_flag} and a {option} above 0 contradict each other: give one of them")
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
