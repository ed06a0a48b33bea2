"""Waiting for work and closing on the Level Zero backend, where an operation may have hung.

:class:`L0Lifetime` is the part of :class:`l0mem.backends.LevelZeroBackend`
that synchronizes its immediate command lists and releases its lists,
modules, events, staging ring and contexts. Once an operation hung, no wait
is unbounded: a device stuck behind the hung operation (the backend's
:class:`.l0_events.WaitGraph`) is given up at once, any other waits at most
the watchdog's bound. Opening the contexts and the operations stay in
:mod:`l0mem.backends.levelzero`.

What it may import: :mod:`l0mem.core`; the backend's other modules
(:mod:`.base`, :mod:`.common`, :mod:`.l0_events`, :mod:`.staging`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from l0mem.backends.base import CopyTimeout, cleanup
from l0mem.backends.common import Gate, one_at_a_time
from l0mem.backends.l0_events import Recycler, WaitGraph
from l0mem.backends.staging import Stager
from l0mem.core import Context, Device, ImmediateCommandList, ReleaseWarning


class L0Lifetime:
    """The synchronize-and-close half of :class:`l0mem.backends.LevelZeroBackend`, a mixin over its lists."""

    if TYPE_CHECKING:
        gate: Gate
        _closed: bool
        _devices: list[Device]
        _contexts: list[Context]
        _lists: list[ImmediateCommandList]
        _recyclers: list[Recycler]
        _stager: Stager
        _hung: set[int]
        _hang_wait: float
        _graph: WaitGraph
        _stuck: dict[int, int]

        def _index(self, device: int) -> int: ...
        def _drop_kernels(self) -> None: ...

    @one_at_a_time
    def synchronize(self, device: int | None = None) -> None:
        """Wait until all work on ``device`` (default: every device) has finished."""
        targets = range(len(self._lists)) if device is None else [self._index(device)]
        for i in targets:
            if (j := self._behind_hang(i)) is not None:
                raise CopyTimeout(f"device {i} is stuck behind a hung operation (via device {j})", i)
            if i in self._hung:
                raise CopyTimeout(f"device {i} has a hung operation", i)
            if not self._lists[i].synchronize(self._sync_bound()):
                self._hung.add(i)
                raise CopyTimeout(f"device {i} did not finish (behind a hung operation)", i)
            self._graph.synced(i)
        for recycler in self._recyclers:
            recycler.sweep()

    def _behind_hang(self, device: int) -> int | None:
        """Return the device ``device`` waits for if it is stuck behind a hung operation, else None.

        Its work would never finish: waiting the watchdog's bound for it only
        delays the report, once per device behind the hang. Every stuck device
        found stays so (``_stuck``: device -> the device it waits for).
        """
        if self._hung and device not in self._stuck:
            self._stuck.update(self._graph.stuck(self._hung))
        return self._stuck.get(device)

    def _sync_bound(self) -> int | None:
        """Return how long a synchronize may wait (ns): unbounded, unless an operation hung.

        Work queued on one device can wait on a hung copy of another, so once
        one operation hung, every wait has the watchdog's base as its bound.
        """
        return int(self._hang_wait * 1e9) if self._hung else None

    @one_at_a_time
    def close(self) -> None:
        """Finish outstanding work; release every list, module, event, allocation, then contexts."""
        if self._closed:
            return
        self._closed = True
        try:
            for i, cl in enumerate(self._lists):
                # A device behind a hung operation would never finish: not waited for.
                if i in self._hung or self._behind_hang(i) is not None:
                    continue
                if not cl.synchronize(self._sync_bound()):
                    self._hung.add(i)
        except BaseException as err:
            cleanup([self._release], strict=False, after=err)
            raise
        # Another thread's wait on an event: its work is done now, unless it hung.
        if not self.gate.shut(self._hang_wait if self._hung else None):
            warnings.warn(
                "the Level Zero backend's contexts are left to the process's end: another "
                "thread still waits on an event of work that hung",
                ReleaseWarning,
                stacklevel=2,
            )
            return
        self._release()

    def _release(self) -> None:
        self._drop_kernels()
        self._lists = []
        self._graph = WaitGraph(len(self._devices))
        first: BaseException | None = None
        try:
            self._stager.close()  # pinned memory before the contexts it lives in
        except Exception as err:
            first = err
        for ctx in self._contexts:
            try:
                ctx.close()
            except Exception as err:
                first = first or err
        self._contexts = []
        if first is not None:
            raise first

