"""A command that calls the driver in this process runs in a child, so a driver that crashes takes only that.

The ``zeInit`` guard (:mod:`l0mem._ze.guard`) tries ``zeInit`` in a child
first; every later call (an allocation, a copy, a launch) runs in l0mem's
own process, and a driver that aborts or faults there would end it before
it could say a word. So the console script forks before such a command
runs: the child runs it, the parent only waits. A child ended by a signal
other than a stop (SIGABRT, SIGSEGV, SIGBUS, ...) gets the one line and
exit 6 the exit table promises; SIGKILL (the kernel's OOM killer, or
``kill -9``) gets a line and 137; any other end is passed on as it is.

Stop signals sent to the parent alone (``kill``, ``timeout``, a service
manager) are passed on to the child; Ctrl-C from the terminal reaches the
child itself, being in the same process group, and is not sent twice (a
second stop ends a command at once). A closed terminal's SIGHUP goes to
the session's leader alone: where l0mem leads its session (a window or
``ssh -t`` running it as its command), the parent passes it on. The child
stops as on SIGTERM when the parent dies. In-process callers (the tests'
``CliRunner``, ``l0mem.cli.main`` imported) never fork: only the console
script asks for it (:func:`l0mem.cli.as_console_script`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable

from l0mem.cli._exits import STOP_SIGNALS, ExitCode, signal_exit

# si_code of a signal the kernel sent (a terminal's Ctrl-C, a hang-up), not a process.
_SI_KERNEL = 0x80
_PR_SET_PDEATHSIG = 1
_WAIT_S = 0.1


def _flush() -> None:
    """Flush what this process wrote (a closed stream is None or refuses: nothing to flush)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()


def _parent_death_signal() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _end(status: int, command: str) -> int:
    """Return the exit code for the child's wait ``status``, after its line where it had none."""
    from l0mem.cli._common import error

    if not os.WIFSIGNALED(status):
        return os.waitstatus_to_exitcode(status)
    signum = os.WTERMSIG(status)
    code, name = signal_exit(signum)
    if signum in STOP_SIGNALS:
        return code
    if signum == signal.SIGKILL:
        error(
            command, "l0mem's process was killed by SIGKILL (the kernel's OOM killer, or kill -9)"
        )
        return code
    error(
        command,
        f"the driver or runtime crashed l0mem's process inside a call ({name}); nothing after "
        "that call was measured (the kernel freed its device memory)",
    )
    return int(ExitCode.DRIVER_ERROR)


def supervised(command: Callable[[], str], console_script: bool) -> None:
    """Return in a child that runs the command; in the parent, wait for it and exit with its code.

    Does nothing unless ``console_script`` (the process exits after the
    command) and the platform can fork and wait for signals. ``command``
    names the command for the parent's line.
    """
    if not (console_script and hasattr(os, "fork") and hasattr(signal, "sigtimedwait")):
        return
    stops = set(STOP_SIGNALS)
    _flush()
    parent = os.getpid()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        _parent_death_signal()
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGTERM)
        return
    # A closed terminal's SIGHUP goes to the session leader alone: where that is this
    # process, the child would never get it (the foreground group's Ctrl-C it does).
    leader = os.getsid(0) == parent
    while True:
        try:
            got = signal.sigtimedwait(stops, _WAIT_S)
        except InterruptedError:
            got = None
        # After a stop and continue the wait can return a siginfo of no signal asked for
        # (si_signo 0, a stray si_code): only a stop signal is ever passed on.
        if (
            got is not None
            and got.si_signo in stops
            and (got.si_code != _SI_KERNEL or (leader and got.si_signo == signal.SIGHUP))
        ):
            with contextlib.suppress(OSError):
                os.kill(pid, got.si_signo)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            break
    code = _end(status, command())
    _flush()
    os._exit(code)


__all__ = ["supervised"]
