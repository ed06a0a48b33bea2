"""The one type of every file and directory a command names: an empty name is a usage error.

``click.Path`` takes ``""`` as ``Path("")``, which is ``.``: a report
argument would read the current directory, a ``--json ""`` would say that
``.`` cannot be written. Neither is what the user meant; both are one
usage line (exit 2) naming the option, before any work.
"""

from __future__ import annotations

from typing import Any

import click


class NamedPath(click.Path):
    """``click.Path`` that refuses an empty name (it would stand for the current directory)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return the path ``value`` names; fail on an empty one."""
        if isinstance(value, str) and not value.strip():
            self.fail("an empty name names no file (give a path)", param, ctx)
        return super().convert(value, param, ctx)


__all__ = ["NamedPath"]
