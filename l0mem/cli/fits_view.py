"""The table of signal fits a verdict rests on, shared by ``audit`` and ``run``/``watch``.

One row per signal: its slope in MiB of host memory per GiB of device memory,
the interval, R^2 and whether it decided the verdict or why it was passed
over. Laid out by :func:`l0mem.cli.layout.fitted`, so at 80 columns a row
is stacked rather than a number or a signal name cut.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, RenderableType

from l0mem.cli._common import escape
from l0mem.cli.layout import fitted
from l0mem.estimate.model import SetupAnalysis
from l0mem.units import fixed

HEADERS = ("signal", "side", "MiB/GiB", "+/-", "R^2", "note")


def number(value: float | None, places: int = 0) -> str:
    """Return ``value`` with ``places`` decimals (never a signed zero), or ``-`` when there is none."""
    return "-" if value is None else fixed(value, places)


def fits_table(
    console: Console, title: str, analysis: SetupAnalysis, signals: Iterable[str] | None = None
) -> RenderableType | None:
    """Return the fits of ``signals`` (None: every host and device fit) as a table, or None if none.

    ``title`` is rich markup. Device fits always follow the host ones.
    """
    if signals is None:
        shown = list(analysis.host)
    else:
        # Each signal once, where the order first names it.
        shown = [f for name in dict.fromkeys(signals) if (f := analysis.fit(name)) is not None]
    shown += analysis.device
    if not shown:
        return None
    rows = []
    for fit in shown:
        if fit.signal == analysis.deciding_signal:
            note = "deciding"
        else:
            note = analysis.passed_over.get(fit.signal, "")
        rows.append(
            (
                escape(fit.signal),
                fit.side,
                number(fit.slope),
                number(fit.uncertainty),
                number(fit.r2, 3),
                escape(note),
            )
        )
    return fitted(console, title, HEADERS, rows, right=("MiB/GiB", "+/-", "R^2"))


__all__ = ["HEADERS", "fits_table", "number"]
