"""The guard holds the floor whatever the mirror's ratio: each step is predicted from the slope.

First the child's allocation loop against a machine made of numbers (a fake
MemAvailable that every allocation lowers by its mirror, exactly), where the
floor must hold to the byte for any ratio, also when the room above it is
less than the first step's mirror (nothing is measured before it). Then the
same against the simulator at 1:1 to 64:1, on a quiet host
(tests/support/own_memory.py): the child's samples and its guard's reads of
MemAvailable move with its own memory alone, so other processes cannot
change the answer and each run is judged once, exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from l0mem.audit import AuditOptions, Guard, discover, plan_audit, run_setup, stepping
from l0mem.audit import child as audit_child
from l0mem.audit.guard import measured_slope
from l0mem.probe import Snapshot
from tests.support import own_memory, sim

MIB = 1 << 20
GIB = 1 << 30


# ------------------------------------------------------------- the arithmetic


def test_the_slope_is_host_bytes_lost_per_device_byte() -> None:
    assert measured_slope(10 * GIB, 9 * GIB, 512 * MIB) == 2.0
    assert measured_slope(10 * GIB, 10 * GIB, 0) is None  # nothing allocated yet
    assert measured_slope(10 * GIB, 11 * GIB, GIB) == 0.0  # memory came back: no credit


def test_a_step_is_predicted_from_the_slope_never_below_one_to_one() -> None:
    guard = Guard(floor_bytes=4 * GIB)
    # 3.5:1 measured: a 512 MiB step costs 1.75 GiB, which still fits above the floor.
    assert guard.refuse_step(6 * GIB, 512 * MIB, slope=3.5) is None
    why = guard.refuse_step(6 * GIB, 512 * MIB, slope=4.5)
    assert why is not None
    assert "minus the next step 2.25 GiB (predicted 4.50:1 from the slope measured so far)" in why
    # A slope below 1:1 (memory the mirror has not taken yet) is never trusted.
    assert guard.refuse_step(6 * GIB, 2 * GIB, slope=0.2) is None
    why = guard.refuse_step(6 * GIB, 2 * GIB + 1, slope=0.2)
    assert why is not None and "(assumed mirrored 1:1)" in why


# ------------------------------------------- the child against a made-up machine


class Machine:
    """Host memory as numbers: what is available, and the lowest it ever was."""

    def __init__(self, available: int) -> None:
        self.available = available
        self.lowest = available

    def take(self, nbytes: int) -> None:
        self.available -= nbytes
        self.lowest = min(self.lowest, self.available)

    def give(self, nbytes: int) -> None:
        self.available += nbytes


class Mirrored:
    """An experiment whose every allocation costs ``ratio`` host bytes per byte.

    The mirror is taken in ``calls`` equal parts, one per driver call (one:
    at allocation, as the simulator's ``mirror=all``; more: one per peer the
    allocation is made resident on), with the child's checkpoint between them.
    ``before_step`` runs at the first call of every step (another process).
    """

    def __init__(
        self,
        machine: Machine,
        ratio: float,
        calls: int = 1,
        before_step: Callable[[int], None] = lambda step: None,
    ) -> None:
        self.machine, self.ratio, self.calls, self.before_step = machine, ratio, calls, before_step
        self.devices: list[dict[str, Any]] = [{"backend": "l0", "index": 0}]
        self.note = None
        self.max_alloc = 1 << 62
        self.held: list[int] = []  # host bytes each allocation holds

    def allocate(
        self, nbytes: int, pattern: bytes, between: Callable[[], None] = lambda: None
    ) -> bool:
        self.before_step(len(self.held))
        self.held.append(0)
        part = int(nbytes * self.ratio) // self.calls
        for call in range(self.calls):
            self.machine.take(part)
            self.held[-1] += part
            if call < self.calls - 1:
                between()
        return True

    def free_all(self) -> tuple[int, int]:
        return self.free_newest(len(self.held))

    def free_newest(self, count: int) -> tuple[int, int]:
        gone = self.held[len(self.held) - count :]
        del self.held[len(self.held) - count :]
        self.machine.give(sum(gone))
        return count, 0

    def device_values(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        pass


def run_child_on(
    monkeypatch: pytest.MonkeyPatch, machine: Machine, exp: Mirrored, spec: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run the child's loop on ``exp`` with ``machine``'s MemAvailable; return its events."""
    from l0mem import probe
    from l0mem.audit import experiment

    monkeypatch.setattr(stepping.Stop, "signum", None)
    monkeypatch.setattr(stepping, "mem_available", lambda: machine.available)
    monkeypatch.setattr(
        probe,
        "take_snapshot",
        lambda extra=None: Snapshot(0.0, {"meminfo.MemAvailable": machine.available}),
    )
    monkeypatch.setattr(experiment, "open_experiment", lambda spec: exp)
    base = {
        "floor_bytes": 0,
        "fill_pattern": "00000000",
        "settle_s": 0.0,
        "idle_samples": 2,
        "freed_samples": 1,
    }
    events: list[dict[str, Any]] = []
    emit = lambda event, **fields: events.append({"event": event, **fields})  # noqa: E731
    assert audit_child.run({**base, **spec}, emit) == 0
    return events


