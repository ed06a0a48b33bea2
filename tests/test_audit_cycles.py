"""The audit child on a busy machine: step windows, extra allocate/free cycles, and the budget.

The child runs against a machine made of numbers (tests/test_guard_slope.py's
``Machine`` and ``Mirrored``): every allocation costs its mirror exactly, and
a neighbour that this test controls moves the host's memory in some windows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from l0mem.estimate import Sample, analyze_samples
from tests.test_guard_slope import Machine, Mirrored, run_child_on

MIB = 1 << 20
GIB = 1 << 30
STEP = 64 * MIB


class Neighbour:
    """Another process that takes or gives back 100-900 MiB while some windows are open."""

    def __init__(self, machine: Machine, windows: set[int]) -> None:
        self.machine, self.windows, self.calls = machine, windows, 0
        self.rng = random.Random(7)

    def __call__(self, index: int) -> None:
        # Called at each allocation, inside its window: the neighbour acts then.
        self.calls += 1
        if self.calls in self.windows:
            amount = self.rng.randint(100, 900) * MIB * self.rng.choice((1, -1))
            self.machine.available -= amount


def _run(
    monkeypatch: pytest.MonkeyPatch,
    ratio: float,
    noisy: set[int],
    budget: float,
    steps: int = 8,
) -> tuple[list[Sample], dict[str, Any], float]:
    machine = Machine(100 * GIB)
    exp = Mirrored(machine, ratio, before_step=Neighbour(machine, noisy))
    return _measure(monkeypatch, machine, exp, budget, steps)


def _measure(
    monkeypatch: pytest.MonkeyPatch, machine: Machine, exp: Mirrored, budget: float, steps: int = 8
) -> tuple[list[Sample], dict[str, Any], float]:
    """Run the child on ``exp``; return its samples, its end event and how long it took."""
    spec = {"step_bytes": STEP, "target_bytes": steps * STEP, "budget_s": budget}
    start = time.monotonic()
    events = run_child_on(monkeypatch, machine, exp, spec)
    took = time.monotonic() - start
    samples = [
        Sample.from_dict({k: v for k, v in e.items() if k not in ("event", "unavailable")})
        for e in events
        if e["event"] == "sample"
    ]
    (end,) = [e for e in events if e["event"] == "end"]
    return samples, end, took


def test_a_quiet_machine_needs_no_extra_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    samples, end, _ = _run(monkeypatch, 1.0, set(), budget=30.0)
    assert end["status"] == "ok"
    steps = {s.step for s in samples if s.step is not None}
    assert steps == set(range(1, 17))  # eight windows up, eight down, nothing more
    assert analyze_samples(samples).verdict == "mirror"


def test_disturbed_windows_bring_extra_cycles_until_the_slope_is_precise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Five of the eight steps up are disturbed: eight windows cannot pin the slope.
    samples, end, took = _run(monkeypatch, 1.0, {1, 2, 4, 6, 7}, budget=60.0)
    assert end["status"] == "ok"
    last = max(s.step for s in samples if s.step is not None)
    assert last > 16  # cycles came after the staircase ...
    assert took < 20.0  # ... and stopped once precise, long before the budget
    result = analyze_samples(samples)
    assert result.verdict == "mirror"
    fit = result.fit("meminfo.MemAvailable")
    assert fit is not None and fit.slope == pytest.approx(1024.0, abs=1.0)
    assert fit.uncertainty is not None and fit.uncertainty <= 0.10 * 1024
    assert set(fit.rejected) <= {1, 2, 4, 6, 7} and fit.rejected


def test_a_driver_that_keeps_what_it_mirrored_gets_no_extra_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Frees that give nothing back: every cycle would leave another mirror behind.
    machine = Machine(100 * GIB)

    class Keeps(Mirrored):
        def free_newest(self, count: int) -> tuple[int, int]:
            del self.held[len(self.held) - count :]  # the host's pages stay taken
            return count, 0

    exp = Keeps(machine, 1.0, before_step=Neighbour(machine, {2, 4, 7}))
    spec = {"step_bytes": STEP, "target_bytes": 8 * STEP, "budget_s": 30.0}
    events = run_child_on(monkeypatch, machine, exp, spec)
    steps = [e["step"] for e in events if e["event"] == "sample" and e.get("step")]
    assert max(steps) == 16


def test_without_a_budget_there_is_no_extra_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    samples, end, _ = _run(monkeypatch, 1.0, {2, 4, 7}, budget=0.0)
    assert end["status"] == "ok"
    assert max(s.step for s in samples if s.step is not None) == 16


class PaidLate(Mirrored):
    """A mirror whose host pages follow device memory a sample late: between the windows."""

    def __init__(self, machine: Machine, ratio: float) -> None:
        super().__init__(machine, 0.0)
        self.late, self.charged, self.wait = ratio, 0, 0
        self.sizes: list[int] = []

    def allocate(self, nbytes: int, pattern: bytes, between: Callable[[], None] = lambda: None) -> bool:
        self.sizes.append(nbytes)
        self.wait = 1  # not at the window's own "after" sample
        return super().allocate(nbytes, pattern, between)

    def free_newest(self, count: int) -> tuple[int, int]:
        del self.sizes[len(self.sizes) - count :]
        self.wait = 1
        return super().free_newest(count)

    def device_values(self) -> dict[str, int]:
        if self.wait:
            self.wait -= 1
            return {}
        owed = int(sum(self.sizes) * self.late)
        self.machine.take(owed - self.charged)
        self.charged = owed
        return {}


def test_the_budget_bounds_the_climbs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 1:1 mirror paid between the windows: they say clean, every climb says not,
    # so the child climbs again until the budget is spent, and never says clean.
    machine = Machine(100 * GIB)
    samples, end, took = _measure(monkeypatch, machine, PaidLate(machine, 1.0), budget=1.0)
    assert end["status"] == "ok"
    assert 1.0 <= took < 8.0
    assert max(s.step for s in samples if s.step is not None) >= 3 * 16  # whole climbs again
    result = analyze_samples(samples)
    assert result.verdict == "inconclusive" and result.next_steps is not None
    assert "but the whole climb says not clean" in result.passed_over["meminfo.MemAvailable"]
