"""The ``l0mem`` console script: a stop while the command line itself loads is a stop like any other.

Importing the command line takes tens of milliseconds; a Ctrl-C in them would
end l0mem with a Python traceback. Here it ends it as a stop during a command
does: one line naming the signal, exit 128 + N.

What it may import: :mod:`l0mem.cli`, and nothing before its import is guarded.
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    """Import and run the l0mem command line."""
    try:
        from l0mem.cli import as_console_script
        from l0mem.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("l0mem: interrupted by SIGINT\n")
        raise SystemExit(128 + signal.SIGINT) from None
    as_console_script()
    cli_main()
