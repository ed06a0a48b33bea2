"""The safety guard: the audit never lets MemAvailable fall below the floor.

Unit tests of the arithmetic, then the two guards end to end against a
simulated 1:1 mirror: the child refusing the next step, and the parent
stopping a child whose host memory crossed the floor anyway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from l0mem.audit import AuditOptions, Guard, discover, plan_audit, run_audit, run_setup
from l0mem.audit.guard import DEFAULT_FLOOR_MIN, default_floor
from l0mem.probe import MeminfoError, mem_available, read_meminfo
from tests.support.own_memory import LOWEST_KEY, QuietParent, steps_up, use_in_process
from tests.test_audit_runner import (  # noqa: F401  (simulator is a fixture)
    ATTEMPTS,
    GIB,
    MIB,
    disturbed,
    simulator,
    wait_for_quiet,
)


def test_default_floor_is_the_larger_of_2gib_and_a_tenth_of_memtotal() -> None:
    assert default_floor(8 * GIB) == DEFAULT_FLOOR_MIN == 2 * GIB
    assert default_floor(64 * GIB) == int(6.4 * GIB)


def test_refuse_step_assumes_a_full_mirror() -> None:
    guard = Guard(floor_bytes=4 * GIB)
    assert guard.refuse_step(available=6 * GIB, step_bytes=2 * GIB) is None
    why = guard.refuse_step(available=6 * GIB, step_bytes=2 * GIB + 1)
    assert why is not None and "would fall below the floor 4.00 GiB" in why
    half = Guard(floor_bytes=4 * GIB, worst_ratio=0.5)
    assert half.refuse_step(available=6 * GIB, step_bytes=4 * GIB) is None


def test_breached_only_below_the_floor() -> None:
    guard = Guard(floor_bytes=3 * GIB)
    assert guard.breached(3 * GIB) is None
    why = guard.breached(3 * GIB - 1)
    assert why is not None and "fell to" in why


@pytest.mark.parametrize(
    "kwargs",
    [
        {"floor_bytes": -1},
        {"floor_bytes": 1, "worst_ratio": -0.5},
        {"floor_bytes": 1, "grace_s": 0},
    ],
)
def test_guard_rejects_settings_that_disable_it(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Guard(**kwargs)


def test_guard_floor_must_be_bytes() -> None:
    with pytest.raises(TypeError):
        Guard(floor_bytes=2.5)  # type: ignore[arg-type]


def test_meminfo_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(MeminfoError, match="cannot read"):
        read_meminfo(str(tmp_path))
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\n")
    with pytest.raises(MeminfoError, match="no MemAvailable field"):
        read_meminfo(str(tmp_path))
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
    assert mem_available(str(tmp_path)) == 500 * 1024
    assert Guard.for_host(proc_root=str(tmp_path)).floor_bytes == DEFAULT_FLOOR_MIN


def test_child_guard_stops_a_full_mirror_early_with_a_verdict(
    simulator: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The child's guard reads a quiet host that starts from a known MemAvailable
    # and falls by the child's own memory alone: no other process decides when
    # it refuses a step (the guard's real reading is tests/test_probe_live.py's).
    simulator(mirror="all")
    step = 64 * MIB
    start = 64 * GIB
    use_in_process(monkeypatch, "quiet", start=start)
    options = AuditOptions(setups=("l0",), size_bytes=32 * step, steps=32, settle_s=0.0)
    # Room for about ten steps at 1:1 above the floor, against a target of 32.
    QuietParent(start).install(monkeypatch)
    report = run_audit(options, guard=Guard(floor_bytes=start - 10 * step))
    (run,) = report.runs
    assert run.status == "stopped-early"
    assert run.reason is not None
    # The child refused the step itself: nothing was killed, and it freed what it held.
    assert "would fall below the floor" in run.reason
    assert "freed" in run.reason and "killed" not in run.reason
    alloc = steps_up(run.samples)
    assert 3 <= len(alloc) <= 10, [s.device_bytes for s in alloc]
    assert run.samples[-1].phase == "freed"
    # The quiet host never went below the floor, even inside the refused step.
    assert min(s.values[LOWEST_KEY] for s in run.samples) >= start - 10 * step
    assert run.result is not None and run.result.verdict == "mirror", run.reason
    assert not report.complete


def test_parent_stops_a_child_that_crosses_the_floor(
    simulator: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The parent's watchdog reads a host where only its child moves memory:
    # another process freeing or taking memory cannot decide when it fires.
    simulator(mirror="all")
    step = 64 * MIB
    options = AuditOptions(setups=("l0",), size_bytes=32 * step, steps=32, settle_s=0.3)
    (plan,) = plan_audit(options, discover(options), floor_bytes=0)  # the child never refuses
    host = QuietParent().install(monkeypatch)
    guard = Guard(floor_bytes=host.start - 4 * step, grace_s=20.0)
    run = run_setup(plan, guard=guard)
    assert run.status == "stopped-early"
    assert run.reason is not None and run.reason.startswith("safety guard: MemAvailable fell to")
    # SIGTERM, not SIGKILL: the child freed its allocations and reported it.
    assert "freed" in run.reason and "killed" not in run.reason
    allocated = [s.device_bytes for s in steps_up(run.samples)]
    # Four steps of 1:1 mirror reach the floor: the fifth at the latest is stopped.
    assert 1 <= len(allocated) <= 5 and max(allocated) <= 5 * step, allocated
    assert run.samples[-1].phase == "freed"


def _no_child(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record (and refuse) any attempt to start a set-up's child process."""
    from l0mem.audit import execute

    started: list[object] = []
    real = execute.ChildProcess

    def child(python: str, args: list[str], env: dict[str, str], stdin: bytes) -> Any:
        if args[0] != "run":
            return real(python, args, env, stdin)  # device discovery may run
        started.append(args)
        raise AssertionError("a set-up's child started although the guard refuses its first step")

    monkeypatch.setattr(execute, "ChildProcess", child)
    return started


