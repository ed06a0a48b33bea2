"""How long ``l0mem matrix`` takes over many reports, and its peak memory (goal: 1,000 reports in under 5 s).

    python -m benchmarks.bench_matrix                 # 1000 reports, 3 repeats
    python -m benchmarks.bench_matrix --reports 5000
    python -m benchmarks.bench_matrix --reports 10000 --steps 150  # reports of about 100 KB

The reports are written with l0mem's own writer: each holds two set-ups with
eight steps, on one of 20 driver stacks and 100 machines. The time is the
whole command as a user runs it (reading, validating, analysing, building,
rendering), measured in this run; nothing is compared with a stored number.
The peak memory is the command's largest resident set (``ru_maxrss`` of the
children this benchmark waited for).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.args import positive
from l0mem.audit.report import write_json
from tests.test_analysis import GIB, synthetic_report, synthetic_run

GOAL_S = 5.0


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


def main(argv: list[str] | None = None) -> int:
    """Time ``l0mem matrix`` over generated reports; print the times and the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=positive, default=1000)
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument(
        "--steps", type=positive, default=8, help="steps per set-up (150: reports of about 100 KB)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="l0mem-bench-matrix-") as tmp:
        folder = Path(tmp)
        write_reports(folder, args.reports, args.steps)
        size = sum(p.stat().st_size for p in folder.glob("r*.json")) / args.reports
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "l0mem",
                    "matrix",
                    str(folder),
                    "--json",
                    str(folder / "m.out"),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 6
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    best = min(times)
    print(
        f"l0mem matrix over {args.reports} reports of {size / 1024:.0f} KB: "
        f"{', '.join(f'{t:.2f}' for t in times)} s"
    )
    print(
        f"best {best:.2f} s, {1000 * best / args.reports:.2f} ms per report; goal for 1000: < {GOAL_S:.0f} s"
    )
    print(
        f"peak memory of the command: {peak_mib:.0f} MiB ({peak_mib * 1024 / args.reports:.0f} KiB per report)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
