"""l0mem.core against C: the same Level Zero calls through the same loader, in one run.

    python -m benchmarks.bench_core                  # 20000 iterations, 5 repeats
    python -m benchmarks.bench_core --iterations 50000 --repeats 7

Builds ``benchmarks/c_reference.c`` with the system C compiler against the
Level Zero loader (``-lze_loader``, from libze-dev), then runs it and the same
operations through :mod:`l0mem.core` in fresh child processes, alternating,
on the simulated driver (tests/simdriver). The best repeat of each side counts;
the ratio is l0mem's time over C's. ``ctypes`` is the C reference's calls made
bare through ctypes in l0mem's process (arguments made once): no binding
through ctypes goes below it. The figures are the simulator's and Python's,
never a hardware result. ``--baseline DIR`` times an earlier l0mem in the
same run. Issue 24 asks for at most 3 times C's time for every row but
``status`` (the bare call: the binding's own cost, at most 2 us); where the
simulator answers in about 150 ns, bare ctypes calls alone take 5 to 35 times
C's time, so only the allocation row can meet it here.
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
ROWS = {
    "status": "zeDeviceGetStatus (binding)",
    "alloc_free": "allocate_device + close",
    "copy": "copy 4 KiB (sync)",
    "fill": "fill 4 KiB (sync)",
    "event_create": "event + close",
    "event_signal": "signal + wait + reset",
    "launch": "launch (sync)",
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
    out = {name: per_op(op, iterations) for name, op in ops.items()}
    bare = bare_ops(
        {
            "ctx": ctx.handle,
            "dev": dev.handle,
            "list": cl.handle,
            "pool": pool.handle,
            "sync": ev.handle,
            "kernel": kernel.handle,
            "src": src.address,
            "dst": dst.address,
        }
    )
    out.update({f"bare:{name}": per_op(op, iterations) for name, op in bare.items()})
    ctx.close()
    return out


def per_op(op: Callable[[], object], iterations: int) -> float:
    """Return the ns one call of ``op`` takes, timed over ``iterations`` after a warm-up."""
    for _ in range(iterations // 10 + 1):
        op()
    t0 = time.perf_counter_ns()
    for _ in range(iterations):
        op()
    return (time.perf_counter_ns() - t0) / iterations


def bare_ops(handles: dict[str, int]) -> dict[str, Callable[[], object]]:
    """Return each operation as the C reference's calls made bare through ctypes.

    ``handles``: ctx, dev, list, pool, sync (an event), kernel, src and dst
    (addresses); every argument is made once, outside the timed loops.
    """
    from l0mem._ze import api
    from l0mem._ze.structs import ze_device_mem_alloc_desc_t, ze_event_desc_t, ze_group_count_t

    f = api()
    h = handles
    ctx, dev, cl, sync = h["ctx"], h["dev"], h["list"], h["sync"]
    ref, forever = ctypes.byref, ctypes.c_uint64(2**64 - 1)
    ptr, event = ctypes.c_void_p(), ctypes.c_void_p()
    desc = ref(ze_device_mem_alloc_desc_t())
    edesc = ref(ze_event_desc_t(index=0, signal=1, wait=1))
    groups = ref(ze_group_count_t(groupCountX=1, groupCountY=1, groupCountZ=1))
    pattern = ctypes.create_string_buffer(b"\x5a", 1)

    def finish() -> None:
        f.zeEventHostSynchronize(sync, forever)
        f.zeEventHostReset(sync)

    def alloc_free() -> None:
        f.zeMemAllocDevice(ctx, desc, NBYTES, 0, dev, ref(ptr))
        f.zeMemFree(ctx, ptr)

    def copy() -> None:
        f.zeCommandListAppendMemoryCopy(cl, h["dst"], h["src"], NBYTES, sync, 0, None)
        finish()

    def fill() -> None:
        f.zeCommandListAppendMemoryFill(cl, h["dst"], pattern, 1, NBYTES, sync, 0, None)
        finish()

    def event_create() -> None:
        f.zeEventCreate(h["pool"], edesc, ref(event))
        f.zeEventDestroy(event)

    def event_signal() -> None:
        f.zeEventHostSignal(sync)
        finish()

    def launch() -> None:
        f.zeCommandListAppendLaunchKernel(cl, h["kernel"], groups, sync, 0, None)
        finish()

    return {
        "status": lambda: f.zeDeviceGetStatus(dev),
        "alloc_free": alloc_free,
        "copy": copy,
        "fill": fill,
        "event_create": event_create,
        "event_signal": event_signal,
        "launch": launch,
    }


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
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also time the l0mem package in DIR (an earlier version: "
        "mkdir DIR && git archive COMMIT l0mem | tar -x -C DIR)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(python_loops(args.iterations)))
        return 0
    if args.baseline is not None and not (args.baseline / "l0mem" / "core").is_dir():
        parser.error(f"--baseline {args.baseline}: no l0mem/core there")
    reference = build_reference()
    iterations = ["--iterations", str(args.iterations)]
    env = sim.sim_env(devices=2, device_memory="4G")
    sides = {
        "c": [str(reference), str(args.iterations), str(SPIRV)],
        "l0mem": [sys.executable, "-m", "benchmarks.bench_core", "--child", *iterations],
    }
    if args.baseline is not None:
        # The earlier l0mem first on the path once this module (which puts the checkout first) is in.
        code = (
            f"import sys; sys.path.insert(0, {str(REPO)!r}); import benchmarks.bench_core as b; "
            f"sys.path.insert(0, {str(args.baseline.resolve())!r}); "
            "assert 'l0mem' not in sys.modules; sys.exit(b.main())"
        )
        sides["before"] = [sys.executable, "-c", code, "--child", *iterations]
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
    # ctypes: the same calls made bare through ctypes in l0mem's process, what no binding beats.
    head = f"{'operation':<30}{'C':>8}{'ctypes':>8}{'l0mem':>8}{'l0mem/C':>9}{'/ctypes':>9}"
    print(head + (f"{'before':>8}{'before/C':>10}" if "before" in best else ""))
    for key, label in ROWS.items():
        c, bare, py = best["c"][key], best["l0mem"][f"bare:{key}"], best["l0mem"][key]
        row = f"{label:<30}{c:>8.0f}{bare:>8.0f}{py:>8.0f}{py / c:>9.2f}{py / bare:>9.2f}"
        if "before" in best:
            row += f"{best['before'][key]:>8.0f}{best['before'][key] / c:>10.2f}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
