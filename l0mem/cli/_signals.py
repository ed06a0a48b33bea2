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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from l0mem.cli._common import signal_exit


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises KeyboardInterrupt; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_exit(signum)[1]}")
        self.signum = signum


@contextlib.contextmanager
def handling(
    signals: Iterable[int],
    handler: Callable[[int, Any], None],
    *,
    ignore_after: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Run ``handler`` on each of ``signals`` in the block; the previous handlers come back after.

    A signal the process inherited as ignored (``nohup``) stays ignored. Off the
    main thread (where Python allows no handler) the block runs with the old ones.
    When ``ignore_after()`` is true at the end, the signals are ignored from then
    on instead (a stopped command on its way out), with no moment in between.
    """
    old: dict[int, Any] = {}
    try:
        for number in signals:
            if signal.getsignal(number) is not signal.SIG_IGN:
                old[number] = signal.signal(number, handler)
    except ValueError:
        pass
    try:
        yield
    finally:
        ignore = ignore_after is not None and ignore_after()
        for number, previous in old.items():
            signal.signal(number, signal.SIG_IGN if ignore else previous)


def stop_signals_interrupt() -> contextlib.AbstractContextManager[None]:
    """Make SIGTERM and SIGHUP raise :class:`Interrupted` in the block, as Ctrl-C raises."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    return handling((signal.SIGTERM, signal.SIGHUP), handler)


__all__ = ["Interrupted", "handling", "stop_signals_interrupt"]