def _run_child(
    monkeypatch: pytest.MonkeyPatch, machine: Machine, exp: Mirrored, floor: int, step: int
) -> dict[str, Any]:
    """Run the child's loop of 256 steps on ``exp``; return its end event and samples."""
    spec = {"floor_bytes": floor, "step_bytes": step, "target_bytes": 256 * step}
    events = run_child_on(monkeypatch, machine, exp, spec)
    samples = [e for e in events if e["event"] == "sample"]
    (end,) = [e for e in events if e["event"] == "end"]
    # One sample ends each step up: the "after" edge of a window that allocated.
    grown = [s for s in samples if s.get("edge") == "after" and s["phase"] == "alloc"]
    return {"end": end, "alloc": grown}


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.5, 8.0, 64.0])
def test_the_child_takes_every_step_that_fits_and_none_that_does_not(
    monkeypatch: pytest.MonkeyPatch, ratio: float
) -> None:
    step = 16 * MIB
    # Room for the first step (assumed 1:1, as nothing is measured yet) at any
    # ratio, and a whole number of steps at none but 1:1: the last step that
    # fits leaves less than one more below it.
    room = 1500 * MIB
    machine = Machine(100 * GIB)
    floor = machine.available - room
    got = _run_child(monkeypatch, machine, Mirrored(machine, ratio), floor, step)
    cost = int(step * ratio)
    assert machine.lowest >= floor  # to the byte
    # Every step that fits was taken: the guard is not timid either.
    assert len(got["alloc"]) == room // cost
    assert got["end"]["status"] == "stopped-early"
    assert "would fall below the floor" in got["end"]["reason"]
    assert machine.available == 100 * GIB  # everything given back


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.5, 8.0, 64.0])
def test_the_first_step_holds_the_floor_when_the_room_is_less_than_its_mirror(
    monkeypatch: pytest.MonkeyPatch, ratio: float
) -> None:
    # 600 MiB above the floor, 512 MiB steps: the first step fits at 1:1 but not
    # mirrored 2:1 or more, and nothing is measured before it. Its first
    # allocation is 8 MiB (600 MiB over MAX_RATIO, 64, in whole 2 MiB): at most
    # 512 MiB of host memory even at 64:1. Its slope predicts the other 504 MiB.
    step, room = 512 * MIB, 600 * MIB
    machine = Machine(100 * GIB)
    floor = machine.available - room
    exp = Mirrored(machine, ratio)
    got = _run_child(monkeypatch, machine, exp, floor, step)
    assert machine.lowest >= floor  # to the byte
    assert machine.lowest == floor + room - int(ratio * (step if ratio == 1 else 8 * MIB))
    # At 1:1 the step fits and is taken (one sample); at any other ratio the
    # rest of it is refused, and the broken-off step has no sample.
    assert len(got["alloc"]) == (1 if ratio == 1 else 0)
    assert got["end"]["status"] == "stopped-early"
    reason = got["end"]["reason"]
    assert reason.startswith("safety guard: MemAvailable")
    assert "would fall below the floor" in reason
    if ratio > 1:
        assert f"(predicted {ratio:.2f}:1 from the slope measured so far)" in reason
    assert machine.available == 100 * GIB  # everything given back


