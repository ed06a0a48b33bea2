"""Copies checked byte for byte (l0mem.bench.integrity) on the simulated driver's copy faults.

The simulator corrupts peer copies at configured offsets or at a seeded rate,
and hangs the K-th peer copy (tests/simdriver/faults.c): its configuration
and counters are the ground truth these checks are held to.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from l0mem.backends import CopyTimeout, copy_deadline
from l0mem.bench.integrity import (
    BOUNDARY_SIZES,
    OFFSETS,
    check_copy,
    differences,
    pattern,
    verify_copies,
)
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean


backend = core_fixtures.backend3


def _failures(checks):
    return [c for c in checks if not c.ok]


def test_a_clean_run_checks_every_route_pair_size_and_offset(backend):
    sizes = [3, 4097]
    checks = verify_copies(backend, sizes=sizes)
    assert _failures(checks) == []
    done = {(c.src, c.dst, c.route, c.nbytes, c.src_offset, c.dst_offset) for c in checks}
    expected = {
        (s, d, r, n, so, do)
        for s in range(3)
        for d in range(3)
        for r in (["same_device"] if s == d else ["direct", "staged"])
        for n in sizes
        for so, do in OFFSETS
    }
    assert done == expected
    assert all(c.mismatches == 0 and c.skipped is None for c in checks)


def test_corruption_is_found_at_the_offset_the_simulator_wrote_it(backend, clean):
    clean.set("corrupt_offsets", "4096")
    checks = verify_copies(backend, [0, 1], sizes=list(BOUNDARY_SIZES))
    bad = _failures(checks)
    # Only peer copies (device to device across cards) corrupt; staged and same-device
    # copies move through host memory or stay on one card.
    assert bad and {(c.src, c.dst, c.route) for c in bad} == {(0, 1, "direct"), (1, 0, "direct")}
    assert all(c.nbytes > 4096 and c.mismatches == 1 and c.first_mismatch == 4096 for c in bad)
    small = [c for c in checks if c.route == "direct" and c.nbytes <= 4096]
    assert small and all(c.ok for c in small)
    assert "1 byte(s) wrong, the first at offset 4,096 (seed 0)" in bad[0].describe()


def test_the_last_byte_of_an_odd_size_at_unaligned_offsets_is_checked(backend, clean):
    n = 4097
    clean.set("corrupt_offsets", str(n - 1))
    src, dst = backend.allocate(0, n + 8), backend.allocate(1, n + 8)
    try:
        got = check_copy(backend, "direct", src, dst, n, (1, 3), seed=7)
    finally:
        src.close()
        dst.close()
    assert (got.mismatches, got.first_mismatch, got.src_offset, got.dst_offset) == (1, n - 1, 1, 3)


def test_a_copy_that_writes_nothing_is_caught(backend, monkeypatch):
    # The destination holds the pattern's complement first: a copy that "completes"
    # without writing leaves every byte wrong.
    monkeypatch.setattr(backend, "copy", lambda dst, src, n=None, **kw: backend.fill(dst, b"\0", 0))
    src, dst = backend.allocate(0, 64), backend.allocate(1, 64)
    try:
        got = check_copy(backend, "direct", src, dst, 64)
    finally:
        src.close()
        dst.close()
    assert (got.mismatches, got.first_mismatch, got.ok) == (64, 0, False)


def test_a_corruption_rate_is_counted_exactly(backend, clean):
    clean.set("corrupt_rate", "0.002")
    checks = verify_copies(
        backend, [0, 1], sizes=[(2 << 20) + 3], routes=["direct"], offsets=[(0, 0)]
    )
    wrong = sum(c.mismatches or 0 for c in checks)
    assert wrong == clean.corrupted_bytes() > 0
    assert len(checks) == 2 and all(not c.ok for c in checks)


def test_a_hung_copy_is_reported_within_its_bound_and_its_devices_are_left_alone(backend, clean):
    clean.set("hang_copy_at", "1")
    started = time.monotonic()
    checks = verify_copies(backend, sizes=[64], routes=["same_device", "direct"], watchdog=0.3)
    took = time.monotonic() - started
    hung = [c for c in checks if c.hung]
    assert [(c.src, c.dst, c.route) for c in hung] == [(0, 1, "direct")]
    assert took < 0.3 + copy_deadline(64, 0.3) + 5
    skipped = [c for c in checks if c.skipped]
    assert skipped and all("hung earlier (copy 0>1 direct)" in (c.skipped or "") for c in skipped)
    assert {(c.src, c.dst) for c in checks if c.ok and not c.skipped} >= {(2, 2)}
    assert clean.peer_copies() == 1  # nothing else was sent to the two hung devices
    with pytest.raises(CopyTimeout):
        backend.synchronize(0)


def test_bad_arguments(backend):
    bad: list[dict[str, Any]] = [{"sizes": []}, {"sizes": [0]}, {"routes": ["teleport"]}]
    for kwargs in bad:
        with pytest.raises(ValueError):
            verify_copies(backend, **kwargs)


def test_devices_waiting_for_a_hung_copy_are_given_up_without_another_wait(backend, clean):
    # Without this, each device behind a hang costs the watchdog's bound again,
    # in synchronize and in close: a four-device all-reduce took four bounds to exit.
    clean.set("hang_copy_at", "1")
    a, b, c = (backend.allocate(i, 64) for i in range(3))
    hung = backend.copy(b, a)  # device 0's queue
    relay = backend.fill(b, b"\x01", wait_for=[hung])  # device 1 waits for device 0
    last = backend.fill(c, b"\x02", wait_for=[relay])  # device 2 waits for device 1
    with pytest.raises(CopyTimeout):
        hung.wait(0.2)
    with pytest.raises(CopyTimeout, match=r"device 2 is stuck behind a hung operation \(via device 1\)"):
        backend.synchronize(2)
    with pytest.raises(CopyTimeout, match=r"device 1 is stuck behind a hung operation \(via device 0\)"):
        backend.synchronize(1)  # found stuck on the way: no wait of its own either
    with pytest.raises(CopyTimeout):
        last.wait(0.1)  # its own wait runs out too: still stuck, not the hang's origin
    with pytest.raises(CopyTimeout, match="device 2 is stuck behind"):
        backend.synchronize(2)


def test_a_device_that_waited_for_finished_work_is_still_waited_for(backend, clean):
    a, b, c = (backend.allocate(i, 64) for i in range(3))
    done = backend.fill(a, b"\x03")
    done.wait(5)
    backend.fill(c, b"\x04", wait_for=[done])  # device 2 waited for device 0's finished fill
    clean.set("hang_copy_at", "1")
    hung = backend.copy(b, a)
    with pytest.raises(CopyTimeout):
        hung.wait(0.2)
    backend.synchronize(2)  # device 0 hung, but nothing device 2 waits for is unfinished


def test_close_does_not_wait_for_devices_behind_a_hang(backend, clean):
    clean.set("hang_copy_at", "1")
    a, b, c = (backend.allocate(i, 64) for i in range(3))
    hung = backend.copy(b, a)
    backend.fill(c, b"\x02", wait_for=[hung])  # device 2 is stuck behind device 0
    with pytest.raises(CopyTimeout):
        hung.wait(3.0)  # from here every wait is bounded by 3 s
    started = time.monotonic()
    backend.close()
    assert time.monotonic() - started < 1.5, "close waited for a device behind the hang"


def test_differences_count_every_wrong_byte_and_find_the_first() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n = rng.choice([1, 2, 7, 4096, 65537])
        want = rng.randbytes(n)
        got = bytearray(want)
        for i in rng.sample(range(n), rng.randint(0, min(n, 9))):
            got[i] ^= rng.randint(1, 255)
        wrong = [i for i in range(n) if got[i] != want[i]]
        assert differences(memoryview(got), want) == (len(wrong), wrong[0] if wrong else None)


def test_the_pattern_is_seeded_and_differs_between_copies() -> None:
    assert pattern(3, 0, 10_000, 0) == pattern(3, 0, 10_000, 0)
    others = {pattern(4, 0, 10_000, 0), pattern(3, 1, 10_000, 0), pattern(3, 0, 10_001, 0)}
    assert pattern(3, 0, 10_000, 0) not in others and len(others) == 3
    assert len(pattern(3, 0, 10_000, 0)) == 10_000
