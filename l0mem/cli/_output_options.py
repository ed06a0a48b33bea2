"""The options that choose what a command shows and writes beside its report, the same everywhere.

``-q`` (the answer only: no progress, no tables) and ``-v`` (every signal
after the tables) contradict each other in every command that has both: the
two together are a usage error (exit 2, one line) before any work.
``--plot PATH`` (its suffix and matplotlib checked before any work),
``--prometheus PATH`` and ``--label KEY=VALUE`` (a label l0mem's own metrics
do not carry). :mod:`._options` re-exports them with the other shared options.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from l0mem.cli._common import ExitCode, fail
from l0mem.cli._paths import NamedPath
from l0mem.text import os_text

_F = TypeVar("_F", bound=Callable[..., Any])


def command_name(ctx: click.Context | None) -> str:
    """Return the command as its failure lines name it (``bench kernels``, ``p2p``)."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    if not names and ctx is not None:
        names = [ctx.info_name or ""]
    return " ".join(n for n in names if n) or "l0mem"


def _answer_or_every_signal(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Click callback of ``-q`` and ``-v``: the two together are a usage error (exit 2, one line)."""
    other = "verbose" if param.name == "answer_only" else "answer_only"
    if value and ctx.params.get(other):
        fail(
            command_name(ctx),
            ExitCode.USAGE,
            "-q/--quiet (the answer only) and -v/--verbose (every signal) contradict each "
            "other: give one of them",
        )
    return value


answer_only_option = click.option(
    "-q",
    "--quiet",
    "answer_only",
    is_flag=True,
    callback=_answer_or_every_signal,
    help="Print the answer only (its first lines): no progress, no tables; --json still has "
    "everything (not with -v).",
)


def verbose_option(signals: str) -> Callable[[_F], _F]:
    """Return ``-v/--verbose``: the default output and then ``signals``; not with ``-q``."""
    return click.option(
        "-v",
        "--verbose",
        "verbose",
        is_flag=True,
        callback=_answer_or_every_signal,
        help=f"Show every signal after the tables: {signals} (not with -q).",
    )


prometheus_option = click.option(
    "--prometheus",
    "prometheus_path",
    type=NamedPath(readable=False, path_type=Path),
    metavar="PATH",
    help="Also write the metrics in node-exporter's textfile format (written atomically; "
    "name it *.prom in the collector's directory).",
)

# Label names l0mem's own metrics carry: a --label may not take one of them.
OWN_LABELS = frozenset(
    {
        "mode",
        "pid",
        "command",
        "setup",
        "remedy",
        "backend",
        "platform",
        "verdict",
        "pdev",
        "device",
    }
)
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _labels(
    ctx: click.Context | None, param: click.Parameter | None, value: tuple[str, ...]
) -> dict[str, str]:
    """Return the ``--label KEY=VALUE`` pairs as a dict; a malformed or reserved one is a usage error."""
    out: dict[str, str] = {}
    for item in value:
        key, sep, text = item.partition("=")
        if not sep or not _LABEL_NAME.fullmatch(key) or key.startswith("__"):
            raise click.BadParameter(
                f"{item!r}: expected KEY=VALUE with a Prometheus label name as KEY "
                "(letters, digits, _; not starting with a digit or __)"
            )
        if key in OWN_LABELS:
            raise click.BadParameter(
                f"{key!r} is a label of l0mem's own metrics: choose another name"
            )
        if key in out:
            raise click.BadParameter(f"{key!r} given twice")
        out[key] = os_text(text)  # a byte that is not UTF-8 as \xNN: every report carries it
    return out


label_option = click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_labels,
    help="A label for every metric --prometheus writes, such as --label workload=train-7 "
    "(repeatable; a scrape job's own 'job' label wins over one set here).",
)


def _plot_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and value.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter("the plot file must end in .png or .svg")
    return value


def plot_option(what: str) -> Callable[[_F], _F]:
    """Return ``--plot PATH``: a PNG or SVG of ``what``, its suffix checked before any work."""
    return click.option(
        "--plot",
        "plot_path",
        type=NamedPath(readable=False, path_type=Path),
        metavar="PATH",
        callback=_plot_path,
        help=f"Also plot {what} (.png or .svg; written atomically; needs the plot extra).",
    )


def check_plot(command: str, plot_path: Path | None) -> None:
    """Fail with the usage exit code when ``--plot`` is asked for without matplotlib installed."""
    if plot_path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail(command, ExitCode.USAGE, "--plot needs matplotlib: pip install 'l0mem[plot]'")


__all__ = [
    "OWN_LABELS",
    "answer_only_option",
    "check_plot",
    "command_name",
    "label_option",
    "plot_option",
    "prometheus_option",
    "verbose_option",
]
