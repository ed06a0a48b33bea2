"""The host memory the measurements ask for before they start counts the pinned staging rings."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from l0mem.backends import DeviceMemory
from l0mem.bench import allreduce, copies, fit, integrity
from l0mem.bench.fit import HostTooSmall

RING = 1 << 20


class RingBackend:
    """Two devices of unknown size whose staging rings are RING bytes each."""

    staging_ring_bytes = RING

    def device_count(self) -> int:
        return 2

    def memory(self, device: int) -> DeviceMemory:
        return DeviceMemory(total=None, max_alloc=None, free=None, host_backed=False)

    def device_name(self, index: int) -> str:
        return f"ring {index}"


def _threshold(check: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> int:
    """Return the least available host memory with which ``check`` passes."""
    lo, hi = 0, 1 << 40
    while lo < hi:
        mid = (lo + hi) // 2
        monkeypatch.setattr(fit, "mem_available", lambda m=mid: m)
        try:
            check()
            hi = mid
        except HostTooSmall:
            lo = mid + 1
    return lo


@pytest.mark.parametrize(
    "check",
    [
        lambda b: copies.check_sizes(b, [4096]),
        lambda b: integrity._check_fits(b, [0, 1], [4096]),
        lambda b: allreduce.check_sizes(b, [0, 1], [4096]),
    ],
    ids=["p2p timings", "copy checks", "allreduce"],
)
def test_each_device_may_need_a_ring(check, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = RingBackend()
    with_rings = _threshold(lambda: check(backend), monkeypatch)
    backend.staging_ring_bytes = 0
    without = _threshold(lambda: check(backend), monkeypatch)
    assert with_rings - without == 2 * RING
