"""l0mem's pytest plugin, end to end: a test suite holding its host cost per device GiB under a limit.

Each case writes a small test module that allocates on the simulator (two
devices, mirroring what is made resident on a peer) and runs pytest on it in
a child process on a quiet host (the child's host signals move by its own
memory alone), so that only the plugin's logic decides; ``judge`` is also
held to its interval as a class.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from l0mem.estimate import median_interval
from l0mem.pytest_plugin import CostSteps, Limit, Step, judge
from tests.support import sim
from tests.support.own_memory import host_env

MIB = 1 << 20
NO_CACHE = ("-p", "no:cacheprovider")

HEADER = """
import pytest
from l0mem.core import drivers

STEP = 64 << 20


def _steps(l0mem_cost, n, resident):
    devices = [d for driver in drivers() for d in driver.devices()]
    owner, peer = devices[:2]
    with owner.driver.create_context([owner, peer]) as ctx:
        held = []
        for _ in range(n):
            with l0mem_cost.step(device_bytes=STEP):
                buf = ctx.allocate_device(owner, STEP)
                if resident:
                    ctx.make_resident(peer, buf)
            held.append(buf)
        for buf in held:
            buf.close()
"""


def _pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """Run pytest with l0mem's plugin on a module of HEADER and ``body``; return the finished process."""
    (tmp_path / "test_job.py").write_text(HEADER + textwrap.dedent(body))
    env = host_env(sim.sim_env(devices=2, mirror="peer-resident"), "quiet")
    # Loaded by -p alone: an installed l0mem's entry point would load it a second time.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "l0mem.pytest_plugin", *NO_CACHE, "test_job.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_mirror_over_the_limit_fails_the_test_with_its_cost(tmp_path: Path) -> None:
    proc = _pytest(
        tmp_path,
        """
        @pytest.mark.limit_host_cost("128 MiB")
        def test_upload(l0mem_cost):
            _steps(l0mem_cost, 8, resident=True)
        """,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "host cost 1024 MiB per GiB of device memory" in proc.stdout
    assert "over the limit of 128 MiB per GiB" in proc.stdout


def test_memory_no_peer_holds_keeps_the_limit(tmp_path: Path) -> None:
    proc = _pytest(
        tmp_path,
        """
        @pytest.mark.limit_host_cost(64)
        def test_upload(l0mem_cost):
            _steps(l0mem_cost, 8, resident=False)
            assert all(abs(r) < 16 for r in l0mem_cost.ratios)
        """,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


@pytest.mark.parametrize("undecided", ["fail", "pass"])
def test_too_few_steps_are_undecided_and_fail_unless_told(tmp_path: Path, undecided: str) -> None:
    proc = _pytest(
        tmp_path,
        f"""
        @pytest.mark.limit_host_cost("128 MiB", undecided={undecided!r})
        def test_upload(l0mem_cost):
            _steps(l0mem_cost, 3, resident=True)
        """,
    )
    if undecided == "pass":
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "undecided, too few steps for 95%" in proc.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("", "takes one limit"),
        ('"lots"', "limit 'lots'"),
        ("-5", "must be a finite size >= 0"),
        ('"128 MiB", confidence=2.0', "confidence=2.0 must lie between 0 and 1"),
        ('"128 MiB", undecided="maybe"', "undecided='maybe'"),
        ('"128 MiB", steps=4', "takes one limit"),
    ],
)
def test_a_bad_marker_is_one_clear_line(tmp_path: Path, args: str, said: str) -> None:
    proc = _pytest(
        tmp_path,
        f"""
        @pytest.mark.limit_host_cost({args})
        def test_upload(l0mem_cost):
            pass
        """,
    )
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    errors = [ln for ln in out.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: limit_host_cost"), out
    assert said in errors[0] and "Traceback" not in out


def test_a_marked_test_without_the_fixture_or_steps_fails_saying_so(tmp_path: Path) -> None:
    proc = _pytest(
        tmp_path,
        """
        @pytest.mark.limit_host_cost("128 MiB")
        def test_nothing():
            pass

        @pytest.mark.limit_host_cost("128 MiB")
        def test_no_steps(l0mem_cost):
            pass
        """,
    )
    assert proc.returncode == 1
    assert "needs the l0mem_cost fixture" in proc.stdout
    assert "the test measured no step" in proc.stdout


@pytest.mark.parametrize("seed", range(200))
def test_judge_passes_only_below_and_fails_only_above_the_whole_interval(seed: int) -> None:
    rng = random.Random(seed)
    steps = CostSteps()
    truth = rng.choice([0.0, 100.0, 512.0, 1024.0])
    for _ in range(rng.randint(1, 16)):
        device = rng.choice([64, 128, 256]) * MIB
        noisy = rng.random() < 0.3
        ratio = truth + (rng.uniform(-3000, 3000) if noisy else rng.uniform(-5, 5))
        steps.steps.append(Step(device, int(ratio * device / 1024)))
    limit = Limit(rng.choice([50.0, 128.0, 600.0, 2000.0]), undecided=rng.choice(["fail", "pass"]))
    iv = median_interval(steps.ratios, 0.95, [s.device_bytes for s in steps.steps])
    why = judge(steps, limit)
    decided = iv.coverage >= 0.95
    if why is None:
        assert (decided and iv.high <= limit.mib_per_gib) or limit.undecided == "pass"
        assert not (decided and iv.low > limit.mib_per_gib)
    elif "over the limit" in why:
        assert decided and iv.low > limit.mib_per_gib
    else:
        assert "undecided" in why and limit.undecided == "fail"
        assert not decided or iv.low <= limit.mib_per_gib < iv.high


def test_a_step_needs_device_memory_to_divide_by() -> None:
    steps = CostSteps()
    with pytest.raises(ValueError, match="positive number of bytes"), steps.step(device_bytes=0):
        pass
    with pytest.raises(ValueError, match="give step"), steps.step():
        pass  # no DRM VRAM of this process grew
    assert steps.steps == []
