"""The simulator's link model (``link_gbps``): copies take a link's time on per-device engines."""

from __future__ import annotations

import pytest

from l0mem.backends.levelzero import L0Event
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean
backend = core_fixtures.backend3

KIB = 1 << 10
TICK_NS = 10  # the simulator's timer: 100 MHz
# Links slow enough that a modelled copy lasts far longer than any stall of the
# host between two submissions, so that no assertion depends on the host's speed.


# The simulator's kernel timestamps are as wide as a real device's (zesim.h): they wrap
# every 43 s at 100 MHz, and a copy may straddle the wrap.
KERNEL_TS_BITS = 32


def _span(ev: object, near: int | None = None) -> tuple[int, int]:
    """Return the modelled (start, end) of an event's command, in ns (end past a wrap unwrapped).

    With ``near`` (ns, from another event's span) the start is the one of its
    wraps within half a wrap of it: commands seconds apart may lie on either
    side of a wrap, and only then compare.
    """
    assert isinstance(ev, L0Event)
    ev.wait()
    start, end = ev.core.kernel_timestamp()
    wrap = 1 << KERNEL_TS_BITS
    length = (end - start) % wrap
    if near is not None:
        start += round((near // TICK_NS - start) / wrap) * wrap
    return start * TICK_NS, (start + length) * TICK_NS


def test_copies_across_a_link_last_their_bytes_at_its_speed(backend, clean):
    clean.set("link_gbps", "0.001")  # a byte per ms: 64 KiB take 65 ms
    n = 64 * KIB
    a, b = backend.allocate(0, n), backend.allocate(1, n)
    pinned = backend.allocate_host(0, n)
    cases = {
        "download into pinned memory": (backend.download(a, pinned), n * 1000),
        "upload from pinned memory": (backend.upload(a, pinned), n * 1000),
        "download into pageable memory": (backend.download(a, bytearray(n)), 2 * n * 1000),
        "peer copy": (backend.copy(b, a), n * 1000),
    }
    for what, (ev, ns) in cases.items():
        start, end = _span(ev)
        assert end - start == pytest.approx(ns, abs=2 * TICK_NS), what
    # A copy within one device crosses no link: it lasts what the memory copy took,
    # far less than the 33 ms its bytes would take on the link.
    start, end = _span(backend.copy(a.view(0, n // 2), a.view(n // 2, n // 2)))
    assert end - start < n // 2 * 1000
    pinned.close()


def test_engines_of_two_devices_overlap_and_waits_order_them(backend, clean):
    clean.set("link_gbps", "0.0005")  # 256 KiB take 0.52 s
    n = 256 * KIB
    src, dst = backend.allocate(0, n), backend.allocate(1, n)
    h0, h1 = backend.allocate_host(0, n), backend.allocate_host(1, n)
    down = backend.download(src, h0)
    up = backend.upload(dst, h1)  # independent bytes, another device's engine
    # On a third device, idle: only what it waits for holds it back.
    after = backend.upload(backend.allocate(2, n), h0, wait_for=[down])
    d0, d1 = _span(down)
    u0, u1 = _span(up, near=d0)
    a0, _ = _span(after, near=d0)
    assert u0 < d1 and d0 < u1, "the two engines did not run at once"
    assert a0 >= d1 - TICK_NS, "a command started before what it waits for ended"
    # One engine runs its commands one after another.
    again = backend.download(src, h0)
    assert _span(again, near=d0)[0] >= d1 - TICK_NS
    h0.close(), h1.close()


def test_an_event_counts_as_complete_only_from_its_modelled_end(backend, clean):
    clean.set("link_gbps", "0.0001")  # 64 KiB take 0.66 s
    buf, pinned = backend.allocate(0, 65536), backend.allocate_host(0, 65536)
    ev = backend.download(buf, pinned)
    assert isinstance(ev, L0Event)
    assert not ev.core.query()
    assert not ev.core.wait(1_000_000)  # 1 ms
    assert ev.core.wait(None)
    assert ev.core.query()
    pinned.close()
