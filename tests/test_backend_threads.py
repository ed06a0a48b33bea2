"""The Level Zero backend closed, or a buffer closed, while another thread is inside a call (simulator).

The contract tests (``tests/contracts/test_threads.py``) hold every backend
to the same promise with threads at random; these stop one thread inside a
driver call and check, at that moment, that the close waits.
"""

from __future__ import annotations

import threading
import warnings

import pytest

from l0mem.backends.l0_events import L0Event
from l0mem.backends.levelzero import LevelZeroBackend
from l0mem.core import _raw
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean
backend3 = core_fixtures.backend3
N = 1 << 14


def test_close_waits_for_an_event_wait_in_another_thread(
    backend3: LevelZeroBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close from one thread destroys no event another thread is waiting on."""
    backend = backend3
    buf = backend.allocate(0, N)
    ev = backend.fill(buf, b"\7")
    assert isinstance(ev, L0Event)
    inside, go = threading.Event(), threading.Event()
    real = type(ev.core).wait

    def held(self: object, timeout_ns: int | None = None) -> bool:
        if self is ev.core:
            inside.set()
            assert go.wait(30)
        return bool(real(self, timeout_ns))  # type: ignore[arg-type]

    monkeypatch.setattr(type(ev.core), "wait", held)
    waiter = threading.Thread(target=ev.wait)
    waiter.start()
    assert inside.wait(10)
    closer = threading.Thread(target=backend.close)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        closer.start()
        closer.join(0.3)
        assert closer.is_alive() and not ev.core.closed  # the event outlives the wait
        go.set()
        waiter.join(10)
        closer.join(10)
    assert not closer.is_alive() and backend.closed and ev.core.closed
    ev.wait()  # a wait after the close returns at once: its work finished


def test_buffer_close_waits_for_an_operation_in_another_thread(
    backend3: LevelZeroBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a buffer frees nothing under another thread's operation on it."""
    backend = backend3
    buf = backend.allocate(0, N)
    inside, go = threading.Event(), threading.Event()
    real = _raw.call

    def slow(function: object, *args: object) -> None:
        if getattr(function, "__name__", "") == "zeCommandListAppendMemoryFill":
            inside.set()
            assert go.wait(30)
        real(function, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_raw, "call", slow)
    filler = threading.Thread(target=lambda: backend.fill(buf, b"\1").wait())
    filler.start()
    assert inside.wait(10)
    closer = threading.Thread(target=buf.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive() and not buf.closed  # the memory outlives the fill
    go.set()
    filler.join(10)
    closer.join(10)
    assert not closer.is_alive() and buf.closed
