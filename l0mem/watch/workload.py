"""The workload's process: started in its own group, given the terminal, signalled as a tree.

``run`` starts the command as a shell starts a job: in a process group of its
own (a stop reaches every process it started and none of l0mem's), in the
terminal's foreground when l0mem has it, and its end is seen through a pidfd.
While it runs l0mem is a child subreaper (Linux, :func:`subreaper`): a process
of the workload whose parent ended (``sh -c 'job &'``, a daemon's double fork)
is reparented to l0mem, not to init, so it stays in the watched tree
(:func:`orphans`) and l0mem reaps it when it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from l0mem.probe.pids import child_lister, has_children_files
from l0mem.text import excerpt
from l0mem.watch.sources import CommandError


def pidfd(pid: int) -> int | None:
    """Return a descriptor that becomes readable when ``pid`` ends (Linux 5.3+), or None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def controlling_terminal() -> int | None:
    """Return standard input's descriptor when it is l0mem's controlling terminal (foreground or not), else None."""
    try:
        if os.isatty(0):
            os.tcgetpgrp(0)  # ENOTTY unless it is this session's terminal
            return 0
    except OSError:
        pass
    return None


def has_foreground(fd: int, pgid: int) -> bool:
    """Return whether process group ``pgid`` is the terminal's foreground group."""
    try:
        return os.tcgetpgrp(fd) == pgid
    except OSError:
        return False


