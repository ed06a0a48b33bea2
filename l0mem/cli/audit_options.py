"""The audit's own option values: set-ups, sizes, a custom remedy's variables, device indices.

Each is checked before anything runs: a bad value is a usage error (exit 2).
The options every command shares are :mod:`._options`'.
"""

from __future__ import annotations

import click

from l0mem.audit.remedies import ALL_SETUPS, parse_env_assignments
from l0mem.backends import DeviceSelectionError
from l0mem.units import parse_size


def size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Click callback of ``--size``: bytes in l0mem's size grammar, or None (the default)."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def setups_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """Click callback of ``--setups``: the set-ups named, in order, once each (not given: all).

    Given, it must name one: an empty list (``""``, ``","``, blanks) is a usage
    error, not every set-up.
    """
    if not value:
        return ALL_SETUPS
    names = [n.strip() for item in value for n in item.split(",") if n.strip()]
    if not names:
        shown = ", ".join(repr(v) for v in value)
        raise click.BadParameter(
            f"{shown} names no set-up: choose from {', '.join(ALL_SETUPS)} (comma-separated), "
            "or leave --setups out for all of them"
        )
    unknown = [n for n in names if n not in ALL_SETUPS]
    if unknown:
        raise click.BadParameter(
            f"unknown set-up {unknown[0]!r}; choose from {', '.join(ALL_SETUPS)}"
        )
    return tuple(dict.fromkeys(names))


def env_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    """Click callback of ``--env``: the ``KEY=VALUE`` assignments of a custom remedy."""
    try:
        return parse_env_assignments(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def device_indices(specs: tuple[str, ...]) -> tuple[int, ...]:
    """Return the Level Zero device indices ``--device`` names; DeviceSelectionError if malformed.

    Only the syntax is checked here: the parent never loads a driver, so
    whether a device has the index is decided after discovery (exit 3).
    """
    indices: list[int] = []
    for spec in specs:
        parts = [p.strip() for p in spec.split(",")]
        if not any(parts):
            raise DeviceSelectionError(f"empty device spec {spec!r}: it names no device")
        for part in filter(None, parts):
            if not (part.isascii() and part.isdigit()):
                raise DeviceSelectionError(
                    f"expected a Level Zero device index as `l0mem info` lists it, got {part!r} "
                    "(a SYCL device is --sycl-device)"
                )
            if int(part) in indices:
                raise DeviceSelectionError(f"device {part} given twice")
            indices.append(int(part))
    return tuple(indices)


__all__ = ["device_indices", "env_option", "setups_option", "size_option"]