def test_floor_above_available_stops_before_a_child_starts(
    simulator: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    simulator(mirror="all")
    options = AuditOptions(setups=("l0",), size_bytes=256 * MIB, steps=4, settle_s=0.0)
    (plan,) = plan_audit(options, discover(options), floor_bytes=0)
    started = _no_child(monkeypatch)
    host = QuietParent().install(monkeypatch)
    run = run_setup(plan, guard=Guard(floor_bytes=host.start + 4 * GIB))
    assert started == []
    assert run.status == "stopped-early" and run.samples == []
    assert run.reason is not None
    assert run.reason.startswith("safety guard: MemAvailable") and "below the floor" in run.reason
    assert run.reason.endswith("no step was taken") and "killed" not in run.reason
    assert run.simulated is True and run.host_memory is False


def test_audit_with_floor_above_available_is_partial_and_says_why(
    simulator: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    simulator(mirror="all")
    options = AuditOptions(setups=("l0", "l0-dmabuf"), size_bytes=256 * MIB, steps=4)
    host = QuietParent().install(monkeypatch)
    guard = Guard(floor_bytes=host.start + 4 * GIB)
    started = _no_child(monkeypatch)
    report = run_audit(options, guard=guard)
    assert started == [] and not report.complete
    for run in report.runs:
        assert run.status == "stopped-early", run.reason
        assert run.reason is not None and "no step was taken" in run.reason
        assert run.result is not None and run.result.verdict == "inconclusive"
        assert run.result.reason == "no samples were taken while device memory was allocated"


def test_parent_waits_for_the_child_to_be_ready_before_stopping_it(
    simulator: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The floor is crossed from the start, but the parent's own check before
    # starting is bypassed: its watch must not kill a child that cannot yet
    # handle SIGTERM (it holds nothing); it stops it once the child is ready.
    from l0mem.audit import execute

    simulator(mirror="all")
    monkeypatch.setattr(execute, "refused_run", lambda plan, guard: None)
    options = AuditOptions(setups=("l0",), size_bytes=256 * MIB, steps=4, settle_s=0.0)
    (plan,) = plan_audit(options, discover(options), floor_bytes=0)
    host = QuietParent().install(monkeypatch)
    run = run_setup(plan, guard=Guard(floor_bytes=host.start + 4 * GIB))
    assert run.status == "stopped-early", run.reason
    assert run.reason is not None and run.reason.startswith("safety guard: MemAvailable fell to")
    assert "killed" not in run.reason and "freed" in run.reason
