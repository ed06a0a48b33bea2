"""l0mem.core against C: the same Level Zero calls through the same loader, in one run.

    python -m benchmarks.bench_core                  # 20000 iterations, 5 repeats
    python -m benchmarks.bench_core --iterations 50000 --repeats 7

Builds ``benchmarks/c_reference.c`` with the system C compiler against the
Level Zero loader (``-lze_loader``, from libze-dev), then runs it and the same
operations through :mod:`l0mem.core` in fresh child processes, alternating,
on the simulated driver (tests/simdriver). The best repeat of each side counts;
the ratio is l0mem's time over C's. ``floor`` is what the same number of bare
ctypes calls costs (the ``status`` row's time per call): no binding through
ctypes can go below it. The figures are the simulator's and Python's, never a
hardware result. The goal (issue 24) is a ratio of at most 3 for every row but
``status``, the bare ctypes call that shows the binding's own cost (its goal:
at most 2 us).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.args import positive  # noqa: E402
from tests.support import sim  # noqa: E402

SOURCE = Path(__file__).with_name("c_reference.c")
SPIRV = REPO / "l0mem" / "_spirv" / "l0mem_kernels.spv"
BUILD = REPO / "build" / "bench_core"
NBYTES = 4096
GOAL = 3.0
# Each row: its label and how many C calls one operation makes (both sides make the same).
ROWS = {
    "status": ("zeDeviceGetStatus (binding)", 1),
    "alloc_free": ("allocate_device + close", 2),
    "copy": ("copy 4 KiB (sync)", 3),
    "fill": ("fill 4 KiB (sync)", 3),
    "event_create": ("event + close", 2),
    "event_signal": ("signal + wait + reset", 3),
    "launch": ("launch (sync)", 3),
}


def build_reference() -> Path:
    """Compile the C reference once per source (cached under build/bench_core)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-15")
    if cc is None:
        raise SystemExit("bench_core: no C compiler (cc, gcc or clang-15) on PATH")
    source = SOURCE.read_bytes()
    target = BUILD / hashlib.sha256(source).hexdigest()[:16] / "c_reference"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        cmd = [cc, "-O2", "-Wall", "-Werror", "-o", str(target), str(SOURCE), "-lze_loader"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"bench_core: building the C reference failed:\n{proc.stderr}")
    return target


def python_loops(iterations: int) -> dict[str, float]:
    """Time each operation through l0mem.core in this process; return ns per operation."""
    from l0mem import core
    from l0mem._ze import api
    from l0mem.backends.kernels import spirv_bytes

    driver = core.drivers()[0]
    dev = driver.devices()[0]
    ctx = driver.create_context(driver.devices())
    cl = ctx.immediate_command_list(dev)
    pool = ctx.event_pool(2)
    ev = pool.event(1)
    src = ctx.allocate_device(dev, NBYTES)
    dst = ctx.allocate_device(dev, NBYTES)
    kernel = ctx.create_module(dev, spirv_bytes()).kernel("l0mem_f32_add")
    kernel.set_group_size(64)
    for i, arg in enumerate((src, dst, ctypes.c_uint64(NBYTES // 4))):
        kernel.set_arg(i, arg)
    status = api().zeDeviceGetStatus
    handle = dev.handle

    def event_signal() -> None:
        ev.signal()
        ev.wait()
        ev.reset()

    ops: dict[str, Callable[[], object]] = {
        "status": lambda: status(handle),
        "alloc_free": lambda: ctx.allocate_device(dev, NBYTES).close(),
        "copy": lambda: cl.copy(dst, src),
        "fill": lambda: cl.fill(dst, b"\x5a"),
        "event_create": lambda: pool.event(0).close(),
        "event_signal": event_signal,
        "launch": lambda: cl.launch(kernel, 1),
    }
    out: dict[str, float] = {}
    for name, op in ops.items():
        for _ in range(iterations // 10 + 1):
            op()
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            op()
        out[name] = (time.perf_counter_ns() - t0) / iterations
    ctx.close()
    return out


def run_child(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run one side in a fresh process; return its JSON line (ns per operation)."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_core: {cmd[0]} failed: {proc.stderr.strip()[-800:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    """Measure both sides, alternating, and print each row's times and ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=positive, default=20000)
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(python_loops(args.iterations)))
        return 0
    reference = build_reference()
    iterations = ["--iterations", str(args.iterations)]
    env = sim.sim_env(devices=2, device_memory="4G")
    sides = {
        "c": [str(reference), str(args.iterations), str(SPIRV)],
        "l0mem": [sys.executable, "-m", "benchmarks.bench_core", "--child", *iterations],
    }
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeats):
        for side, cmd in sides.items():
            got = run_child(cmd, env)
            old = best.setdefault(side, got)
            best[side] = {k: min(v, old[k]) for k, v in got.items()}
    print(
        f"l0mem's simulated driver (not hardware), {args.iterations} iterations, "
        f"best of {args.repeats} (ns per operation)"
    )
    # floor: what the same number of bare ctypes calls costs (the status row's time each).
    print(f"{'operation':<30}{'C':>9}{'l0mem':>9}{'ratio':>8}{'floor':>9}{'/floor':>8}")
    call = best["l0mem"]["status"]
    for key, (label, calls) in ROWS.items():
        c, py = best["c"][key], best["l0mem"][key]
        floor = calls * call
        print(f"{label:<30}{c:>9.0f}{py:>9.0f}{py / c:>8.2f}{floor:>9.0f}{py / floor:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
