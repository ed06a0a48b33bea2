"""Waiting for work and closing on the SYCL backend, where an operation may have hung.

:class:`SyclLifetime` is the part of :class:`l0mem.backends.SyclBackend` that
waits for its in-order queues and, on close, frees every allocation and drops
the queues' pending references and the kernels' programs. dpctl cannot wait
with a bound, so once an operation hung no queue is waited on again. The
queues, contexts and operations stay in :mod:`l0mem.backends.sycl`.

What it may import: the backend's other modules (:mod:`.base`, :mod:`.common`,
:mod:`.staging`, :mod:`.sycl_buffers`) and :mod:`l0mem.keepalive`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from l0mem.backends.base import CopyTimeout
from l0mem.backends.common import one_at_a_time
from l0mem.backends.staging import Stager
from l0mem.backends.sycl_buffers import SyclBuffer, UsmHost
from l0mem.keepalive import KeepAlive


class SyclLifetime:
    """The synchronize-and-close half of :class:`l0mem.backends.SyclBackend`, a mixin over its queues."""

    if TYPE_CHECKING:
        _closed: bool
        _hung: set[int]
        _queues: list[Any]
        _pending: list[KeepAlive]
        _buffers: weakref.WeakSet[SyclBuffer]
        _host: weakref.WeakSet[UsmHost]
        _stager: Stager

        def _drop_kernels(self) -> None: ...
        def _index(self, device: int) -> int: ...

    @one_at_a_time
    def synchronize(self, device: int | None = None) -> None:
        """Wait until all work on ``device`` (default: every device) has finished."""
        targets = range(len(self._queues)) if device is None else [self._index(device)]
        for i in targets:
            # dpctl cannot wait with a bound: once an operation hung, work on any
            # queue may wait on it, so no queue is waited on again.
            if self._hung:
                raise CopyTimeout(f"device {i} may be behind a hung operation", i)
            self._queues[i].wait()
            self._pending[i].clear()

    @one_at_a_time
    def close(self) -> None:
        """Wait for outstanding work, free every allocation and drop queues and programs."""
        if self._closed:
            return
        try:
            for q in self._queues:
                # A queue behind a hung operation would never finish: none is waited
                # for once one hung (see synchronize).
                if not self._hung:
                    q.wait()
        finally:
            self._stager.close()
            for buf in list(self._buffers):
                buf.close()
            for host in list(self._host):
                host.close()
            for pending in self._pending:
                pending.clear()
            self._drop_kernels()
            self._closed = True
