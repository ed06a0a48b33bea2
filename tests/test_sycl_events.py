"""SyclEvent.wait with a bound: a waiter thread waits, the caller waits for it with the bound."""

from __future__ import annotations

import threading
import time

import pytest

from l0mem.backends import CopyTimeout
from l0mem.backends.sycl_buffers import SyclEvent

pytestmark = pytest.mark.sycl


class FakeDpctlEvent:
    """A dpctl event whose wait runs ``wait_fn``; never complete when first asked."""

    execution_status = "running"

    def __init__(self, wait_fn) -> None:
        self._wait_fn = wait_fn

    def wait(self) -> None:
        self._wait_fn()


def test_a_wait_within_the_bound_returns():
    ev = SyclEvent([FakeDpctlEvent(lambda: time.sleep(0.02))], None, False)
    ev.wait(5.0)


def test_an_operation_past_the_bound_is_a_hang_and_says_so():
    release = threading.Event()
    hung: list[float] = []
    ev = SyclEvent([FakeDpctlEvent(release.wait)], None, False, hung.append)
    try:
        start = time.monotonic()
        with pytest.raises(CopyTimeout):
            ev.wait(0.05)
        assert time.monotonic() - start < 5 and hung == [0.05]
    finally:
        release.set()  # lets the waiter thread end


def test_an_error_of_the_wait_reaches_the_caller():
    def lost() -> None:
        raise RuntimeError("device lost")

    ev = SyclEvent([FakeDpctlEvent(lost)], None, False)
    with pytest.raises(RuntimeError, match="device lost"):
        ev.wait(5.0)
