"""How long ``l0mem matrix`` takes over many reports, and its peak memory (goal: 1,000 reports in under 5 s).

    python -m benchmarks.bench_matrix                 # 1000 reports, 3 repeats
    python -m benchmarks.bench_matrix --reports 5000

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
from tests.test_analysis import synthetic_report, synthetic_run

GOAL_S = 5.0


def write_reports(folder: Path, count: int) -> None:
    """Write ``count`` reports over 20 stacks and 100 machines into ``folder``."""
    for i in range(count):
        runs = [
            synthetic_run(1.0 if i % 3 else 0.0, setup="l0-peer-resident", seed=i),
            synthetic_run(0.0, setup="l0", seed=i + 1),
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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="l0mem-bench-matrix-") as tmp:
        folder = Path(tmp)
        write_reports(folder, args.reports)
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
    print(f"l0mem matrix over {args.reports} reports: {', '.join(f'{t:.2f}' for t in times)} s")
    print(
        f"best {best:.2f} s, {1000 * best / args.reports:.2f} ms per report; goal for 1000: < {GOAL_S:.0f} s"
    )
    print(
        f"peak memory of the command: {peak_mib:.0f} MiB ({peak_mib * 1024 / args.reports:.0f} KiB per report)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
