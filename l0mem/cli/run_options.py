"""The options ``l0mem run`` and ``l0mem watch`` share, and the bounds of their intervals.

Both commands sample the same way and write the same files, so they take the
same ``--interval``, outputs, Sysman and ``--fail-on-mirror`` options; each
adds its own (``run`` its floor, grace, follow and trace, ``watch`` the
process and a duration). The options every command shares are
:mod:`._options`'.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from l0mem.cli._numbers import FloatRange
from l0mem.cli._options import (
    answer_only_option,
    finite,
    json_option,
    label_option,
    plot_option,
    prometheus_option,
    verbose_option,
)
from l0mem.cli._paths import NamedPath
from l0mem.watch import DEFAULT_INTERVAL

_F = TypeVar("_F", bound=Callable[..., Any])
MAX_INTERVAL = 3600.0
MIN_INTERVAL = 0.02


# --interval's help: only run keeps a floor, and watch must not name an option it rejects.
_INTERVAL_HELP = {
    "run": "Time between samples (shorter as the host nears --host-floor).",
    "watch": "Time between samples.",
}


def shared_options(func: _F) -> _F:
    """Add the options ``run`` and ``watch`` share."""
    for option in reversed(
        (
            click.option(
                "--interval",
                type=FloatRange(MIN_INTERVAL, MAX_INTERVAL),
                callback=finite,
                default=DEFAULT_INTERVAL,
                show_default=True,
                metavar="SECONDS",
                help=_INTERVAL_HELP[func.__name__],
            ),
            # -q: the answer alone, as in every command (no live view, no line per sample,
            # no summary's tables); -qq, its old spelling, is the same.
            answer_only_option,
            verbose_option("every signal's fit in the summary, not only the deciding one"),
            json_option,
            click.option(
                "--csv",
                "csv_path",
                type=NamedPath(readable=False, allow_dash=True, path_type=Path),
                metavar="PATH",
                help="Also write the time series as CSV (one row per sample, one column per signal).",
            ),
            plot_option(
                "host and device memory over time, and host against device with the fit and "
                "the 1:1 and 0 references"
            ),
            prometheus_option,
            label_option,
            click.option(
                "--no-sysman",
                is_flag=True,
                help="Do not read Sysman's device memory (a child process that loads the "
                "Level Zero driver with the workload's settings and reads zesMemoryGetState).",
            ),
            click.option(
                "--fail-on-mirror",
                is_flag=True,
                help="Exit 1 when the verdict is mirror (run: if the workload itself succeeded).",
            ),
        )
    ):
        func = option(func)
    return func


__all__ = ["MAX_INTERVAL", "MIN_INTERVAL", "shared_options"]
