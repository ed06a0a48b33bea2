"""Contract: a backend called from several threads, and closed from another one.

What every backend promises (:mod:`l0mem.backends.common`): operations from
several threads run one at a time, and a ``close()`` from any thread waits
for the operation under way and for other threads' event waits, then refuses
new calls with a "closed" error. No handle is destroyed under a call: no
call fails any other way, nothing warns of a failed release, and every
allocation comes back (the fixtures check the simulator's devices).
"""

from __future__ import annotations

import random
import threading
import warnings
from collections.abc import Callable

import pytest

from l0mem.backends import Backend, Event
from tests.contracts import cases
from tests.contracts.cases import Case

N = 1 << 14
THREADS = 4
SEEDS = range(6)


def _operations(b: Backend, rng: random.Random, waits: list[Event]) -> None:
    """Run one seeded operation on ``b``; events go to ``waits`` for another thread to wait on."""
    dev = rng.randrange(b.device_count())
    buf = b.allocate(dev, N)
    try:
        op = rng.randrange(7)
        if op == 0:
            waits.append(b.upload(buf, bytes(N)))
        elif op == 1:
            b.download(buf, bytearray(N)).wait()
        elif op == 2:
            waits.append(b.fill(buf, b"\1\2"))
        elif op == 3:
            other = b.allocate(rng.randrange(b.device_count()), N)
            b.copy(other, buf, N).wait()
            other.close()
        elif op == 4:
            waits.append(b.launch("l0mem_f32_add", dev, [buf, buf, N // 4], N // 4))
        elif op == 5:
            b.synchronize()
        else:
            b.synchronize(dev)
    finally:
        buf.close()


def _closed_only(errors: list[BaseException]) -> list[str]:
    """Return the errors that are not the documented refusal of a closed backend or buffer."""
    return [f"{type(e).__name__}: {e}" for e in errors if "closed" not in str(e)]


def _calls(b: Backend, seed: float, waits: list[Event]) -> Callable[[], None]:
    """Return one thread's seeded stream of operations on ``b``."""
    rng = random.Random(seed)
    return lambda: _operations(b, rng, waits)


def _run_until(
    stop: threading.Event, body: Callable[[], None], errors: list[BaseException]
) -> None:
    try:
        while not stop.is_set():
            body()
    except BaseException as err:  # every error is judged by the test
        errors.append(err)


@pytest.mark.parametrize("seed", SEEDS)
def test_close_while_threads_call_in(case: Case, seed: int) -> None:
    """Threads allocate, copy, fill, launch and wait while the main thread closes the backend."""
    rng = random.Random(seed)
    errors: list[BaseException] = []
    waits: list[Event] = []
    stop = threading.Event()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a release that failed under a call warns
        for b in cases.opened(case):
            workers = [
                threading.Thread(
                    target=_run_until, args=(stop, _calls(b, rng.random(), waits), errors)
                )
                for _ in range(THREADS)
            ]

            def wait_all() -> None:
                while waits:
                    waits.pop().wait(30)

            waiter = threading.Thread(target=_run_until, args=(stop, wait_all, errors))
            for t in [*workers, waiter]:
                t.start()
            threading.Event().wait(rng.uniform(0.005, 0.08))
            b.close()
            assert b.closed
            stop.set()
            for t in [*workers, waiter]:
                t.join(60)
                assert not t.is_alive()
    assert _closed_only(errors) == []
    case.check_released()
