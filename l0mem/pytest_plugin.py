"""l0mem's pytest plugin: hold a test's host cost per GiB of device memory under a limit.

The way ``limit_memory`` holds a test's RSS, for the host memory a driver
takes behind device memory::

    @pytest.mark.limit_host_cost("128 MiB")  # per GiB of device memory
    def test_upload(l0mem_cost):
        held = []
        for _ in range(8):
            with l0mem_cost.step(device_bytes=256 << 20):
                buf = ctx.allocate_device(dev0, 256 << 20)
                ctx.make_resident(dev1, buf)
            held.append(buf)  # keep it: a step's cost is what it holds

Each ``step`` is one window, the host's available memory read right before
and right after it (:func:`l0mem.probe.host_cost`); its ratio is its cost
over the device memory it took (``device_bytes``, else the growth of this
process's DRM VRAM). When the test ends, the plugin takes the median of the
steps' ratios with its distribution-free interval (95% unless
``confidence=`` says otherwise; :func:`l0mem.estimate.median_interval`), so
that another process's memory moving during a few steps cannot decide:

- the whole interval at or under the limit: the test passes;
- the whole interval over it: the test fails, with the median and interval;
- the interval across the limit, or too few steps for the confidence (six
  for 95%): the test fails as undecided, saying what would decide, unless
  the marker says ``undecided="pass"``.

Without the marker the fixture only records: ``l0mem_cost.ratios`` and
``l0mem_cost.interval()`` are there for a test's own assertions.

What it may import: ``l0mem.probe``, ``l0mem.estimate`` and the leaves
(``l0mem.units``), each only when a test uses it: pytest loads this module
in every session of an environment l0mem is installed in.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from l0mem.estimate.order import Interval

MARKER = "limit_host_cost"
MIB, GIB = 1 << 20, 1 << 30
UNDECIDED = ("fail", "pass")


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: the device memory it took and what it cost the host, in bytes."""

    device_bytes: int
    host_bytes: int

    @property
    def ratio(self) -> float:
        """Return the step's host cost in MiB per GiB of device memory."""
        return (self.host_bytes / MIB) / (self.device_bytes / GIB)


class CostSteps:
    """The steps one test measured (the ``l0mem_cost`` fixture)."""

    def __init__(self) -> None:
        """Start with no steps."""
        self.steps: list[Step] = []

    @contextlib.contextmanager
    def step(self, device_bytes: int | None = None) -> Iterator[None]:
        """Measure the ``with`` block as one step taking ``device_bytes`` (else this process's DRM VRAM growth)."""
        if device_bytes is not None and (isinstance(device_bytes, bool) or device_bytes <= 0):
            raise ValueError(
                f"device_bytes must be a positive number of bytes, got {device_bytes!r}"
            )
        from l0mem.probe import host_cost

        with host_cost() as cost:
            yield
        taken = device_bytes if device_bytes is not None else _vram_growth(cost.bytes)
        if taken is None or taken <= 0:
            raise ValueError(
                "no device memory to divide by: give step(device_bytes=...) "
                "(no DRM VRAM of this process grew during the step)"
            )
        if cost.host is None:
            raise RuntimeError("the host's available memory could not be read")
        self.steps.append(Step(taken, cost.host))

    @property
    def ratios(self) -> list[float]:
        """Return each step's host cost in MiB per GiB of device memory."""
        return [s.ratio for s in self.steps]

    def interval(self, confidence: float = 0.95) -> Interval:
        """Return the median ratio (MiB per GiB) with its interval, each step weighted by its device bytes."""
        from l0mem.estimate import median_interval

        if not self.steps:
            raise ValueError("no steps were measured")
        return median_interval(self.ratios, confidence, [s.device_bytes for s in self.steps])


def _vram_growth(costs: dict[str, int]) -> int | None:
    """Return the growth of this process's DRM device memory in bytes, or None where none was read."""
    from l0mem.probe.signals import describe

    grown = [
        v
        for name, v in costs.items()
        if name.startswith("drm.") and name.endswith(".total") and describe(name).side == "device"
    ]
    return sum(grown) if grown else None


