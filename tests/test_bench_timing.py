"""l0mem.bench.timing: the one measurement type and the one timing routine, on fake events."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from l0mem.bench.timing import (
    FALLBACK_NOTE,
    SUMMARY_KEYS,
    Measurement,
    MeasurementInterrupted,
    time_op,
    time_ops,
    unmeasured_dict,
)
from tests.support.fake_events import FakeClock, FakeEvent


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return FakeClock().install(monkeypatch)


def _op(clock: FakeClock, calls: list[str], name: str, legs: Sequence[tuple[int | None, int]]):
    """Return an op named ``name`` that logs its calls and returns one event per (device, wait)."""

    def op() -> list[FakeEvent]:
        calls.append(name)
        clock.ns += 1  # enqueueing takes host time too
        return [FakeEvent(clock, dev, wait) for dev, wait in legs]

    return op


def test_measurement_summary() -> None:
    m = Measurement((30, 10, 20), 1000, "device")
    assert (m.median_ns, m.min_ns, m.max_ns) == (20.0, 10, 30)
    assert m.gbps == pytest.approx(50.0)
    assert m.gbps_min == pytest.approx(1000 / 30) and m.gbps_max == pytest.approx(100.0)
    assert m.spread == pytest.approx(1.0)
    assert m.rate(500) == pytest.approx(25.0)
    d = m.to_dict()
    assert tuple(d) == SUMMARY_KEYS
    assert d == {
        "timing": "device",
        "samples_ns": [30, 10, 20],
        "median_ns": 20.0,
        "min_ns": 10,
        "max_ns": 30,
        "gbps": pytest.approx(50.0),
        "gbps_min": pytest.approx(1000 / 30),
        "gbps_max": pytest.approx(100.0),
        "spread": pytest.approx(1.0),
    }


def test_measurement_edges() -> None:
    assert Measurement((10, 20), 60, "host").median_ns == 15.0
    steady = Measurement((7, 7, 7), 70, "host")
    assert steady.spread == 0 and steady.gbps == steady.gbps_min == steady.gbps_max == 10.0
    # A clock too coarse to see the operation reads 0 ns: it counts as 1 ns, never a division by 0.
    assert Measurement((0,), 64, "host").gbps == 64.0
    with pytest.raises(ValueError, match="no samples"):
        Measurement((), 1, "device")


def test_unmeasured_dict_has_the_same_keys_all_empty() -> None:
    d = unmeasured_dict()
    assert tuple(d) == SUMMARY_KEYS
    assert d["timing"] == "device" and d["samples_ns"] == []
    assert all(d[k] is None for k in SUMMARY_KEYS if k not in ("timing", "samples_ns"))
    assert unmeasured_dict("host")["timing"] == "host"


def test_device_timestamps_sum_over_the_events(clock: FakeClock) -> None:
    calls: list[str] = []
    op = _op(clock, calls, "a", [(5, 100), (7, 100)])
    m = time_op(op, 4096, reps=3, warmup=2)
    assert m.timing == "device" and m.samples_ns == (12, 12, 12) and m.bytes_moved == 4096
    assert calls == ["a"] * 5  # two untimed warm-up rounds, three timed


def test_host_clock_from_first_enqueue_to_last_completion(clock: FakeClock) -> None:
    calls: list[str] = []
    op = _op(clock, calls, "a", [(5, 100), (7, 30)])
    m = time_op(op, 64, reps=2, warmup=0, timing="host")
    # 1 ns to enqueue plus both waits, although the events carry device times.
    assert m.timing == "host" and m.samples_ns == (131, 131)


def test_an_event_without_timestamp_switches_every_op_to_the_host_clock(clock: FakeClock) -> None:
    calls: list[str] = []
    ops = {
        "timed": (_op(clock, calls, "timed", [(5, 10)]), 100),
        "untimed": (_op(clock, calls, "untimed", [(5, 10), (None, 20)]), 200),
    }
    got = time_ops(ops, reps=2, warmup=1)
    assert {k: m.timing for k, m in got.items()} == {"timed": "host", "untimed": "host"}
    assert got["timed"].samples_ns == (11, 11) and got["untimed"].samples_ns == (31, 31)
    assert got["timed"].bytes_moved == 100 and got["untimed"].bytes_moved == 200
    # Warm-up once, the device-timed round that found the gap, then the host rounds: round-robin.
    assert calls == ["timed", "untimed"] * 4


def test_a_fallback_to_the_host_clock_carries_a_note(clock: FakeClock) -> None:
    # An event whose timestamp cannot be read (NOT_READY after the wait, an end before its
    # start) answers None: host clock, and the note says why (issue 9).
    timed = time_op(_op(clock, [], "a", [(5, 10)]), 8, reps=1, warmup=0)
    assert timed.timing == "device" and timed.note is None
    fell = time_op(_op(clock, [], "b", [(None, 10)]), 8, reps=1, warmup=0)
    assert fell.timing == "host" and fell.note == FALLBACK_NOTE
    assert "host clock" in FALLBACK_NOTE


def test_device_timing_asked_for_but_missing_is_an_error(clock: FakeClock) -> None:
    op = _op(clock, [], "a", [(None, 1)])
    with pytest.raises(RuntimeError, match="no timestamp"):
        time_op(op, 1, reps=1, warmup=0, timing="device")


def test_prepare_runs_untimed_before_every_round(clock: FakeClock) -> None:
    calls: list[str] = []

    def prepare() -> None:
        calls.append("prepare")
        clock.ns += 1_000_000  # a slow upload must not show in the samples

    op = _op(clock, calls, "op", [(None, 50)])
    m = time_op(op, 8, reps=2, warmup=1, timing="host", prepare=prepare)
    assert m.samples_ns == (51, 51)
    assert calls == ["prepare", "op"] * 3


def _interrupted_at(clock: FakeClock, calls: list[str], name: str, call: int):
    """Return an op like :func:`_op` whose ``call``-th call raises KeyboardInterrupt (Ctrl-C)."""
    inner = _op(clock, calls, name, [(5, 10)])

    def op() -> list[FakeEvent]:
        if calls.count(name) + 1 == call:
            raise KeyboardInterrupt
        return inner()

    return op


@pytest.mark.parametrize("k", [1, 2, 3])
def test_an_interrupt_in_round_k_keeps_the_samples_of_the_rounds_before(
    clock: FakeClock, k: int
) -> None:
    calls: list[str] = []
    warmup = 2
    ops = {
        "first": (_op(clock, calls, "first", [(5, 10)]), 8),
        "stops": (_interrupted_at(clock, calls, "stops", warmup + k), 16),
        "last": (_op(clock, calls, "last", [(7, 10)]), 32),
    }
    # Caught as what Ctrl-C raises, so that a bare one fails this test, not the whole run.
    with pytest.raises(KeyboardInterrupt) as exc:
        time_ops(ops, reps=5, warmup=warmup)
    assert isinstance(exc.value, MeasurementInterrupted)
    got = exc.value.partial
    # Round-robin: the op before the interrupted one has its round-k sample too;
    # a key with no sample at all is left out.
    assert got["first"].samples_ns == (5,) * k
    assert got["first"].bytes_moved == 8 and got["first"].timing == "device"
    if k == 1:
        assert set(got) == {"first"}
    else:
        assert set(got) == {"first", "stops", "last"}
        assert got["stops"].samples_ns == (5,) * (k - 1)
        assert got["last"].samples_ns == (7,) * (k - 1)
    assert exc.value.signum == 2  # SIGINT: Ctrl-C


def test_an_interrupt_in_warm_up_measured_nothing(clock: FakeClock) -> None:
    calls: list[str] = []
    ops = {
        "a": (_op(clock, calls, "a", [(5, 10)]), 8),
        "b": (_interrupted_at(clock, calls, "b", 2), 8),
    }
    with pytest.raises(KeyboardInterrupt) as exc:
        time_ops(ops, reps=3, warmup=2)
    assert not isinstance(exc.value, MeasurementInterrupted)


def test_an_interrupt_after_the_host_clock_fallback_keeps_host_samples(clock: FakeClock) -> None:
    calls: list[str] = []
    op = _op(clock, calls, "a", [(None, 10)])

    def stops_third() -> list[FakeEvent]:
        # Call 1 finds no timestamp; calls 2 and 3 are host-timed; call 4 is interrupted.
        if len(calls) == 3:
            raise KeyboardInterrupt
        return op()

    with pytest.raises(KeyboardInterrupt) as exc:
        time_op(stops_third, 8, reps=5, warmup=0)
    assert isinstance(exc.value, MeasurementInterrupted)
    (m,) = exc.value.partial.values()
    assert m.timing == "host" and m.note == FALLBACK_NOTE and m.samples_ns == (11, 11)


@pytest.mark.parametrize(("reps", "warmup"), [(0, 0), (1, -1)])
def test_bad_counts(clock: FakeClock, reps: int, warmup: int) -> None:
    calls: list[str] = []
    with pytest.raises(ValueError, match="reps must be >= 1"):
        time_op(_op(clock, calls, "a", [(1, 1)]), 1, reps=reps, warmup=warmup)
    assert calls == []
