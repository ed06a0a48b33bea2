"""Command lists, queues, fences, events and timestamps on NEO without hardware."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance import neo


@pytest.fixture(
    scope="module",
    params=[{}, neo.CPU_COPIES, neo.VALIDATION],
    ids=["plain", "cpu-copies", "validation"],
)
def commands(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The commands probe's facts under each set of keys."""
    return neo.probe("commands", neo.env("bmg", **request.param))


def test_lists_queues_and_fences_complete(commands: dict[str, Any]) -> None:
    assert commands["fence_wait"] and commands["fence_query"]
    assert commands["queue_sync"] and commands["second_fence_wait"]
    assert commands["immediate_barrier"]


def test_host_signal_and_reset_of_an_event(commands: dict[str, Any]) -> None:
    assert commands["fresh_query"] is False
    assert commands["host_signal_query"] is True
    assert commands["host_reset_query"] is False


def test_fact_events_succeed_on_host_synchronize_but_query_not_ready(
    commands: dict[str, Any],
) -> None:
    # What the mode does: a wait returns at once, even for an event nothing signals.
    assert commands["fresh_wait_0"] is True
    assert commands["event_wait"] is True and commands["event_query"] is False
    assert commands["kernel_timestamp"]["error"] == "NotReadyError"


def test_l0mem_gives_no_device_time_and_falls_back_to_the_host_clock(
    commands: dict[str, Any],
) -> None:
    # The core event says NOT_READY (its caller decides); the backend and the
    # timing routine turn it into "no device timing", never a crash or a number.
    assert commands["duration_ns"]["error"] == "NotReadyError"
    assert commands["backend_elapsed_ns"] is None
    m = commands["measurement"]
    assert m["timing"] == "host" and m["samples"] == 2
    assert "no device timing" in m["note"]


def test_backend_says_no_hardware(commands: dict[str, Any]) -> None:
    reason = commands["backend_no_hardware"]
    assert reason and "SetCommandStreamReceiver=1" in reason and "no GPU executes" in reason
