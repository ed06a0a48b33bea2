"""Stop signals in the command line: SIGTERM and SIGHUP end a command as Ctrl-C does.

Python turns Ctrl-C (SIGINT) into KeyboardInterrupt; :func:`stop_signals_interrupt`
makes SIGTERM and SIGHUP raise :class:`Interrupted`, a KeyboardInterrupt that
carries the signal's number, so every block that frees device memory on Ctrl-C
(:func:`l0mem.cli._common.measuring`, the backends' own cleanup) does so on
those too, and the exit code is 128 + N (:func:`l0mem.cli._common.signal_exit`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from l0mem.cli._common import signal_exit


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises KeyboardInterrupt; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_exit(signum)[1]}")
        self.signum = signum


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Make SIGTERM and SIGHUP raise :class:`Interrupted` in the block, as Ctrl-C raises.

    A signal the process inherited as ignored (``nohup``) stays ignored. The
    previous handlers come back afterwards.
    """

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    old: dict[int, Any] = {}
    try:
        for stop in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(stop) is not signal.SIG_IGN:
                old[stop] = signal.signal(stop, handler)
    except ValueError:  # not the main thread: leave the handlers alone
        pass
    try:
        yield
    finally:
        for number, previous in old.items():
            signal.signal(number, previous)


__all__ = ["Interrupted", "stop_signals_interrupt"]
