"""Contract: events, closing buffers and backends, and buffers that belong to someone else.

What closing promises: ``close()`` finishes outstanding work and frees every
allocation, and may be called again; ``closed`` turns True; every later call
that names a device or a buffer raises ValueError saying so ("... closed"),
while ``device_count()``, ``simulated``, ``synchronize()`` and ``close()``
still answer; events of the closed backend have finished (``wait()`` returns).
Calls that ask the backend itself raise :class:`l0mem.backends.BackendClosedError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from l0mem.backends import Backend, BackendClosedError, DeviceBuffer, Event
from tests.contracts import cases
from tests.contracts.cases import Case
from tests.contracts.helpers import random_bytes, read

CLOSED = re.compile(r"\bclosed\b")
ASKS_THE_BACKEND = {
    "device_name",
    "memory",
    "peer_access",
    "same_context",
    "copy_route",
    "allocate",
    "synchronize(0)",
    "launch",
}


def _check_elapsed(ev: Event) -> None:
    ns = ev.elapsed_ns()
    assert ns is None or (type(ns) is int and ns >= 0), repr(ns)


def _every_operation(backend: Backend, buf: DeviceBuffer) -> list[Event]:
    n = buf.nbytes
    return [
        backend.upload(buf, random_bytes(n, seed=1)),
        backend.download(buf, bytearray(n)),
        backend.fill(buf, b"\1\2"),
        backend.copy(buf.view(0, n // 2), buf.view(n // 2, n // 2)),
        backend.launch("l0mem_f32_add", buf.device, [buf, buf, n // 4], n // 4),
    ]


def test_events_wait_twice_and_time_themselves(backend: Backend) -> None:
    for dev in range(backend.device_count()):
        buf = backend.allocate(dev, 1 << 16)
        for ev in _every_operation(backend, buf):
            assert isinstance(ev, Event)
            ev.wait()
            ev.wait()
            _check_elapsed(ev)
            _check_elapsed(ev)
        # Unwaited events of finished work are fine too.
        events = _every_operation(backend, buf)
        backend.synchronize(dev)
        for ev in events:
            _check_elapsed(ev)


def test_buffer_close(case: Case, backend: Backend) -> None:
    buf = backend.allocate(0, 1 << 20)
    keep = backend.allocate(0, 64)  # an unrelated buffer stays usable
    view = buf.view(16, 64)
    backend.upload(buf, b"0123456789abcdef" * 8).wait()
    view.close()  # a view never frees
    assert read(backend, view, 16) == b"0123456789abcdef"
    buf.close()
    buf.close()  # idempotent
    view.close()
    calls: list[Callable[[], object]] = [
        lambda: buf.address,
        lambda: view.address,
        lambda: buf.view(0, 1),
        lambda: backend.upload(buf, b"x"),
        lambda: backend.download(view, bytearray(1)),
        lambda: backend.fill(buf, b"\0"),
        lambda: backend.copy(keep, buf, 64),
        lambda: backend.copy(view, keep),
        lambda: backend.launch("l0mem_f32_add", 0, [buf, keep, 16], 16),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(ValueError, match=CLOSED):
            call()
            pytest.fail(f"call {i} on a closed buffer did not raise")
    backend.upload(keep, b"still here").wait()
    assert read(backend, keep, 10) == b"still here"


def test_close_frees_memory(case: Case, backend: Backend) -> None:
    live = cases.memory_witness(case, backend)
    if live is None:
        pytest.skip(f"no witness of allocated memory for {case.id}")
    n = backend.device_count()
    bufs = [backend.allocate(d, 1 << 20) for d in range(n)]
    addresses = [b.address for b in bufs]
    assert all(live(d, addresses[d]) for d in range(n))
    bufs[0].close()
    assert not live(0, addresses[0]), "buffer close() frees"
    assert all(live(d, addresses[d]) for d in range(1, n))
    backend.close()
    assert not any(live(d, addresses[d]) for d in range(n)), "backend close() frees the rest"


def test_close(case: Case, backend: Backend) -> None:
    count = backend.device_count()
    buf = backend.allocate(0, 1 << 16)
    other = backend.allocate(count - 1, 1 << 16)
    pending = _every_operation(backend, buf)
    assert backend.closed is False
    backend.close()
    assert backend.closed is True
    backend.close()  # idempotent
    assert backend.closed is True
    for ev in pending:  # close() finished the work: its events have completed
        ev.wait()
        _check_elapsed(ev)
    # What still answers.
    assert backend.device_count() == count
    assert backend.simulated is case.simulated
    backend.synchronize()
    buf.close()
    other.close()
    # What refuses.
    calls: list[tuple[str, Callable[[], object]]] = [
        ("device_name", lambda: backend.device_name(0)),
        ("memory", lambda: backend.memory(0)),
        ("peer_access", lambda: backend.peer_access(0, 0)),
        ("same_context", lambda: backend.same_context(0, 0)),
        ("copy_route", lambda: backend.copy_route(0, 0)),
        ("allocate", lambda: backend.allocate(0, 64)),
        ("synchronize(0)", lambda: backend.synchronize(0)),
        ("upload", lambda: backend.upload(buf, b"x")),
        ("download", lambda: backend.download(buf, bytearray(1))),
        ("fill", lambda: backend.fill(buf, b"\0")),
        ("copy", lambda: backend.copy(other, buf)),
        ("launch", lambda: backend.launch("l0mem_f32_add", 0, [buf, buf, 1], 1)),
        ("address", lambda: buf.address),
        ("view", lambda: buf.view(0, 1)),
    ]
    for what, call in calls:
        with pytest.raises(ValueError, match=CLOSED) as err:
            call()
            pytest.fail(f"{what} after close did not raise")
        if what in ASKS_THE_BACKEND:
            assert isinstance(err.value, BackendClosedError), f"{what}: {err.value!r}"


def test_with_block_closes_even_on_error(case: Case) -> None:
    with pytest.raises(KeyError), case.open() as b:
        buf = b.allocate(0, 64)
        raise KeyError("boom")
    assert b.closed
    with pytest.raises(ValueError, match=CLOSED):
        b.upload(buf, b"x")
    case.check_released()


def _buffer_calls(
    backend: Backend, mine: DeviceBuffer, theirs: DeviceBuffer
) -> list[tuple[str, Callable[[], object]]]:
    return [
        ("upload", lambda: backend.upload(theirs, b"x")),
        ("download", lambda: backend.download(theirs, bytearray(1))),
        ("fill", lambda: backend.fill(theirs, b"\0")),
        ("copy from", lambda: backend.copy(mine, theirs, 16)),
        ("copy to", lambda: backend.copy(theirs, mine, 16)),
        ("launch", lambda: backend.launch("l0mem_f32_add", 0, [theirs, mine, 4], 4)),
        ("launch acc", lambda: backend.launch("l0mem_f32_add", 0, [mine, theirs, 4], 4)),
    ]


def test_buffers_of_another_backend_of_the_same_kind_are_value_errors(
    backend: Backend, twin: Backend
) -> None:
    mine, theirs = backend.allocate(0, 64), twin.allocate(0, 64)
    twin.upload(theirs, b"\x5a" * 64).wait()
    for what, call in _buffer_calls(backend, mine, theirs):
        with pytest.raises(ValueError, match="another"):
            call()
            pytest.fail(f"{what} took a buffer of another backend")
    assert read(twin, theirs) == b"\x5a" * 64


def test_buffers_of_another_kind_of_backend_are_refused(
    backend: Backend, stranger: Backend
) -> None:
    mine, theirs = backend.allocate(0, 64), stranger.allocate(0, 64)
    stranger.upload(theirs, b"\x5b" * 64).wait()
    for what, call in _buffer_calls(backend, mine, theirs):
        # Launch arguments are checked as kernel arguments (a ValueError that is also a
        # TypeError); every other call refuses the foreign type with a TypeError.
        with pytest.raises(TypeError):
            call()
            pytest.fail(f"{what} took a buffer of a {stranger.name} backend")
    assert read(stranger, theirs) == b"\x5b" * 64
    assert np.frombuffer(read(backend, mine), np.uint8).size == 64
