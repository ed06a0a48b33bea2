"""benchmarks/bench_staging.py end to end: on the simulator with its link model, and its bad input."""

from __future__ import annotations

import pytest

from tests.support import sim

RUN = "import sys; from benchmarks.bench_staging import main; sys.exit(main({args!r}))"


def _run(args: list[str], **config: object):
    return sim.run_python_env(RUN.format(args=args), sim.sim_env(**config), timeout=120)


def test_the_ring_is_held_against_its_legs_and_the_naive_copy():
    args = ["--backend", "l0", "--sizes", "256K", "--chunks", "64K", "--slots", "2,3"]
    proc = _run([*args, "--reps", "2", "--warmup", "1"], devices=2, link_gbps=0.5)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "ring/leg" in out and "a simulator's numbers" in out
    rows = [line.split() for line in proc.stdout.splitlines() if "KiBx" in line]
    assert [r[2] for r in rows] == ["64", "64"] and len(rows) == 2
    for r in rows:
        to_host, from_host, naive, ring, to_leg, to_naive = map(float, r[4:10])
        # The printed ratios are the printed bandwidths' (to their two decimals).
        assert to_leg == pytest.approx(ring / min(to_host, from_host), rel=0.05)
        assert to_naive == pytest.approx(ring / naive, rel=0.1)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slots", "1"], "each slot count must be at least 2"),
        (["--slots", "two"], "expected comma-separated integers"),
        (["--reps", "0"], "must be >= 1"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(args, needle):
    proc = _run(["--backend", "l0", *args], devices=2)
    assert proc.returncode == 2 and needle in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("bench_staging.py: error:")


def test_one_device_is_not_enough():
    proc = _run(["--backend", "l0", "--sizes", "64K"], devices=1)
    assert proc.returncode == 3
    assert proc.stderr.strip() == "bench_staging.py: no Level Zero device 1: this machine has 1 (0..0)"
