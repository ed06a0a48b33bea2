"""The ``l0mem`` command line (click + rich), built on the public API only."""

from __future__ import annotations

import click

from l0mem import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="l0mem")
def cli() -> None:
    """Measure host-memory mirroring of Intel GPU allocations (Level Zero and SYCL)."""


def main() -> None:
    """Run the l0mem command line."""
    cli(prog_name="l0mem")


__all__ = ["cli", "main"]
