"""Stop signals in the command line: SIGTERM and SIGHUP end a command as Ctrl-C does.

Python turns Ctrl-C (SIGINT) into KeyboardInterrupt; :func:`stop_signals_interrupt`
makes SIGTERM and SIGHUP raise :class:`Interrupted`, a KeyboardInterrupt that
carries the signal's number, so every block that frees device memory on Ctrl-C
(:func:`l0mem.cli._common.measuring`, the backends' own cleanup) does so on
those too, and the exit code is 128 + N (:func:`l0mem.cli._common.signal_exit`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from l0mem.cli._common import STOP_SIGNALS, error, interrupt_signal, signal_exit

_T = TypeVar("_T")
# How long a stopped command may take to free its device memory and keep what it measured,
# before l0mem takes the driver to be hung in a call and ends without it.
UNWIND_S = 10.0


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


def _stopping() -> bool:
    """Return whether the exception under way ends the command on a stop signal."""
    exc = sys.exc_info()[1]
    if isinstance(exc, KeyboardInterrupt):
        return True
    return isinstance(exc, SystemExit) and exc.code in {128 + int(s) for s in STOP_SIGNALS}


@contextlib.contextmanager
def stop_signals_interrupt(*, ignore_late: bool = False) -> Iterator[None]:
    """Make SIGTERM and SIGHUP raise :class:`Interrupted` in the block, as Ctrl-C raises.

    With ``ignore_late`` (the console script, which exits next), a block that
    ends on a stop leaves every stop signal ignored: a second one coming as
    l0mem exits would otherwise end it by the signal's default action, with
    that signal's exit code where the line and the report name the first.
    """

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    late = _stopping if ignore_late else None
    with handling((signal.SIGTERM, signal.SIGHUP), handler, ignore_after=late):
        try:
            yield
        finally:
            if ignore_late and _stopping():
                with contextlib.suppress(ValueError):  # off the main thread: no handler to set
                    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _forwarded(signum: int) -> type[BaseException]:
    """Return the exception type a stop raises in the worker (an async exception takes no arguments)."""
    if signum == signal.SIGINT:
        return KeyboardInterrupt

    def init(self: Interrupted) -> None:
        Interrupted.__init__(self, signum)

    return type(f"Interrupted{signum}", (Interrupted,), {"__init__": init})


def in_worker(body: Callable[[], _T], command: Callable[[], str]) -> _T:
    """Run ``body`` in a worker thread, so that a driver call that never returns cannot block a stop.

    A thread in a ctypes call runs no Python until the call returns, and
    Python runs signal handlers only in the main thread: a command that
    calls the driver on the main thread cannot be stopped while the driver
    hangs. Here the main thread only waits; a stop signal is raised in the
    worker as it would have been in the main thread (the command frees its
    device memory and keeps what it measured), and where the worker does not
    end within :data:`UNWIND_S` (stuck in the driver) or a second stop comes,
    l0mem ends at once with the signal's code and one line; the kernel frees
    the device memory with the process. ``command`` names the command for that
    line (asked then: the subcommand is resolved in the worker).
    """
    outcome: list[Any] = []
    # An Event, not Thread.join: a join a signal interrupts can leave the thread
    # looking ended while it still runs (CPython before 3.12).
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, body()))
        except BaseException as exc:  # handed to the main thread as it is
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(target=run, name="l0mem command", daemon=True)
    worker.start()
    stop: KeyboardInterrupt | None = None
    deadline = float("inf")
    # ``outcome`` too: a stop raised in the worker as it ends may land before ``done`` is set.
    while not done.is_set() and not outcome:
        try:
            done.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
        except KeyboardInterrupt as exc:
            if stop is not None:
                break  # a second stop: end now
            stop, deadline = exc, time.monotonic() + UNWIND_S
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(worker.ident or 0),
                ctypes.py_object(_forwarded(interrupt_signal(exc))),
            )
            continue
        if stop is not None and time.monotonic() >= deadline:
            break
    if outcome:
        ok, value = outcome[0]
        if ok:
            return value
        raise value
    assert stop is not None
    code, name = signal_exit(interrupt_signal(stop))
    error(
        command(),
        f"interrupted by {name}: the driver was still in a call {UNWIND_S:g} s after the stop; "
        "ending without it, so no report was written (the kernel frees the device memory "
        "with the process)",
    )
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


__all__ = ["UNWIND_S", "Interrupted", "handling", "in_worker", "stop_signals_interrupt"]
