"""The Level Zero backend's record of waits between device queues, on events that say when they finish."""

from __future__ import annotations

from dataclasses import dataclass

from l0mem.backends.l0_events import WaitGraph


@dataclass
class FakeEvent:
    index: int  # the device whose queue signals it
    seq: int  # its place in the order the backend made its events
    finished: bool = False

    def done(self) -> bool:
        return self.finished


def test_a_device_is_stuck_only_behind_work_that_never_runs() -> None:
    g = WaitGraph(4)
    hung_copy = FakeEvent(0, 5)
    early = FakeEvent(1, 2)  # device 1's work queued before its stuck wait: it still runs
    late = FakeEvent(1, 7)  # queued after the stuck wait (command 6): it never runs
    g.note(1, 6, hung_copy)
    g.note(2, 8, early)
    g.note(3, 9, late)
    assert g.stuck({0}) == {1: 0, 3: 1}


def test_finished_events_and_synchronized_devices_hold_nobody() -> None:
    g = WaitGraph(3)
    g.note(1, 4, FakeEvent(0, 3, finished=True))  # done before the hang
    g.note(2, 6, FakeEvent(0, 5))
    assert g.stuck({0}) == {2: 0}
    g.synced(2)
    assert g.stuck({0}) == {}


def test_chains_are_followed_whatever_the_device_order() -> None:
    g = WaitGraph(4)
    g.note(1, 9, FakeEvent(2, 8))  # 1 waits for 2, which is stuck later in the scan
    g.note(2, 7, FakeEvent(3, 6))
    assert g.stuck({3}) == {2: 3, 1: 2}


def test_the_records_stay_few_without_a_synchronize() -> None:
    g = WaitGraph(2)
    pending = FakeEvent(0, 1)
    g.note(1, 2, pending)
    for seq in range(3, 3 + 3 * WaitGraph.KEEP):
        g.note(1, seq, FakeEvent(0, seq, finished=True))
    assert g.stuck({0}) == {1: 0}, "an unfinished wait survives the pruning"
    kept = g._waits[1]
    assert len(kept) <= WaitGraph.KEEP and kept[0][1] is pending
