"""``run`` and ``watch`` as loops over a :class:`~l0mem.watch.engine.Watch`.

:func:`run_workload` takes the baseline, starts the command and samples its
tree until the command ends, keeping the floor and forwarding a stop;
:func:`watch_pid` attaches to a running process and samples until it ends or
a stop comes. Both return a :class:`~l0mem.watch.engine.WatchResult`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

from l0mem.units import format_bytes
from l0mem.watch.engine import FloorStop, Outlived, Watch, WatchResult, available, baseline_values
from l0mem.watch.sources import NoSuchProcess, Source, TreeSource, WatchError, no_process
from l0mem.watch.workload import (
    controlling_terminal,
    follow_stop,
    job_stopped,
    orphans,
    own_children,
    pass_foreground,
    pidfd,
    process_state,
    reclaim_terminal,
    signal_tree,
    start,
    subreaper,
)

SourceFactory = Callable[[int], Source]


class FloorError(WatchError):
    """The host's available memory is already at or below the floor: nothing may start."""


def _system_unavailable(unavailable: Mapping[str, str]) -> dict[str, str]:
    """Return the reasons of a baseline snapshot that concern the host, not l0mem's own process."""
    own = ("proc", "drm", "sysman")
    return {k: v for k, v in unavailable.items() if k.partition(".")[0] not in own}


def take_baseline(watch: Watch, prober: Any = None) -> None:
    """Record the host's state before the workload starts as ``watch``'s baseline."""
    if prober is None:
        from l0mem.probe import Prober

        prober = Prober()
    snap = prober.snapshot()
    watch.set_baseline(baseline_values(snap.values), _system_unavailable(snap.unavailable))


# How long run follows processes of the workload that outlive its first one
# (keeping the floor for them) before it ends and names them as left running.
FOLLOW_AFTER_FIRST_S = 10.0


def check_floor(watch: Watch) -> None:
    """Raise FloorError when the baseline is already at or below the floor."""
    now = available(watch.series.baseline.values)
    if watch.floor and now is not None and now <= watch.floor:
        raise FloorError(
            f"available host memory {format_bytes(now)} is already at or below the floor "
            f"{format_bytes(watch.floor)}: give a lower --host-floor (0 turns it off)"
        )


def run_workload(
    watch: Watch,
    command: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    source_factory: SourceFactory = TreeSource,
    prober: Any = None,
    stdout: int | None = None,
    follow: float = FOLLOW_AFTER_FIRST_S,
    repeat: int = 1,
) -> WatchResult:
    """Start ``command`` and sample its tree until it ends; keep the floor, forward a stop.

    ``stdout``: the file descriptor the workload writes its standard output to
    (None: l0mem's). ``follow``: how many seconds the processes that outlive
    the first one are followed, the floor kept for them (``math.inf``: until
    every one of them ends). ``repeat``: how many times the command is run,
    one run after another into the same series, each a climb of its own;
    repeating stops after a run that did not succeed whole
    (:func:`_ran_whole`) or at a stop request.

    l0mem is a child subreaper meanwhile (:func:`~l0mem.watch.workload.subreaper`):
    a process of the workload whose parent ended before a sample saw it (``sh
    -c 'job &'``, a double fork) is reparented to l0mem and followed as the
    rest of the tree is; each is reaped when it ends. l0mem must start no
    process of its own meanwhile: any child it did not have before is taken
    for the workload's.
    """
    take_baseline(watch, prober)
    if watch.stopped():  # while the baseline waited (a driver hung in zeInit): start nothing
        return WatchResult(
            watch.series, None, None, watch.stop_signal, watch.final_trace(), None,
            watch.device_names(),
        )  # fmt: skip
    check_floor(watch)
    with subreaper():
        result = _run(watch, command, env, source_factory, stdout, follow)
        runs = 1
        # The floor is kept by each run's own reads (a run that starts too near it is
        # stopped at its first): the last reads before a run ended still hold its memory.
        while runs < repeat and _ran_whole(result) and not watch.stopped():
            result = _run(watch, command, env, source_factory, stdout, follow)
            runs += 1
    # One run, as asked: the report says nothing of repeats. A stop that came after
    # the last run ended is the watch's, not the workload's (as after a single run).
    return result if repeat == 1 else dataclasses.replace(result, runs=runs)


def _ran_whole(result: WatchResult) -> bool:
    """Return whether a run succeeded whole: exit 0, not stopped, nothing of it left running."""
    left = result.outlived is not None and bool(result.outlived.left_running)
    return (
        result.returncode == 0
        and result.floor_stop is None
        and result.stop_signal is None
        and not left
    )


def _adopt(source: Source | None, factory: SourceFactory, pids: Sequence[int]) -> Source | None:
    """Make ``source`` follow ``pids`` (the workload's orphans, now l0mem's children) too.

    Without a source yet (the first process ended before the first look), one is
    made for the first of them still there.
    """
    for pid in pids if source is None else ():
        try:
            source = factory(pid)
        except WatchError:
            continue  # ended meanwhile
        break
    adopt = getattr(source, "adopt", None)  # a recorded source (tests) has none
    if adopt is not None:
        adopt(pids)
    return source


