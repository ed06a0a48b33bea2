"""Objects kept alive until the operation that uses them is known complete.

Runtimes run work asynchronously and do not keep what the work touches: a
host buffer a copy reads, a device allocation a kernel writes, an event slot
a pending command still waits on. :class:`KeepAlive` holds such objects as
pairs of (completion check, objects), drops a pair once its check reports the
operation complete (checked whenever a pair is added, or on :meth:`KeepAlive.prune`),
and drops everything on :meth:`KeepAlive.clear` once the caller knows all the
work finished (after synchronizing or closing). Both backends use it: the
SYCL backend per device queue for the memory and host buffers of each
enqueued operation, and the Level Zero backend's event recycler for the event
slots each pending command waits on.

``l0mem.core`` keeps the same promise in its simplest form and not with this
class: core may import only ``l0mem._ze`` (tests/test_layering.py), and there
the held items belong to one event (``Event.hold``), which is itself the
completion check, so a list dropped when that event is observed signalled or
reset is all it needs; the items are pinned host buffers that must be
unpinned on release, not only dropped. A core ``CommandList`` keeps its
buffers until it is reset or destroyed, since the list may run again: there
is no completion to check.

What it may import: nothing of l0mem.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable


class KeepAlive:
    """Pending operations, each a completion check and the objects it must keep alive."""

    def __init__(self) -> None:
        """Start with nothing held."""
        self._pending: list[tuple[Callable[[], bool], tuple[object, ...], Hashable]] = []
        # Reentrant: a garbage collection during a check may run a finalizer that adds.
        self._lock = threading.RLock()

    def add(
        self, done: Callable[[], bool], refs: Iterable[object], *, key: Hashable = None
    ) -> None:
        """Keep ``refs`` until ``done()`` is True; first drop every pair already complete.

        ``key`` names the operation for :meth:`forget` (None: only its check drops it).
        """
        with self._lock:
            self.prune()
            self._pending.append((done, tuple(refs), key))

    def prune(self) -> None:
        """Drop the pairs whose operations have completed."""
        with self._lock:
            self._pending = [p for p in self._pending if not p[0]()]

    def forget(self, key: Hashable) -> None:
        """Drop the pairs added with ``key``: the caller saw that operation complete."""
        with self._lock:
            self._pending = [p for p in self._pending if p[2] is None or p[2] != key]

    def clear(self) -> None:
        """Drop everything: the caller knows all the work has completed (synchronized, closed)."""
        with self._lock:
            self._pending = []

    def holds(self, obj: object) -> bool:
        """Return True while a pending operation keeps ``obj`` (by identity)."""
        with self._lock:
            return any(r is obj for _, refs, _ in self._pending for r in refs)

    def __len__(self) -> int:
        """Return how many operations are still held."""
        return len(self._pending)
