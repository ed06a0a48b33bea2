"""Contract: device-to-device copies (every route), ordering by events, and staged_copy."""

from __future__ import annotations

from functools import partial

import pytest

from l0mem.backends import Backend, Event
from tests.contracts import cases
from tests.contracts.cases import Case
from tests.contracts.helpers import filled, pairs, random_bytes, read

N = (1 << 20) + 5


def test_copy_on_one_device(backend: Backend) -> None:
    for dev in range(backend.device_count()):
        data = random_bytes(N, seed=10 + dev)
        a, b = backend.allocate(dev, N), filled(backend, dev, N, 0)
        backend.upload(a, data).wait()
        backend.copy(b, a, 1000).wait()
        got = read(backend, b)
        assert got[:1000] == data[:1000] and got[1000:] == bytes(N - 1000)
        backend.copy(b, a).wait()  # default: all of src
        assert read(backend, b) == data
        # Between views at odd offsets, and within one allocation.
        backend.copy(b.view(3, 777), a.view(5001, 999), 777).wait()
        got = read(backend, b)
        assert got[3:780] == data[5001:5778]
        assert got[:3] == data[:3] and got[780:] == data[780:]
        backend.copy(a.view(N - 100, 100), a.view(0, 100)).wait()
        assert read(backend, a)[N - 100 :] == data[:100]


def test_copy_between_every_pair_of_devices(backend: Backend) -> None:
    for s, d in pairs(backend):
        data = random_bytes(N, seed=100 * s + d)
        src, dst = backend.allocate(s, N), filled(backend, d, N + 64, 0x77)
        up = backend.upload(src, data)
        ev = backend.copy(dst, src, wait_for=[up])
        got = bytearray(N + 64)
        backend.download(dst, got, wait_for=[ev]).wait()
        assert bytes(got[:N]) == data, (s, d)
        assert bytes(got[N:]) == b"\x77" * 64, f"{s}->{d}: the copy wrote past nbytes"
        src.close()
        dst.close()


def test_copy_on_either_queue(backend: Backend) -> None:
    for s, d in pairs(backend):
        data = random_bytes(4099, seed=7 * s + d)
        src, dst = backend.allocate(s, 4099), filled(backend, d, 4099, 0)
        backend.upload(src, data).wait()
        for q in {s, d}:
            backend.fill(dst, b"\0").wait()
            backend.copy(dst, src, queue_device=q).wait()
            assert read(backend, dst) == data, f"{s}->{d} on the queue of {q}"


def test_routes_are_what_copy_route_says(case: Case, backend: Backend) -> None:
    seen = 0
    for s, d in pairs(backend):
        data = random_bytes(4096, seed=s + 3 * d)
        src, dst = backend.allocate(s, 4096), backend.allocate(d, 4096)
        backend.upload(src, data).wait()
        route = cases.route_taken(case, backend, partial(backend.copy, dst, src), s, d)
        if route is None:
            pytest.skip(f"no witness of the copy route for {case.id}")
        assert route == backend.copy_route(s, d)[0], f"{s}->{d}: copy went {route}"
        assert read(backend, dst) == data
        seen += 1
    assert seen == backend.device_count() ** 2


def test_wait_for_orders_work_across_devices(backend: Backend) -> None:
    """A ring upload -> copy -> fill -> copy ... -> download, ordered by events only."""
    n = backend.device_count()
    ring = [*range(n), 0]
    data = random_bytes(N, seed=42)
    bufs = [backend.allocate(d, N) for d in ring]
    ev: Event = backend.upload(bufs[0], data)
    expect = bytearray(data)
    for hop in range(1, len(ring)):
        ev = backend.copy(bufs[hop], bufs[hop - 1], wait_for=[ev])
        # Work on the receiving device must see the copy; mark it with its own stripe.
        stripe = bytes([0x10 + hop]) * 4096
        ev = backend.fill(bufs[hop].view(hop * 4096, 4096), stripe[:1], wait_for=[ev])
        expect[hop * 4096 : (hop + 1) * 4096] = stripe
    out = bytearray(N)
    backend.download(bufs[-1], out, wait_for=[ev]).wait()
    assert out == expect


def test_wait_for_takes_events_of_every_device(backend: Backend) -> None:
    n = backend.device_count()
    bufs = [backend.allocate(d, N) for d in range(n)]
    events = [backend.fill(b, bytes([d + 1])) for d, b in enumerate(bufs)]
    for d, b in enumerate(bufs):
        # Each device's next step waits for every device's fill.
        out = bytearray(N)
        backend.download(b, out, wait_for=events).wait()
        assert out == bytes([d + 1]) * N
    backend.synchronize()
    for d in range(n):
        backend.synchronize(d)


def test_staged_copy_between_every_pair(backend: Backend) -> None:
    for s, d in pairs(backend):
        data = random_bytes(N, seed=1000 + 10 * s + d)
        src, dst = backend.allocate(s, N + 16), filled(backend, d, N + 16, 0x99)
        up = backend.upload(src, data)
        down, upl = backend.staged_copy(dst, src, N, wait_for=[up])
        assert isinstance(down, Event) and isinstance(upl, Event)
        upl.wait()
        down.wait()
        got = read(backend, dst)
        assert got[:N] == data and got[N:] == b"\x99" * 16, (s, d)
        empty = backend.staged_copy(dst, src, 0)
        for ev in empty:
            ev.wait()
        assert read(backend, dst, 8) == data[:8]
