"""What the allocation tracer costs a workload: an allocation-heavy loop with and without it.

    python -m benchmarks.bench_trace                 # 20000 iterations, 5 repeats
    python -m benchmarks.bench_trace --iterations 50000 --repeats 7

Runs on the simulated Level Zero driver (tests/simdriver), so the absolute
numbers are the simulator's and Python's (ctypes calls through the loader),
never a hardware result; the difference between the two rows is what the
tracer adds per call (its record write and, for residency, its
zeMemGetAllocProperties). Both modes run in the same invocation, alternating,
each in a fresh child; the best repeat of each counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from l0mem.trace import TraceSession  # noqa: E402
from tests.support import sim  # noqa: E402

LOOP = """
import json, sys, time
from ctypes import byref, c_void_p, c_size_t
sys.path.insert(0, {repo!r})
from tests.simdriver import zeraw
ze = zeraw.Ze()
d0, d1 = ze.devices()[:2]
ctx = ze.context()
n = {iterations}
lib = ze.lib
desc = zeraw.DeviceMemAllocDesc(stype=zeraw.ST_DEVICE_MEM_ALLOC_DESC)
ptr = c_void_p()
t0 = time.perf_counter_ns()
for _ in range(n):
    lib.zeMemAllocDevice(ctx, byref(desc), c_size_t(4096), c_size_t(0), d0, byref(ptr))
    lib.zeMemFree(ctx, ptr)
t1 = time.perf_counter_ns()
keep = ze.alloc_device(ctx, d0, 1 << 20)
p = c_void_p(keep)
size = c_size_t(1 << 20)
t2 = time.perf_counter_ns()
for _ in range(n):
    lib.zeContextMakeMemoryResident(ctx, d1, p, size)
    lib.zeContextEvictMemory(ctx, d1, p, size)
t3 = time.perf_counter_ns()
print(json.dumps({{"alloc_free": (t1 - t0) / n, "resident_evict": (t3 - t2) / n}}))
"""


def run(env: dict[str, str], iterations: int) -> dict[str, float]:
    """Run the loop once in a fresh child under `env`; return ns per pair of calls."""
    code = LOOP.format(repo=str(REPO), iterations=iterations)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench_trace: the loop failed: {proc.stderr.strip()[-500:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    """Measure the loop without and with the tracer and print the cost per call and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.iterations < 1 or args.repeats < 1:
        parser.error("--iterations and --repeats must be at least 1")
    base = sim.sim_env(devices=2, device_memory="4G")
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="l0mem-bench-trace-") as work:
        session = TraceSession(Path(work))
        modes = {"plain": base, "traced": session.environment(base)}
        for _ in range(args.repeats):
            for mode, env in modes.items():
                got = run(env, args.iterations)
                old = best.setdefault(mode, got)
                best[mode] = {k: min(v, old[k]) for k, v in got.items()}
        totals = session.poll()
        session.close()
    calls = sum(totals.calls.values())
    print(f"simulated driver, {args.iterations} iterations, best of {args.repeats} (ns per call)")
    print(f"{'loop':<16}{'plain':>10}{'traced':>10}{'added':>10}{'ratio':>8}")
    for key, label in (("alloc_free", "alloc + free"), ("resident_evict", "resident + evict")):
        plain, traced = best["plain"][key] / 2, best["traced"][key] / 2
        print(
            f"{label:<16}{plain:>10.0f}{traced:>10.0f}{traced - plain:>10.0f}{traced / plain:>8.2f}"
        )
    print(
        f"records read: {calls} calls from {totals.processes} processes, lost {totals.lost_records}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
