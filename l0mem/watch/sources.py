"""What the watch reads: the process tree as a source of readings, and the errors of starting.

:class:`TreeSource` samples a process tree with the probe's
:class:`~l0mem.probe.TreeProber`; :class:`Source`, :class:`Tracer` and
:class:`DeviceMemoryReader` are what :class:`l0mem.watch.engine.Watch` asks of
its inputs, so that tests can hand it recorded ones. :class:`WatchError` and
its kinds are the one-line reasons a watch cannot start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import psutil


class Reading(Protocol):
    """What one sample of the tree gives: values, why signals are absent, the pids."""

    values: Mapping[str, int]
    unavailable: Mapping[str, str]
    pids: int


@dataclasses.dataclass(frozen=True)
class TreeReading:
    """One reading of a process tree (see :class:`Reading`)."""

    values: Mapping[str, int]
    unavailable: Mapping[str, str]
    pids: int
    pid_list: tuple[int, ...] = ()


class Source(Protocol):
    """Something that samples the watched tree: None once the whole tree is gone."""

    def sample(self) -> TreeReading | None:
        """Return the tree's signals now, or None when it is gone."""


class Tracer(Protocol):
    """The allocation tracer's session as the loop uses it."""

    def poll(self) -> Any:
        """Return the totals so far (with ``to_dict()``)."""


class DeviceMemoryReader(Protocol):
    """Device memory read beside the tree (Sysman's, from :class:`l0mem.watch.sysman.SysmanReader`)."""

    def wait_ready(self, timeout: float, stop: Callable[[], bool] | None = None) -> bool:
        """Wait up to ``timeout`` seconds (less where ``stop`` says so) for the reader to be able to answer; return whether it was settled."""

    def read(self) -> tuple[dict[str, int], str | None]:
        """Return this sample's values, or ({}, why they are absent)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Return the names of the devices read (empty where unknown)."""


class WatchError(Exception):
    """The watch cannot start: one line naming what is wrong."""


class NoSuchProcess(WatchError):
    """The pid to watch does not exist (or ended before the first sample)."""


class NotPermitted(WatchError):
    """The pid exists but its memory cannot be read (another user's process)."""


class CommandError(WatchError):
    """The command to run cannot be started; ``code`` is what a shell answers (126 or 127)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# Sysman counts device memory per process on the simulator and needs Level Zero
# loaded into l0mem itself on hardware; run and watch read the workload's DRM files.
_SYSMAN = "not read (--no-sysman)"


def no_process(pid: int) -> str:
    """Return why there is nothing to watch at ``pid``: no process, or one that exited unreaped."""
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return (
                f"process {pid} has exited (a zombie its parent has not reaped): nothing to watch"
            )
    except psutil.Error:
        pass
    return f"no process {pid}"


class TreeSource:
    """Samples the process tree of ``pid`` with the probe's :class:`~l0mem.probe.TreeProber`."""

    def __init__(self, pid: int, *, proc_root: str = "/proc", sys_root: str = "/sys") -> None:
        from l0mem.probe import ProbeAccessError, ProcessGone, TreeProber

        self._gone = ProcessGone
        try:
            self._prober = TreeProber(pid, proc_root=proc_root, sys_root=sys_root)
        except ProcessGone:
            raise NoSuchProcess(no_process(pid)) from None
        except ProbeAccessError as exc:
            raise NotPermitted(str(exc)) from None

    def adopt(self, pids: Iterable[int]) -> None:
        """Sample ``pids`` and their descendants too: the tree's processes reparented to l0mem."""
        self._prober.adopt(pids)

    def sample(self) -> TreeReading | None:
        """Return the tree's signals now, or None when the whole tree is gone."""
        try:
            s = self._prober.sample()
        except self._gone:
            return None
        gaps = dict(s.snapshot.unavailable)
        if "sysman" in gaps:
            gaps["sysman"] = _SYSMAN
        return TreeReading(s.snapshot.values, gaps, len(s.pids), tuple(s.pids))


__all__ = [
    "CommandError",
    "DeviceMemoryReader",
    "NoSuchProcess",
    "NotPermitted",
    "Reading",
    "Source",
    "Tracer",
    "TreeReading",
    "TreeSource",
    "WatchError",
    "no_process",
]