@dataclasses.dataclass(frozen=True)
class Limit:
    """A marker's limit: MiB of host memory per GiB of device memory, and how to judge."""

    mib_per_gib: float
    confidence: float = 0.95
    undecided: str = "fail"


def limit_of(mark: pytest.Mark) -> Limit:
    """Return the limit a ``limit_host_cost`` marker sets; raise pytest.UsageError for a bad one."""
    if len(mark.args) != 1 or set(mark.kwargs) - {"confidence", "undecided"}:
        raise pytest.UsageError(
            f"{MARKER} takes one limit and optional confidence= and undecided=: "
            f'@pytest.mark.{MARKER}("128 MiB")'
        )
    (value,) = mark.args
    confidence = mark.kwargs.get("confidence", 0.95)
    undecided = mark.kwargs.get("undecided", "fail")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise pytest.UsageError(
            f"{MARKER}: limit {value!r}: give MiB per GiB or a size like '128 MiB'"
        )
    if isinstance(value, str):
        from l0mem.units import parse_size

        try:
            limit = parse_size(value, minimum=0) / MIB
        except ValueError as exc:
            raise pytest.UsageError(f"{MARKER}: limit {value!r}: {exc}") from None
    else:
        limit = float(value)
    if not limit >= 0 or limit == float("inf"):
        raise pytest.UsageError(f"{MARKER}: limit {value!r} must be a finite size >= 0")
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0 < confidence < 1:
        raise pytest.UsageError(f"{MARKER}: confidence={confidence!r} must lie between 0 and 1")
    if undecided not in UNDECIDED:
        raise pytest.UsageError(f"{MARKER}: undecided={undecided!r}: one of {', '.join(UNDECIDED)}")
    return Limit(limit, confidence, undecided)


def judge(steps: CostSteps, limit: Limit) -> str | None:
    """Return why the steps break ``limit`` (or leave it undecided), or None where they keep it."""
    if not steps.steps:
        return f"{MARKER}: the test measured no step (use l0mem_cost.step() around its allocations)"
    iv = steps.interval(limit.confidence)
    said = (
        f"host cost {iv.median:.0f} MiB per GiB of device memory "
        f"({iv.low:.0f} to {iv.high:.0f} at {iv.coverage:.0%}, {len(steps.steps)} steps)"
    )
    if iv.coverage >= limit.confidence and iv.high <= limit.mib_per_gib:
        return None
    if iv.coverage >= limit.confidence and iv.low > limit.mib_per_gib:
        return f"{said}: over the limit of {limit.mib_per_gib:.0f} MiB per GiB"
    if limit.undecided == "pass":
        return None
    why = (
        f"too few steps for {limit.confidence:.0%}"
        if iv.coverage < limit.confidence
        else f"the interval spans the limit of {limit.mib_per_gib:.0f} MiB per GiB"
    )
    return (
        f"{said}: undecided, {why}; measure more or larger steps, or on a quieter machine "
        f'(undecided="pass" lets such a test pass)'
    )


@pytest.fixture
def l0mem_cost() -> CostSteps:
    """Return the steps of this test's host cost per device GiB (see the l0mem plugin)."""
    return CostSteps()


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(limit, confidence=0.95, undecided='fail'): fail the test where the host "
        "memory its l0mem_cost steps took per GiB of device memory is over the limit",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Check every marker before any test runs: a bad one ends the session with one line."""
    for item in items:
        mark = item.get_closest_marker(MARKER)
        if mark is not None:
            limit_of(mark)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Judge a marked test's steps once its body has run."""
    mark = item.get_closest_marker(MARKER)
    limit = None if mark is None else limit_of(mark)
    result = yield
    if limit is None:
        return result
    steps = getattr(item, "funcargs", {}).get("l0mem_cost")
    if not isinstance(steps, CostSteps):
        pytest.fail(f"{MARKER} needs the l0mem_cost fixture: measure the allocations in its steps")
    why = judge(steps, limit)
    if why is not None:
        pytest.fail(why, pytrace=False)
    return result


__all__ = ["MARKER", "CostSteps", "Limit", "Step", "judge", "l0mem_cost", "limit_of"]
