"""The audit's error line carries its first reason, so -q (no tables above it) still says why.

"every set-up was skipped", "set-up(s) failed" and "no set-up measured a
single step" name the first set-up and its reason, and how many more the
report holds. A --size past the device's free memory is the device's limit
and said so (the host floor's refusal of a first step named the wrong one).
"""

from __future__ import annotations

from tests.support import sim
from tests.support.cli import run_l0mem
from tests.support.own_memory import host_env


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("l0mem audit: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_size_past_the_devices_memory_is_the_devices_limit_said_under_quiet() -> None:
    proc = run_l0mem(
        "audit", ["-q", "--size", "4000T", "--setups", "l0,l0-multi"], host_env(sim.sim_env())
    )
    assert proc.returncode == 3, proc.stderr
    line = _error_line(proc.stderr)
    assert "every set-up was skipped: l0: --size" in line
    assert "more than the device's free memory" in line and "1 more in the report" in line
    assert "floor" not in line


def test_a_failed_set_up_is_named_with_its_reason_under_quiet() -> None:
    env = {**sim.sim_env(), "ZESIM_ABORT_IN": "alloc"}
    proc = run_l0mem("audit", ["-q", "--size", "64M", "--setups", "l0"], host_env(env))
    assert proc.returncode == 6, proc.stderr
    line = _error_line(proc.stderr)
    assert "set-up(s) failed: l0: the child ended without a result (killed by SIGABRT)" in line
