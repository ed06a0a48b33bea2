"""The audit's answer: at most five lines that say who is affected, by how much, what to do."""

from __future__ import annotations

import dataclasses
import random

import pytest

from l0mem.audit.analysis import analyze_report
from l0mem.audit.model import SetupRun
from l0mem.cli.audit_answer import MAX_LINES, answer_lines
from tests.test_analysis import synthetic_report, synthetic_run

SETUPS = ("l0", "l0-multi", "l0-peer-resident", "l0-dmabuf", "sycl", "sycl-single")


def _answer(*runs: SetupRun) -> list[str]:
    return answer_lines(analyze_report(synthetic_report(list(runs))))


def test_nothing_affected_says_so_and_names_the_clean_paths() -> None:
    lines = _answer(synthetic_run(0.0, setup="l0"), synthetic_run(0.0, setup="l0-multi", seed=2))
    assert lines == [
        "Not affected: no allocation path took host memory for device memory",
        "Clean: l0, l0-multi",
    ]


def test_a_mirror_comes_first_with_its_slope_and_what_to_do() -> None:
    lines = _answer(
        synthetic_run(0.0, setup="l0"), synthetic_run(1.0, setup="l0-peer-resident", seed=2)
    )
    assert lines[0] == (
        "Affected: host memory taken per GiB of device memory: l0-peer-resident mirror 1024 MiB/GiB"
    )
    assert lines[1] == "Clean: l0"
    assert "--remedies" in lines[2]


def test_a_remedy_that_removed_it_is_named_even_without_its_cost() -> None:
    lines = _answer(
        synthetic_run(1.0, setup="l0-peer-resident"),
        synthetic_run(0.0, setup="l0-peer-resident", remedy="no-defer-backing", seed=2),
    )
    assert lines[-1] == (
        "Removed by: no-defer-backing for l0-peer-resident (its cost to peer copies: not measured)"
    )
    # The remedy's own clean run is a detail, not a clean path.
    assert not any(line.startswith("Clean:") for line in lines)


def test_host_memory_devices_and_simulated_runs() -> None:
    lines = _answer(
        synthetic_run(1.0, setup="sycl", host_memory=True),
        synthetic_run(0.0, setup="l0", simulated=True, seed=2),
    )
    # A CPU device's 1:1 is a positive control: not "affected".
    assert lines[0].startswith("[SIMULATOR] Not affected")
    assert all("sycl" not in line for line in lines)


def test_only_a_cpu_devices_positive_control_is_no_gpu_measured_not_nothing() -> None:
    # No GPU, the SYCL CPU device measured 1:1 as expected: the answer said "Nothing
    # was measured" above a table of two measured set-ups.
    lines = _answer(
        synthetic_run(1.0, setup="sycl", host_memory=True),
        synthetic_run(1.0, setup="l0", status="skipped", reason="no Level Zero driver found"),
    )
    assert lines[0].startswith("No GPU measured: only the positive control"), lines
    assert "(sycl 10" in lines[0] and "MiB/GiB: about 1024 expected there)" in lines[0], lines
    assert lines[0].endswith("below: why the GPU set-ups did not run"), lines
    assert not any("Nothing was measured" in line for line in lines)


def test_what_was_not_decided_is_one_line() -> None:
    lines = _answer(
        synthetic_run(1.0, setup="l0", noise_mib=900.0, seed=4),
        synthetic_run(1.0, setup="l0-multi", status="failed", reason="DEVICE_LOST", steps=2),
    )
    assert lines[-1] == (
        "Not decided: l0 (inconclusive), l0-multi (failed); below: why, and what would decide"
    )
    assert not lines[0].startswith("Not affected")


@pytest.mark.parametrize("seed", range(60))
def test_any_audit_is_answered_in_five_lines_naming_every_path_once(seed: int) -> None:
    rng = random.Random(seed)
    runs = []
    for i, setup in enumerate(rng.sample(SETUPS, rng.randint(1, len(SETUPS)))):
        kind = rng.choice(["clean", "partial", "mirror", "noisy", "failed", "skipped"])
        ratio = {"clean": 0.0, "partial": 0.5}.get(kind, 1.0)
        run = synthetic_run(
            ratio,
            setup=setup,
            seed=i + 1,
            noise_mib=900.0 if kind == "noisy" else 0.0,
            status="failed" if kind == "failed" else "ok",
            steps=2 if kind == "failed" else 8,
            host_memory=setup.startswith("sycl") and rng.random() < 0.5,
        )
        if kind == "skipped":
            run = dataclasses.replace(run, status="skipped", reason="no device", samples=[])
        runs.append(run)
    lines = _answer(*runs)
    assert 1 <= len(lines) <= MAX_LINES
    text = "\n".join(lines)
    # A positive control (a CPU device's 1:1) is named only where no GPU path ran.
    gpu_ran = any(r.status != "skipped" and not r.host_memory for r in runs)
    for run in runs:
        named = sum(f" {run.setup} " in f" {line.replace(',', ' ').replace('(', ' ')} " for line in lines)
        if run.status == "skipped" or (run.host_memory and gpu_ran):
            expected = 0
        elif run.host_memory:
            expected = named  # named when it measured a slope, else not: either is right
            assert named <= 1, (run.setup, text)
        else:
            expected = 1
        assert named == expected, (run.setup, text)


def test_the_mark_of_simulated_numbers_is_on_the_first_line_whatever_it_says() -> None:
    lines = _answer(
        synthetic_run(0.0, setup="l0", simulated=True),
        synthetic_run(1.0, setup="l0-multi", noise_mib=900.0, seed=4, simulated=True),
    )
    assert lines[0] == "[SIMULATOR] Clean: l0"


def test_the_remedy_advised_removed_the_mirror_on_the_set_up_it_names() -> None:
    from l0mem.audit.costs import RemedyCost, remedy_advice

    # X removes l0-multi's mirror but only halves l0-peer-resident's; its cost on
    # l0-peer-resident ranks better (faster copies), yet it is not the advice there.
    runs = [
        synthetic_run(1.0, setup="l0-multi"),
        synthetic_run(0.0, setup="l0-multi", remedy="X", seed=2),
        synthetic_run(1.0, setup="l0-peer-resident", seed=3),
        synthetic_run(0.5, setup="l0-peer-resident", remedy="X", seed=4),
    ]
    env = {"NEOReadDebugKeys": "1"}

    def cost(setup: str, remedy: str | None, gbps: float) -> dict[str, object]:
        return RemedyCost(
            setup, remedy, env if remedy else {}, {"NEOReadDebugKeys": True},
            routes={"0>1": "direct"}, direct_gbps=gbps, copies_ok=True,
        ).to_dict()  # fmt: skip

    report = dataclasses.replace(
        analyze_report(synthetic_report(runs)),
        remedy_costs=[
            cost("l0-multi", None, 20.0),
            cost("l0-multi", "X", 5.0),
            cost("l0-peer-resident", None, 20.0),
            cost("l0-peer-resident", "X", 19.0),
        ],
    )
    advice = remedy_advice(report)
    assert advice is not None and advice.startswith("Use X (NEOReadDebugKeys=1) for l0-multi:"), advice
