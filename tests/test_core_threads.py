"""Closing a context while other threads call into it, and the release index (simulator)."""

from __future__ import annotations

import gc
import threading
import warnings
from typing import Any

import pytest

import l0mem.core as core
from l0mem.core import _raw
from l0mem.core._lifetime import ReleaseCall, Tracker
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean
driver = core_fixtures.driver


def test_release_all_waits_for_a_call_under_way() -> None:
    freed: list[str] = []

    def free(name: str) -> int:
        freed.append(name)
        return 0

    t = Tracker()
    t.add(free, ("memory",))
    t.enter()  # another thread's driver call on the context's handles
    closer = threading.Thread(target=t.release_all, args=(ReleaseCall(free, ("ctx",), "ctx"), True))
    closer.start()
    closer.join(0.3)
    assert closer.is_alive() and freed == []  # nothing destroyed under the call
    with pytest.raises(ValueError, match="closed"):
        t.enter()  # no new call starts while closing
    t.leave()
    closer.join(5)
    assert not closer.is_alive() and freed == ["memory", "ctx"]


def test_close_waits_for_an_allocation_in_the_driver(clean: Any, driver: Any, monkeypatch) -> None:
    dev = driver.devices()[0]
    ctx = driver.create_context([dev])
    inside, go = threading.Event(), threading.Event()
    real = _raw.call

    def slow(function: Any, *args: Any) -> None:
        if function.__name__ == "zeMemAllocDevice":
            inside.set()
            assert go.wait(10)
        real(function, *args)

    monkeypatch.setattr(_raw, "call", slow)
    got: list[Any] = []
    allocator = threading.Thread(target=lambda: got.append(ctx.allocate_device(dev, 4096)))
    allocator.start()
    assert inside.wait(10)
    closer = threading.Thread(target=ctx.close)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a free or destroy failing on a destroyed context warns
        closer.start()
        closer.join(0.3)
        assert closer.is_alive() and not ctx.closed  # the context outlives the call
        go.set()
        allocator.join(10)
        closer.join(10)
    assert ctx.closed and got and got[0].closed  # registered, then freed with the context
    assert clean.device_used(0) == 0
    with pytest.raises(ValueError, match="closed"):
        ctx.allocate_device(dev, 4096)


def test_allocating_threads_and_a_closing_thread(clean: Any, driver: Any) -> None:
    """Every allocation is freed once: by its thread, or by the context, never under a call."""
    dev = driver.devices()[0]
    ctx = driver.create_context([dev])
    errors: list[BaseException] = []
    start = threading.Barrier(5)

    def allocate() -> None:
        start.wait()
        try:
            for _ in range(2000):
                ctx.allocate_device(dev, 4096).close()
        except ValueError as err:
            if "closed" not in str(err):
                errors.append(err)
        except BaseException as err:  # any driver error means a handle died under a call
            errors.append(err)

    threads = [threading.Thread(target=allocate) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for th in threads:
            th.start()
        start.wait()
        ctx.close()
        for th in threads:
            th.join(30)
    assert errors == [] and ctx.closed
    assert clean.device_used(0) == 0


def test_siblings_stay_and_children_go_newest_first() -> None:
    freed: list[str] = []

    def free(name: str) -> int:
        freed.append(name)
        return 0

    t = Tracker()
    pool = t.add(free, ("pool",))
    events = [t.add(free, (f"event{i}",), parent=pool) for i in range(3)]
    other = t.add(free, ("other",))
    assert t.release(events[1]) and freed == ["event1"]
    assert t.owns(events[0]) and t.owns(events[2]) and t.owns(other)
    assert t.release(pool)
    assert freed == ["event1", "event2", "event0", "pool"]
    assert t.owns(other) and not t.release(pool)
    with pytest.raises(ValueError, match="parent object is closed"):
        t.add(free, ("late",), parent=pool)


def test_forgotten_objects_are_freed_children_first(clean: Any, driver: Any) -> None:
    dev = driver.devices()[0]
    ctx = driver.create_context([dev])
    pool = ctx.event_pool(2)
    pool.event(0)  # kept only by the pool's cache: a cycle of pool and event
    buf = ctx.allocate_device(dev, 4096)
    buf.self_ref = buf  # only the cycle collector finds it
    assert ctx.live_handles == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del pool, buf
        gc.collect()
    assert ctx.live_handles == 0 and clean.device_used(0) == 0
    ctx.close()


def test_an_object_that_never_registered_has_nothing_to_free(clean: Any, driver: Any) -> None:
    dev = driver.devices()[0]
    with driver.create_context([dev]) as ctx, warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="at least 1"):
            core.EventPool(ctx, 0)  # refused before registration; __del__ must stay quiet
        gc.collect()
        assert ctx.live_handles == 0


def test_close_waits_for_an_append_under_way(clean: Any, driver: Any, monkeypatch) -> None:
    dev = driver.devices()[0]
    ctx = driver.create_context([dev])
    cl = ctx.immediate_command_list(dev)
    src, dst = ctx.allocate_device(dev, 4096), ctx.allocate_device(dev, 4096)
    inside, go = threading.Event(), threading.Event()
    real = _raw.call

    def slow(function: Any, *args: Any) -> None:
        if function.__name__ == "zeCommandListAppendMemoryCopy":
            inside.set()
            assert go.wait(10)
        real(function, *args)

    monkeypatch.setattr(_raw, "call", slow)
    failed: list[BaseException] = []

    def copy() -> None:
        try:
            cl.copy(dst, src)
        except BaseException as err:
            failed.append(err)

    copier = threading.Thread(target=copy)
    copier.start()
    assert inside.wait(10)
    closer = threading.Thread(target=ctx.close)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        closer.start()
        closer.join(0.3)
        assert closer.is_alive() and not cl.closed and not src.closed
        go.set()
        copier.join(10)
        closer.join(10)
    assert failed == [] and ctx.closed and cl.closed and clean.device_used(0) == 0
    with pytest.raises(ValueError, match="closed"):
        cl.copy(dst, src)