def _set_foreground(fd: int, pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground group, from any group (SIGTTOU held off)."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgid)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def pass_foreground(fd: int | None, pgid: int) -> None:
    """Hand the terminal to the workload's group where l0mem's group has it (after the shell's ``fg``)."""
    if fd is not None and has_foreground(fd, os.getpgrp()):
        with contextlib.suppress(OSError):
            _set_foreground(fd, pgid)


def reclaim_terminal(fd: int | None, pgid: int) -> None:
    """Take the terminal back for l0mem's own group where the workload's group has it.

    Where another group has it (l0mem runs in the background: the shell's),
    it stays theirs.
    """
    if fd is not None and has_foreground(fd, pgid):
        with contextlib.suppress(OSError):
            _set_foreground(fd, os.getpgrp())


def start(
    command: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    terminal: int | None = None,
    stdout: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group with l0mem's stdin, stdout and stderr.

    With ``terminal`` (see :func:`controlling_terminal`), where l0mem's group
    has its foreground, the workload's group gets it, as a shell gives it to a
    job: it can read the terminal (a background group reading it is stopped by
    SIGTTIN) and Ctrl-C reaches it; l0mem keeps watching from the background.
    Where l0mem itself runs in the background, the workload starts there too
    and gets the terminal when the shell brings l0mem to the foreground
    (:func:`pass_foreground`). ``stdout`` (a file
    descriptor) replaces l0mem's standard output for the workload: where l0mem
    writes a report there, the workload's lines go to standard error.
    """
    group: dict[str, Any]
    if terminal is not None and has_foreground(terminal, os.getpgrp()):

        def foreground() -> None:
            os.setpgrp()
            _set_foreground(terminal, os.getpgrp())

        group = {"preexec_fn": foreground}
    elif sys.version_info >= (3, 11):
        group = {"process_group": 0}
    else:
        group = {"preexec_fn": os.setpgrp}
    try:
        return subprocess.Popen(
            list(command), env=None if env is None else dict(env), stdout=stdout, **group
        )
    except OSError as exc:
        raise _cannot_start(command[0], exc) from None


def _cannot_start(name: str, exc: OSError) -> CommandError:
    """Return why ``name`` could not start, as a shell would say it, with its exit code."""
    shown = excerpt(name, 200)
    path = Path(name)
    if "/" not in name and shutil.which(name) is None:
        # execvp also finds directories and unreadable files on PATH, which a shell skips.
        return CommandError(f"{shown}: command not found", 127)
    if isinstance(exc, FileNotFoundError) and path.is_file():
        interpreter = _interpreter(path)
        missing = (
            f" (its interpreter {excerpt(interpreter, 200)} is not there)" if interpreter else ""
        )
        return CommandError(f"{shown}: cannot execute: a file it needs is not found{missing}", 127)
    if isinstance(exc, FileNotFoundError):
        return CommandError(f"{shown}: command not found", 127)
    if path.is_dir():
        return CommandError(f"{shown}: is a directory", 126)
    if isinstance(exc, PermissionError):
        return CommandError(f"{shown}: permission denied (not executable)", 126)
    return CommandError(f"{shown}: cannot execute ({exc.strerror or exc})", 126)


def _interpreter(path: Path) -> str | None:
    """Return the interpreter a script's first line names (``#!``), or None."""
    try:
        with path.open("rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].split()
    return words[0].decode(errors="replace") if words else None


def stopped(pid: int) -> bool:
    """Return whether child ``pid`` was stopped (Ctrl-Z, SIGSTOP) since the last call.

    Only stops are consumed (``waitid`` with ``WSTOPPED``): the exit status
    stays for :class:`subprocess.Popen` to collect.
    """
    try:
        info = os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG)
    except ChildProcessError:
        return False
    return info is not None and info.si_code == os.CLD_STOPPED


def process_state(pid: int) -> tuple[str, int] | None:
    """Return (psutil status, process group) of ``pid``, or None when it is gone."""
    try:
        return psutil.Process(pid).status(), os.getpgid(pid)
    except (psutil.Error, OSError):
        return None


def job_stopped(pgid: int, pids: Sequence[int]) -> bool:
    """Return whether the workload's group was stopped from the terminal (Ctrl-Z) since the last call.

    Its first process stopped (:func:`stopped`); or, where that process waits
    for a child it spawned with ``vfork`` (state D, as a shell starting a
    command does), a process of its group stopped before ``exec``: the
    first process then waits for ever and never reports a stop of its own.
    """
    if stopped(pgid):
        return True
    first = process_state(pgid)
    if first is None or first[0] != psutil.STATUS_DISK_SLEEP:
        return False
    stopped_in_group = (psutil.STATUS_STOPPED, pgid)
    return any(process_state(p) == stopped_in_group for p in pids if p != pgid)


def follow_stop(terminal: int, pgid: int) -> None:
    """Stop with the workload's group as a shell job stops (Ctrl-Z), and resume it when continued.

    l0mem takes the terminal back and stops its own process group, so that
    the shell that started it sees the job stopped and takes the terminal.
    When the shell continues it (``fg``: l0mem has the terminal again, and
    hands it to the workload; ``bg``: it has not), the workload's group is
    continued too. Without a shell above to stop to (l0mem leads its own
    session), the stop is discarded by the kernel and the workload goes on.
    """
    # Only from the workload: in the background (after bg) the terminal is the shell's.
    reclaim_terminal(terminal, pgid)
    with contextlib.suppress(OSError):
        os.killpg(os.getpgrp(), signal.SIGTSTP)
    # Here once continued, or at once where the stop was discarded.
    pass_foreground(terminal, pgid)
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGCONT)


# prctl(2) options: whether orphaned descendants are reparented to this process, not init.
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _prctl() -> Any | None:
    """Return libc's ``prctl`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def subreaper() -> Iterator[bool]:
    """Make this process a child subreaper in the block; yield whether it is one.

    A descendant whose parent ends is then reparented to this process (the
    nearest living subreaper above it) instead of init, and stays a child of
    it: the workload's tree keeps it. Off Linux, or where prctl refuses, this
    is a no-op that yields False. The setting this process had comes back
    after (an in-process caller, a test runner, is left as it was); processes
    adopted by then stay its children.
    """
    prctl = _prctl()
    was = ctypes.c_int(0)
    if prctl is None or prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
        yield False
        return
    if was.value:
        yield True
        return
    made = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield made
    finally:
        if made:
            prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def own_children() -> set[int]:
    """Return the pids of this process's children (every thread's), as listed now."""
    me = os.getpid()
    try:
        return set(child_lister("/proc", has_children_files(me))(me))
    except OSError:
        return set()


def orphans(known: Collection[int]) -> list[int]:
    """Return this process's running children not in ``known``; reap those that ended.

    Under :func:`subreaper`, children l0mem did not start (``known``: those it
    had before the workload, and the workload's first process) are processes
    of the workload reparented to it when their parent ended. Each is waited
    for by its pid (never ``waitpid(-1)``, which would take another child's
    status): one that ended is reaped here, so none is left a zombie.
    """
    running = []
    for pid in sorted(own_children() - set(known)):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped already, or not a child after all
        if not done:
            running.append(pid)
    return running


def signal_tree(pgid: int, pids: Sequence[int], signum: int) -> None:
    """Send ``signum`` to the workload's process group and to every process of its tree."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signum)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "controlling_terminal",
    "follow_stop",
    "has_foreground",
    "job_stopped",
    "orphans",
    "own_children",
    "pass_foreground",
    "pidfd",
    "process_state",
    "reclaim_terminal",
    "signal_tree",
    "start",
    "stopped",
    "subreaper",
]