def test_no_room_for_one_allocation_at_the_largest_ratio_stops_before_any(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 100 MiB above the floor: a 64 MiB step fits at 1:1, but not even one 2 MiB
    # allocation (the step alignment) fits at 64:1 before a slope is measured.
    machine = Machine(100 * GIB)
    floor = machine.available - 100 * MIB
    got = _run_child(monkeypatch, machine, Mirrored(machine, 1.0), floor, 64 * MIB)
    assert machine.lowest == 100 * GIB  # nothing was allocated
    assert got["alloc"] == []
    assert got["end"]["status"] == "stopped-early"
    assert got["end"]["reason"] == (
        "safety guard: MemAvailable 100.00 GiB minus 128 MiB (the smallest allocation, "
        "2 MiB, assumed mirrored 64:1 as no slope is measured yet) would fall below the "
        "floor 99.90 GiB"
    )


def test_a_step_stops_between_driver_calls_when_the_floor_is_crossed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Four peers, one 1:1 mirror each, taken one residency call at a time (64 MiB
    # each for a 64 MiB step). The 4 GiB above the floor let the first step go in
    # one allocation (64 MiB at up to MAX_RATIO, 64:1). Three steps cost 768 MiB
    # of them; the guard then lets the fourth go (predicted 256 MiB), and another
    # process takes 3200 MiB as it starts, leaving 128 MiB. The step's third call
    # crosses the floor: the child stops there, one call's share below it, not
    # at the step's end.
    step = 64 * MIB
    machine = Machine(100 * GIB)
    floor = machine.available - 4 * GIB
    other = 3200 * MIB

    def neighbour(index: int) -> None:
        if index == 3:
            machine.take(other)

    exp = Mirrored(machine, 4.0, calls=4, before_step=neighbour)
    got = _run_child(monkeypatch, machine, exp, floor, step)
    assert got["end"]["status"] == "stopped-early"
    assert got["end"]["reason"].startswith("safety guard: MemAvailable fell to")
    assert len(got["alloc"]) == 3  # the broken-off step has no sample
    assert machine.lowest == floor - step
    assert machine.available == 100 * GIB - other  # all the child's memory given back


# ------------------------------------------------------ the child on the simulator

STEP = 128 * MIB
STEPS = 32
# The floor lies this far below MemAvailable at the start. Not a whole number of
# 2 MiB steps at 64:1 (nor of any ratio's step cost), so the child's own RSS
# moving by a few KiB cannot decide the answer.
MARGIN = 1500 * MIB
# How far the child's own RSS (Python's heap, counted as its own memory) may
# move the room it had, in the count of steps it should have taken.
RSS_ALLOWANCE = 16 * MIB


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.5, 64.0])
def test_the_floor_holds_against_a_simulated_mirror_of_any_ratio(
    monkeypatch: pytest.MonkeyPatch, ratio: float
) -> None:
    # The child runs on a quiet host (tests/support/own_memory.py): its samples and
    # the MemAvailable its guard reads move with its own memory alone (the
    # simulator's mirror, counted by the kernel, plus its RSS), so whether the
    # guard stopped before that crossed the floor is answered exactly, whatever
    # other processes do. The parent's watch sees the host as it was at the start:
    # it must not stop the child here (its own stop is tested in test_guard.py).
    from l0mem.audit import execute

    sim.use_in_process(monkeypatch, mirror="all", mirror_ratio=ratio, devices=1)
    # The quiet host starts from a known MemAvailable, the parent's as the child's:
    # another process moving the real one between the two first reads cannot
    # shift the floor against the child's room.
    start = 64 * GIB
    own_memory.use_in_process(monkeypatch, "quiet", start=start)
    options = AuditOptions(setups=("l0",), size_bytes=STEPS * STEP, steps=STEPS, settle_s=0.0)
    inventory = discover(options)
    monkeypatch.setattr(execute, "mem_available", lambda: start)
    floor = start - MARGIN
    (plan,) = plan_audit(options, inventory, floor)
    assert plan.step_bytes == STEP
    run = run_setup(plan, guard=Guard(floor_bytes=floor))
    # The child refused a step itself: the guard's prediction, not a breach.
    assert run.status == "stopped-early", run.reason
    assert run.reason is not None and run.reason.startswith("safety guard: MemAvailable")
    assert "would fall below the floor" in run.reason and "killed" not in run.reason
    own_memory.assert_mirrored(run, ratio)  # exactly ratio x each step's bytes, all freed
    # The floor held, to the byte, at every read the child took: its samples and
    # its guard's reads after every allocation (a broken-off step has no sample).
    lowest = run.samples[-1].values[own_memory.LOWEST_KEY]
    assert lowest >= floor, (lowest, floor)
    # And the guard was not timid: every whole step that fitted the child's own
    # room was taken (at 64:1 none: its first allocation measured the slope and
    # the rest of the first step was refused).
    room = run.samples[0].values["meminfo.MemAvailable"] - floor
    cost = int(ratio * STEP)
    alloc = [s for s in run.samples if s.phase == "alloc" and s.edge == "after"]
    assert (room - RSS_ALLOWANCE) // cost <= len(alloc) <= room // cost, (room, len(alloc))
    if ratio > 1:
        found = re.search(r"predicted (\d+\.\d+):1 from the slope measured so far", run.reason)
        assert found is not None, run.reason
        assert abs(float(found[1]) - ratio) <= 0.05, run.reason
    assert run.samples[-1].phase == "freed"


