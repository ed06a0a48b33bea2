"""How long ``l0mem matrix`` takes over many reports, and its peak memory (goals: under 300 MiB, time linear in the count).

    python -m benchmarks.bench_matrix                 # 1000 reports, 3 repeats
    python -m benchmarks.bench_matrix --reports 5000
    python -m benchmarks.bench_matrix --reports 10000 --steps 150  # reports of about 100 KB
    python -m benchmarks.bench_matrix --reports 1000,10000 --steps 150 --repeats 1

The reports are written with l0mem's own writer: each holds two set-ups with
eight steps, on one of 20 driver stacks and 100 machines. The time is the
whole command as a user runs it (reading, validating, analysing, building,
rendering), measured in this run; nothing is compared with a stored number.
The peak memory is the command's largest resident set (``ru_maxrss`` of
each run, from ``wait4``). With several counts, the time per report of the
largest is held against that of the smallest (at most 3x).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.args import positive
from l0mem.audit.report import write_json
from tests.test_analysis import GIB, synthetic_report, synthetic_run

# The goals: memory bounded whatever the count, time linear in it.
GOAL_MIB = 300
GOAL_RATIO = 3.0


def write_reports(folder: Path, count: int, steps: int = 8) -> None:
    """Write ``count`` reports over 20 stacks and 100 machines into ``folder``, ``steps`` steps a set-up."""
    step = 4 * GIB // steps  # 4 GiB a set-up, whatever the steps
    for i in range(count):
        runs = [
            synthetic_run(
                1.0 if i % 3 else 0.0,
                setup="l0-peer-resident",
                seed=i,
                steps=steps,
                step_bytes=step,
            ),
            synthetic_run(0.0, setup="l0", seed=i + 1, steps=steps, step_bytes=step),
        ]
        report = dataclasses.replace(
            synthetic_report(runs, analysed=False),
            fingerprint={
                "simulated": False,
                "host": {"kernel_release": "6.8.0", "machine_id": f"m{i % 100}"},
                "compute_runtime": {"driver_versions": [f"26.{i % 20:02d}.1"]},
                "environment": {},
            },
        )
        write_json(report, folder / f"r{i:05d}.json")


def time_matrix(folder: Path) -> tuple[float, float, str]:
    """Return one ``l0mem matrix`` over ``folder``: seconds, its peak resident MiB, stderr where it failed."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", "matrix", str(folder), "--json", str(folder / "m.out")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    took = time.perf_counter() - start
    return took, usage.ru_maxrss / 1024, err if proc.returncode != 0 else ""  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    """Time ``l0mem matrix`` over generated reports; print the times, the memory and the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reports",
        type=str,
        default="1000",
        help="how many reports; several, comma-separated (1000,10000), compares the time per report",
    )
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument(
        "--steps", type=positive, default=8, help="steps per set-up (150: reports of about 100 KB)"
    )
    args = parser.parse_args(argv)
    try:
        counts = [positive(c) for c in args.reports.split(",")]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--reports: {exc}")
    per_report: dict[int, float] = {}
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="l0mem-bench-matrix-") as tmp:
            folder = Path(tmp)
            write_reports(folder, count, args.steps)
            size = sum(p.stat().st_size for p in folder.glob("r*.json")) / count
            runs = [time_matrix(folder) for _ in range(args.repeats)]
        failed = next((err for _, _, err in runs if err), "")
        if failed:
            print(failed, file=sys.stderr)
            return 6
        best = min(t for t, _, _ in runs)
        peak = max(m for _, m, _ in runs)
        per_report[count] = best / count
        print(
            f"l0mem matrix over {count} reports of {size / 1024:.0f} KB: "
            f"{', '.join(f'{t:.2f}' for t, _, _ in runs)} s; best {best:.2f} s, "
            f"{1000 * best / count:.2f} ms per report; peak memory {peak:.0f} MiB "
            f"(goal: under {GOAL_MIB} MiB: {'met' if peak < GOAL_MIB else 'MISSED'})"
        )
    if len(counts) > 1:
        least, most = min(counts), max(counts)
        ratio = per_report[most] / per_report[least]
        print(
            f"time per report, {most} against {least}: {ratio:.2f}x "
            f"(goal: at most {GOAL_RATIO:.0f}x: {'met' if ratio <= GOAL_RATIO else 'MISSED'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