def _run(
    watch: Watch,
    command: Sequence[str],
    env: Mapping[str, str] | None,
    source_factory: SourceFactory,
    stdout: int | None,
    follow: float,
) -> WatchResult:
    terminal = controlling_terminal()
    known = own_children()  # l0mem's own (Sysman's reader): not the workload's
    proc = start(command, env, terminal=terminal, stdout=stdout)
    known.add(proc.pid)
    fd = pidfd(proc.pid)
    floor_stop: FloorStop | None = None
    stopped_at: float | None = None  # when SIGTERM (or the user's signal) was sent
    killed = forwarded = False
    pids: tuple[int, ...] = (proc.pid,)
    first_ended: tuple[float, int] | None = None  # when the first process ended, and who ran on
    left_running: tuple[int, ...] = ()  # still running when l0mem stopped following them
    tree_gone = False
    try:
        try:
            source: Source | None = source_factory(proc.pid)
        except WatchError:
            source = None  # it ended before the first look
        # The workload is its whole tree: processes it started that outlive its first
        # one are followed (and the floor kept for them) until they end too.
        while not tree_gone:
            running = proc.poll() is None
            adopted = orphans(known)
            if adopted:
                source = _adopt(source, source_factory, adopted)
            if source is None:
                if not running:
                    break
            else:
                reading = watch.take(source)
                if reading is None:
                    tree_gone = True
                    if not running:
                        break
                elif reading.pid_list:
                    pids = reading.pid_list
                if not running and first_ended is None:
                    others = [p for p in pids if p != proc.pid]
                    if not others:
                        break
                    first_ended = (watch.clock(), len(others))
                    _close(fd)  # readable for good now: the loop waits on time alone
                    fd = None
            if watch.stop_signal is not None and not forwarded:
                signal_tree(proc.pid, pids, watch.stop_signal)
                signal_tree(proc.pid, pids, signal.SIGCONT)  # a stopped workload must see it too
                forwarded = True
                stopped_at = stopped_at if stopped_at is not None else watch.clock()
            if floor_stop is None and watch.floor_near():
                signal_tree(proc.pid, pids, signal.SIGTERM)
                stopped_at = watch.clock()
                last = watch.series.samples[-1]
                floor_stop = FloorStop(
                    last.t, available(last.values) or 0, watch.floor or 0, "SIGTERM", False
                )
            if running:
                pass_foreground(terminal, proc.pid)  # started in the background, then fg
            if terminal is not None and job_stopped(proc.pid, pids):
                follow_stop(terminal, proc.pid)  # Ctrl-Z: stop with the workload, as a shell job
            if first_ended is not None and _done_following(
                watch, first_ended[0], stopped_at, follow
            ):
                # Past the follow (or a stop's grace and more): the rest is named, not awaited.
                left_running = tuple(p for p in pids if p != proc.pid and _alive(p))
                break
            timeout = watch.next_interval()
            if stopped_at is not None:
                left = stopped_at + watch.grace - watch.clock()
                if left <= 0 and not killed:
                    signal_tree(proc.pid, pids, signal.SIGKILL)
                    killed = True
                timeout = min(timeout, max(left, 0.0)) if not killed else timeout
            watch.wait(timeout, fd)
    except BaseException:
        # l0mem itself failed: the workload must not run on unwatched.
        signal_tree(proc.pid, pids, signal.SIGTERM)
        reclaim_terminal(terminal, proc.pid)
        raise
    finally:
        _close(fd)
    returncode = proc.wait()
    orphans(known)  # reap those that ended since the last look; the rest run on unwatched
    reclaim_terminal(terminal, proc.pid)
    outlived = None
    if first_ended is not None:
        outlived = Outlived(first_ended[1], watch.clock() - first_ended[0], left_running)
    if floor_stop is not None and killed:
        floor_stop = FloorStop(
            floor_stop.t, floor_stop.available, floor_stop.floor, "SIGTERM", True
        )
    return WatchResult(
        watch.series, returncode, floor_stop, watch.stop_signal, watch.final_trace(), outlived,
        watch.device_names(),
    )  # fmt: skip


# After a stop, how long past the grace run still waits for what survived SIGKILL (a
# process stuck in the kernel, one of another user's) before naming it instead.
KILL_WAIT_S = 5.0


def _done_following(
    watch: Watch, first_ended: float, stopped_at: float | None, follow: float
) -> bool:
    """Return whether run stops following the processes that outlived the first one."""
    now = watch.clock()
    if stopped_at is None:
        return now - first_ended >= follow
    return now - stopped_at >= watch.grace + KILL_WAIT_S


def _alive(pid: int) -> bool:
    """Return whether ``pid`` still runs (not a zombie)."""
    state = process_state(pid)
    return state is not None and state[0] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def _close(fd: int | None) -> None:
    """Close a pidfd (None: there is none)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def watch_pid(
    watch: Watch,
    pid: int,
    *,
    duration: float | None = None,
    source_factory: SourceFactory = TreeSource,
) -> WatchResult:
    """Sample the tree of the running process ``pid`` until it ends, ``duration`` passes or a stop comes."""
    source = source_factory(pid)
    first = source.sample()
    if first is None:
        raise NoSuchProcess(no_process(pid))
    watch.set_baseline(first.values, first.unavailable)
    end = None if duration is None else watch.clock() + duration
    fd = pidfd(pid)
    try:
        while watch.stop_signal is None:
            if end is not None and watch.clock() >= end:
                break
            left = (
                watch.next_interval()
                if end is None
                else min(watch.next_interval(), end - watch.clock())
            )
            watch.wait(left, fd)
            if watch.stop_signal is not None:
                break
            if watch.take(source) is None or not psutil.pid_exists(pid):
                break
            if fd is not None and _ended(fd):
                break
    finally:
        _close(fd)
    return WatchResult(
        watch.series, None, None, watch.stop_signal, watch.final_trace(), None, watch.device_names()
    )


def _ended(fd: int) -> bool:
    """Return whether the process behind pidfd ``fd`` has ended."""
    import select

    ready, _, _ = select.select([fd], [], [], 0)
    return bool(ready)


__all__ = [
    "FloorError",
    "SourceFactory",
    "check_floor",
    "run_workload",
    "take_baseline",
    "watch_pid",
]
