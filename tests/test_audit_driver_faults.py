"""A driver that hangs or aborts in a later call of the audit: a line, exit 6 and the report.

The simulator hangs or aborts in ``zeMemAllocDevice`` or ``zeMemFree`` where
ZESIM_HANG_IN / ZESIM_ABORT_IN say (tests/simdriver/README.md). Each set-up
runs in a child process, so the audit goes on: a crash ends the set-up
``failed`` with the signal named; a hang is found by the child's silence
(``$L0MEM_DRIVER_TIMEOUT`` plus the settle time) and the child is killed. A
verdict taken before the fault stands (the allocation side was measured),
and the answer's first lines say how the set-up ended.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import sim
from tests.support.cli import run_l0mem
from tests.support.own_memory import host_env

TIMEOUT_S = 1.5


def _audit(tmp_path: Path, **faults: str) -> tuple[int, dict[str, object], str, float]:
    report = tmp_path / "audit.json"
    env = sim.sim_env(devices=2)
    env.update({f"ZESIM_{k.upper()}": v for k, v in faults.items()})
    env["L0MEM_DRIVER_TIMEOUT"] = str(TIMEOUT_S)
    started = time.monotonic()
    proc = run_l0mem(
        "audit",
        ["--setups", "l0", "--size", "64MiB", "--json", str(report)],
        host_env(env),  # the verdict before the fault: no other process may move it
        timeout=120,
    )
    took = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(report.read_text()), proc.stdout, took


@pytest.mark.parametrize("point", ["alloc", "free"])
def test_a_driver_that_hangs_in_a_later_call_fails_its_set_up_in_bounded_time(
    tmp_path: Path, point: str
) -> None:
    code, data, out, took = _audit(tmp_path, hang_in=point)
    assert code == 6, out
    run = data["runs"][0]  # type: ignore[index]
    assert run["status"] == "failed"
    assert "did not return" in run["reason"] and "L0MEM_DRIVER_TIMEOUT" in run["reason"]
    # The silence, then the grace period a stop gets before SIGKILL: bounded.
    assert took < 60, took
    if point == "free":  # all eight steps were measured before the free hung
        assert run["result"]["verdict"] == "clean"
        assert "Ended early after deciding: l0 (failed)" in out.splitlines()[2]


@pytest.mark.parametrize("point", ["alloc", "free"])
def test_a_driver_that_aborts_in_a_later_call_fails_its_set_up_with_the_signal(
    tmp_path: Path, point: str
) -> None:
    code, data, out, _ = _audit(tmp_path, abort_in=point)
    assert code == 6, out
    run = data["runs"][0]  # type: ignore[index]
    assert run["status"] == "failed"
    assert "SIGABRT" in run["reason"] and f"aborting in {point}" in run["reason"]
    first = out.splitlines()[0]
    if point == "alloc":
        assert "Not decided: l0 (failed)" in first
    else:
        assert "Not affected" in first and "Ended early after deciding" in out


@pytest.mark.parametrize(
    "call", ["zeMemAllocDevice", "zeCommandListAppendMemoryFill", "zeEventHostSynchronize"]
)
def test_a_device_lost_in_a_set_up_is_named_at_the_call_it_was_lost_in(
    tmp_path: Path, call: str
) -> None:
    # Every lost device read "freeing device memory failed: ... zeEventCreate" (the
    # free's own first call, failing after the loss), and its error came twice.
    code, data, _, _ = _audit(tmp_path, device_lost_on=call)
    assert code == 6
    run = data["runs"][0]  # type: ignore[index]
    assert run["status"] == "failed"
    reason = str(run["reason"])
    assert call in reason.split(";")[0], reason
    assert not reason.startswith("freeing device memory failed"), reason
    assert reason.count("freeing failed") <= 1, reason
