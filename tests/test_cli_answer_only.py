"""``-q`` prints the answer alone: the same first lines as the full output, at most five, no tables."""

from __future__ import annotations

import pytest

from tests.support import sim
from tests.support.cli import run_l0mem

# Each measuring command with a short run on the simulator, and how its answer opens.
RUNS = {
    "p2p": (
        "p2p",
        ["--backend", "l0", "--sizes", "4K", "--reps", "1", "--warmup", "0"],
        3,
        "[SIMULATOR] Direct: ",
    ),
    "allreduce": (
        "allreduce",
        ["--backend", "l0", "--sizes", "16K", "--reps", "1", "--warmup", "0"],
        2,
        "[SIMULATOR] Every sum within its error bound",
    ),
    "bench kernels": (
        "bench",
        ["kernels", "--backend", "l0", "--elements", "4096", "--reps", "1", "--warmup", "0"],
        1,
        "[SIMULATOR] Against a copy of ",
    ),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_quiet_prints_the_answer_the_full_output_opens_with(name: str) -> None:
    command, args, devices, opens = RUNS[name]
    env = sim.sim_env(devices=devices, peers="0>1,1>0") if devices == 3 else sim.sim_env(devices=devices)
    full = run_l0mem(command, args, env, columns=120)
    quiet = run_l0mem(command, [*args, "-q"], env, columns=120)
    assert full.returncode == quiet.returncode == 0, full.stderr + quiet.stderr
    answer = quiet.stdout.rstrip("\n").splitlines()
    assert 1 <= len(answer) <= 5 and answer[0].startswith(opens), quiet.stdout
    assert not any(mark in quiet.stdout for mark in ("┃", "━", "──"))  # no table
    opening, rest = full.stdout.split("\n\n", 1)
    assert opening.startswith(opens) and len(opening.splitlines()) <= 5
    assert "──" in rest or "━" in rest  # the tables follow the answer
