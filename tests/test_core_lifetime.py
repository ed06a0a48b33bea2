"""The release bookkeeping of l0mem.core (Tracker), with stand-in release calls."""

from __future__ import annotations

import ctypes
import gc

import pytest

from l0mem._ze.enums import ze_result_t
from l0mem._ze.errors import DeviceLostError
from l0mem.core import _lifetime
from l0mem.core._lifetime import ReleaseCall, ReleaseWarning, Tracker


class Calls:
    """Stand-in C release routines that record what they free."""

    def __init__(self) -> None:
        self.freed: list[str] = []

    def release(self, name: str) -> int:
        self.freed.append(name)
        return 0


def exporter() -> ctypes.Array[ctypes.c_char]:
    """Return a ctypes array standing in for the exporter behind a host memoryview."""
    return ctypes.create_string_buffer(8)


def test_len_counts_unreleased_handles() -> None:
    calls = Calls()
    t = Tracker()
    assert len(t) == 0
    a = t.add(calls.release, ("a",), "free_a")
    t.add(calls.release, ("child",), "free_child", parent=a)
    assert len(t) == 2
    assert t.release(a)
    assert len(t) == 0 and calls.freed == ["child", "a"]


def test_pinned_memory_refuses_an_explicit_release() -> None:
    calls = Calls()
    t = Tracker()
    key = t.add(calls.release, ("host",), "zeMemFree")
    arr = exporter()
    view = memoryview(arr)
    t.pin(key, arr)
    del arr  # the view keeps the exporter alive
    with pytest.raises(BufferError, match="memoryview"):
        t.release(key)
    assert t.owns(key) and calls.freed == []
    # Garbage collection (non-raising) leaves pinned memory alone.
    assert t.release(key, False) is False
    assert t.owns(key) and calls.freed == []
    view.release()
    assert t.release(key) is True
    assert calls.freed == ["host"]


def test_views_held_only_by_garbage_cycles_do_not_block() -> None:
    calls = Calls()
    t = Tracker()
    key = t.add(calls.release, ("host",), "zeMemFree")
    arr = exporter()
    t.pin(key, arr)
    cycle: list[object] = [memoryview(arr)]
    cycle.append(cycle)
    del arr, cycle
    t.release(key)  # check_unpinned collects the cycle before refusing
    assert calls.freed == ["host"]


def test_pinning_a_released_key_is_refused() -> None:
    calls = Calls()
    t = Tracker()
    key = t.add(calls.release, ("x",), "free")
    t.release(key)
    with pytest.raises(ValueError, match="closed"):
        t.pin(key, exporter())


def test_release_all_with_a_pin() -> None:
    calls = Calls()
    t = Tracker()
    plain = t.add(calls.release, ("plain",), "zeMemFree")
    host = t.add(calls.release, ("host",), "zeMemFree")
    arr = exporter()
    t.pin(host, arr)
    final = ReleaseCall(calls.release, ("context",), "zeContextDestroy")
    with pytest.raises(BufferError):
        t.release_all(final, True)
    assert not t.closed and t.owns(plain) and t.owns(host) and calls.freed == []
    # Collection or interpreter exit: free what is not pinned, keep the rest and the context.
    t.release_all(final, False)
    assert t.closed and calls.freed == ["plain"]
    assert t.owns(host)
    assert t.release(host, False) is False  # still pinned
    del arr
    gc.collect()
    assert t.release(host, False) is True
    assert calls.freed == ["plain", "host"]


def test_discard_warns_instead_of_hiding_the_first_error() -> None:
    seen: list[object] = []

    def zeModuleDestroy(*args: object) -> int:
        seen.extend(args)
        return ze_result_t.ZE_RESULT_ERROR_DEVICE_LOST

    with pytest.warns(ReleaseWarning, match="zeModuleDestroy failed while cleaning up") as caught:
        _lifetime.discard(zeModuleDestroy, 1)
    assert seen == [1]
    # The routine is named twice: by discard, and by the DeviceLostError it reports.
    assert "zeModuleDestroy: ZE_RESULT_ERROR_DEVICE_LOST" in str(caught[0].message)


def test_release_calls_are_named_after_the_routine() -> None:
    """A registered function's C name is what failures report, unless one is given."""

    def zeEventDestroy(handle: int) -> int:
        return ze_result_t.ZE_RESULT_ERROR_DEVICE_LOST if handle == 2 else 0

    assert ReleaseCall.of(zeEventDestroy, 7) == ReleaseCall(zeEventDestroy, (7,), "zeEventDestroy")
    t = Tracker()
    named = t.add(zeEventDestroy, (2,))
    with pytest.raises(DeviceLostError, match=r"^zeEventDestroy: ZE_RESULT_ERROR_DEVICE_LOST"):
        t.release(named)
    renamed = t.add(zeEventDestroy, (2,), "close(dma-buf fd)")
    with pytest.warns(ReleaseWarning, match=r"releasing close\(dma-buf fd\) failed"):
        t.release(renamed, False)
