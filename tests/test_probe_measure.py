"""``l0mem.probe.host_cost``: what a block of one's own code cost the host, with one sign for all."""

from __future__ import annotations

import itertools
import mmap

import pytest

from l0mem.probe import HostCost, Snapshot, host_cost
from l0mem.probe import measure as measure_module

MIB, GIB = 1 << 20, 1 << 30


def _fake_snapshots(monkeypatch: pytest.MonkeyPatch, *values: dict[str, int]) -> None:
    clock = itertools.count()
    snaps = iter(Snapshot(float(next(clock)), v) for v in values)
    monkeypatch.setattr(measure_module, "take_snapshot", lambda: next(snaps))


def test_memory_taken_from_the_host_is_a_positive_cost_in_every_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = {"host.available": 10 * GIB, "meminfo.MemAvailable": 9 * GIB, "meminfo.Shmem": GIB}
    after = {"host.available": 9 * GIB, "meminfo.MemAvailable": 8 * GIB, "meminfo.Shmem": 2 * GIB}
    _fake_snapshots(monkeypatch, before, after)
    with host_cost() as cost, pytest.raises(RuntimeError, match="after the with block"):
        _ = cost.host
    # A fall of the available memory and a rise of Shmem are both memory taken: +1 GiB.
    assert cost.bytes == {"host.available": GIB, "meminfo.MemAvailable": GIB, "meminfo.Shmem": GIB}
    assert cost.host == GIB and cost["meminfo.Shmem"] == GIB
    assert cost.per_gib(GIB) == 1024.0 and cost.per_gib(2 * GIB, "meminfo.Shmem") == 512.0
    assert cost.seconds == 1.0
    with pytest.raises(ValueError, match="device_bytes"):
        cost.per_gib(0)


def test_memory_given_back_is_negative_and_memavailable_stands_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_snapshots(monkeypatch, {"meminfo.MemAvailable": 8 * GIB}, {"meminfo.MemAvailable": 9 * GIB})
    with host_cost() as cost:
        pass
    assert cost.host == -GIB and cost.per_gib(GIB) == -1024.0
    _fake_snapshots(monkeypatch, {"proc.VmRSS": 0}, {"proc.VmRSS": MIB})
    with host_cost() as cost:
        pass
    assert cost.host is None and cost.per_gib(GIB) is None and cost["proc.VmRSS"] == MIB


def test_a_block_that_raises_still_has_its_cost() -> None:
    seen: list[HostCost] = []
    with pytest.raises(OSError, match="boom"), host_cost() as cost:
        seen.append(cost)
        raise OSError("boom")
    assert seen[0].after is not None and "proc.VmRSS" in seen[0].bytes


def test_the_process_own_memory_is_measured_for_real() -> None:
    # Per-process signals move with this process alone, whatever the machine does.
    with host_cost() as cost:
        block = mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for offset in range(0, 64 * MIB, mmap.PAGESIZE):
            block[offset] = 1
    assert 60 * MIB <= cost["proc.VmRSS"] <= 72 * MIB
    assert 60 * MIB <= cost["proc.RssAnon"] <= 72 * MIB
    with host_cost() as back:
        block.close()
    assert -72 * MIB <= back["proc.VmRSS"] <= -60 * MIB