# ------------------------------------------------------- --floor 0 needs --no-floor


def _audit_options(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[Any, list[Any]]:
    """Invoke ``l0mem audit ARGS`` with the run replaced; return the result and its options."""
    from click.testing import CliRunner

    import l0mem.cli.audit as cli_audit

    seen: list[Any] = []

    def run_audit(options: Any, **kwargs: Any) -> Any:
        seen.append(options)
        raise RuntimeError("stop here: the options are what this test reads")

    monkeypatch.setattr(cli_audit, "run_audit", run_audit)
    return CliRunner().invoke(cli_audit.audit, args), seen


@pytest.mark.parametrize("floor", ["0", "0%", "0MiB"])
def test_floor_zero_without_no_floor_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, floor: str
) -> None:
    result, seen = _audit_options(monkeypatch, ["--floor", floor])
    assert result.exit_code == 2, result.output
    assert result.output == (
        "l0mem audit: error: --floor 0 turns the safety guard off: add --no-floor to accept "
        "that the audit may take this machine out of memory\n"
    )
    assert seen == []


def test_no_floor_is_the_explicit_way_to_floor_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    for args in (["--no-floor"], ["--no-floor", "--floor", "0"]):
        result, seen = _audit_options(monkeypatch, args)
        assert isinstance(result.exception, RuntimeError), result.output
        assert [o.floor_bytes for o in seen] == [0]
    result, seen = _audit_options(monkeypatch, ["--no-floor", "--floor", "1GiB"])
    assert result.exit_code == 2 and seen == []
    assert result.output == (
        "l0mem audit: error: --no-floor and a --floor above 0 contradict each other: "
        "give one of them\n"
    )
    result, seen = _audit_options(monkeypatch, ["--floor", "64MiB"])
    assert [o.floor_bytes for o in seen] == [64 << 20]


@pytest.mark.parametrize("floor", ["1", "4096", "63MiB"])
def test_a_floor_too_small_to_protect_anything_is_a_forgotten_unit(
    monkeypatch: pytest.MonkeyPatch, floor: str
) -> None:
    # "--floor 1" is one byte, practically no floor: the user meant 1G.
    result, seen = _audit_options(monkeypatch, ["--floor", floor])
    assert result.exit_code == 2 and seen == [], result.output
    assert result.output.startswith("l0mem audit: error: a --floor of ")
    assert "protects nothing" in result.output and "--no-floor" in result.output
    assert result.output.count("\n") == 1
