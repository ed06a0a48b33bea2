"""The all-reduce's recorded steps and the critical path the benchmark holds its time against."""

from __future__ import annotations

import pytest

import l0mem.core as core
from l0mem.allreduce import AllReduce, Step
from l0mem.backends.levelzero import LevelZeroBackend
from l0mem.bench.critical import (
    critical_path_ns,
    critical_path_of,
    download_key,
    step_key,
    step_times,
)
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean


@pytest.fixture
def backend(clean):
    b = LevelZeroBackend(core.drivers()[0].devices()[:3], context="multi")
    yield b
    b.close()


def _cost(table: dict[str, float]):
    return lambda st: table[st.op]


def test_steps_on_one_queue_add_up_and_queues_run_at_once():
    steps = [
        Step("compress", 0, 0, 10),
        Step("compress", 1, 1, 10),  # another queue: alongside the first
        Step("copy", 0, 1, 40),  # queue 0, after the compress on it
        Step("add", 1, 1, 10, after=(2,)),  # waits for the copy, though its queue is free
    ]
    cost = _cost({"compress": 5.0, "copy": 20.0, "add": 3.0})
    assert critical_path_ns(steps, cost) == 5 + 20 + 3
    # Without the wait the add runs after the compress on its own queue.
    loose = [*steps[:3], Step("add", 1, 1, 10)]
    assert critical_path_ns(loose, cost) == 5 + 20
    # A staged copy holds both queues; given its download's time, its source's only for that.
    staged = [Step("staged_copy", 0, 1, 40), Step("compress", 1, 1, 10), Step("add", 0, 0, 10)]
    costs = _cost({"staged_copy": 30.0, "compress": 5.0, "add": 3.0})
    assert critical_path_ns(staged, costs) == 35
    assert critical_path_ns(staged[::2], costs) == 33
    assert critical_path_ns(staged[::2], costs, lambda st: 12.0) == 30
    assert critical_path_ns(staged, costs, lambda st: 12.0) == 35
    assert critical_path_ns([], cost) == 0


def test_a_pair_call_records_its_steps_and_waits(backend):
    bufs = [backend.allocate(d, 4 * 1000) for d in (0, 1)]
    with AllReduce(backend, [0, 1]) as ar:
        stats = ar(bufs, 1000, path="f32")
        stats.wait()
    ops = [(s.op, s.src, s.dst, s.size, s.after) for s in stats.steps]
    assert ops == [
        ("copy", 0, 1, 4000, ()),
        ("copy", 1, 0, 4000, ()),
        ("add", 0, 0, 1000, (1,)),  # device 0 adds what device 1 sent
        ("add", 1, 1, 1000, (0,)),
    ]
    assert len(stats.steps) == stats.copies + stats.local_copies + stats.kernel_launches


def test_staged_and_ring_calls_record_every_step(backend, clean):
    clean.set("peers", "none")  # every copy staged
    bufs = [backend.allocate(d, 4 * 999) for d in (0, 1, 2)]
    with AllReduce(backend, [0, 1, 2]) as ar:
        stats = ar(bufs, 999, path="bf16")
        stats.wait()
    kinds = [s.op for s in stats.steps]
    assert kinds.count("staged_copy") == stats.staged_copies == stats.copies > 0
    assert kinds.count("fill") == stats.fills
    launches = sum(kinds.count(k) for k in ("compress", "decompress_add", "add"))
    assert launches == stats.kernel_launches
    assert all(all(i < n for i in s.after) for n, s in enumerate(stats.steps))
    # Every accumulation waits for what arrived.
    assert all(s.after for s in stats.steps if s.op == "decompress_add" and s.size < 999)


@pytest.mark.parametrize("peers", ["all", "none"])
def test_each_distinct_step_is_timed_once(backend, clean, peers):
    clean.set("peers", peers)
    bufs = [backend.allocate(d, 4 * 4096) for d in (0, 1)]
    with AllReduce(backend, [0, 1]) as ar:
        stats = ar(bufs, 4096, path="bf16")
        stats.wait()
    times = step_times(backend, stats.steps, reps=2, warmup=0)
    staged = [s for s in stats.steps if s.op == "staged_copy"]
    assert bool(staged) == (peers == "none")
    assert set(times) == {step_key(s) for s in stats.steps} | {download_key(s) for s in staged}
    assert all(len(m.samples_ns) == 2 and m.median_ns > 0 for m in times.values())
    critical = critical_path_of(stats.steps, times)
    assert critical == critical_path_ns(
        stats.steps,
        lambda s: times[step_key(s)].median_ns,
        lambda s: times[download_key(s)].median_ns,
    )
    assert critical >= max(times[step_key(s)].median_ns for s in stats.steps)
