"""l0mem's own CPU time per process-tree sample, and its share of one core at the sampling interval.

    python -m benchmarks.bench_sampling                      # 200 processes, 2 DRM devices
    python -m benchmarks.bench_sampling --processes 1000 --samples 50 --json sampling.json

What ``l0mem run`` and ``l0mem watch`` pay at every interval: one
:meth:`l0mem.probe.TreeProber.sample` of a tree of ``--processes`` real
sleeping processes (started here, in a session of their own, and killed
whatever happens). The CPU time is ``time.process_time()`` around each
sample; the share is that time over ``--interval`` (default 0.5 s, the
default of ``l0mem run``). The goal is under 1% of one core.

Two measurements: the tree as the kernel shows it (``/proc``; no GPU on most
machines, so no DRM files), and the same tree seen through an overlay
``proc_root`` where every pid links to its real ``/proc`` entry except the
root, whose ``fd``/``fdinfo`` also hold two DRM device files (two xe devices,
from tests/data/fdinfo/), so that one sample walks 200 processes *and* parses
the fdinfo of two devices.

``--crowd N`` starts N more sleeping processes outside the tree first, as on a
busy server. Last, the walk of the tree alone is timed both ways: l0mem's
(:func:`l0mem.probe.process_tree`, each process's children files, a cost that
grows with the tree) and psutil's ``Process.children(recursive=True)`` (a scan
of every process on the machine), which is why the probe walks by hand; where
the kernel has no children files, l0mem's scan of every parent pid against
``psutil.process_iter(["ppid"])``; and the memory of the tree's processes, one
``status`` read each against psutil's ``memory_full_info`` (USS, PSS, swap).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from benchmarks.args import non_negative, positive, seconds
from l0mem.files import check_writable, write_json
from l0mem.probe import TreeProber, process_tree
from l0mem.probe.pids import parent_map

SCHEMA = "l0mem.bench.sampling/1"
GOAL = 0.01  # of one core
FDINFO = Path(__file__).resolve().parent.parent / "tests" / "data" / "fdinfo"
DRM_FILES = (
    ("/dev/dri/renderD128", "xe_03_client41.txt"),
    ("/dev/dri/renderD129", "xe_83_multitile_client7.txt"),
)
_MIDDLE = 10  # shells between the root and the sleeps: a tree, not a flat list
_START_TIMEOUT_S = 60


def tree_script(processes: int) -> str:
    """Return a shell script that becomes a tree of ``processes`` processes (itself included)."""
    if processes == 1:
        return "exec sleep 600"
    middle = min(_MIDDLE, (processes - 1) // 2)  # each middle shell keeps at least one sleep
    leaves = processes - 1 - middle
    if middle == 0:
        return "sleep 600 & wait"
    parts = []
    for i in range(middle):
        count = leaves // middle + (1 if i < leaves % middle else 0)
        sleeps = "".join("sleep 600 & " for _ in range(count))
        parts.append(f"sh -c '{sleeps}wait' & ")
    return "".join(parts) + "wait"


@contextmanager
def sleeping_tree(processes: int) -> Iterator[int]:
    """Yield the root pid of a tree of ``processes`` sleeping processes; kill them all after."""
    root = subprocess.Popen(["sh", "-c", tree_script(processes)], start_new_session=True)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while len(process_tree(root.pid)) < processes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the tree did not reach {processes} processes")
            time.sleep(0.05)
        yield root.pid
    finally:
        # every process of the tree is in the session (and group) started for it
        with suppress(ProcessLookupError):
            os.killpg(root.pid, signal.SIGKILL)
        root.wait()


@contextmanager
def drm_overlay(root: int) -> Iterator[str]:
    """Yield a proc_root where every pid of ``root``'s tree is its real /proc entry, plus DRM files."""
    with tempfile.TemporaryDirectory(prefix="l0mem-bench-proc-") as tmp:
        for name in ("meminfo", "vmstat", "zoneinfo"):
            os.symlink(f"/proc/{name}", os.path.join(tmp, name))
        for pid in process_tree(root):
            if pid != root:
                os.symlink(f"/proc/{pid}", os.path.join(tmp, str(pid)))
        base = os.path.join(tmp, str(root))
        os.makedirs(os.path.join(base, "fd"))
        os.makedirs(os.path.join(base, "fdinfo"))
        for name in ("status", "stat", "schedstat", "cgroup", "task"):
            os.symlink(f"/proc/{root}/{name}", os.path.join(base, name))
        for fd in os.listdir(f"/proc/{root}/fd"):
            os.symlink(os.readlink(f"/proc/{root}/fd/{fd}"), os.path.join(base, "fd", fd))
            shutil.copyfile(f"/proc/{root}/fdinfo/{fd}", os.path.join(base, "fdinfo", fd))
        for n, (device, sample) in enumerate(DRM_FILES, start=100):
            os.symlink(device, os.path.join(base, "fd", str(n)))
            shutil.copyfile(FDINFO / sample, os.path.join(base, "fdinfo", str(n)))
        yield tmp


def measure(prober: TreeProber, samples: int) -> dict[str, Any]:
    """Return the CPU seconds of the first sample and of each following one."""
    start = time.process_time()
    first = prober.sample()
    first_cpu = time.process_time() - start
    times = []
    for _ in range(samples):
        start = time.process_time()
        last = prober.sample()
        times.append(time.process_time() - start)
    drm = {n for n in last.snapshot.values if n.startswith("drm.")}
    return {
        "processes": len(first.pids),
        "drm_devices": len({n.rsplit(".", 2)[0] for n in drm}),
        "first_cpu_s": first_cpu,
        "cpu_s": statistics.mean(times),
        "cpu_s_max": max(times),
    }


def cpu_per_call(call: Callable[[], object], calls: int) -> float:
    """Return the mean CPU seconds of one of ``calls`` calls of ``call``."""
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls


def _statuses(pids: tuple[int, ...]) -> None:
    """Read each process's ``status`` file, as a tree sample does."""
    for pid in pids:
        with suppress(OSError):
            Path(f"/proc/{pid}/status").read_bytes()


def _full_info(pids: tuple[int, ...]) -> None:
    """Read each process's USS, PSS and swap through psutil."""
    for pid in pids:
        with suppress(psutil.Error):
            psutil.Process(pid).memory_full_info()


def walks(root: int, calls: int) -> dict[str, Any]:
    """Return the CPU seconds of what the probe reads by hand and of psutil's way to the same."""
    tree = psutil.Process(root)
    pids = process_tree(root)
    return {
        "machine_processes": len(psutil.pids()),
        "tree_processes": len(pids),
        "l0mem_walk_s": cpu_per_call(lambda: process_tree(root), calls),
        "psutil_walk_s": cpu_per_call(lambda: tree.children(recursive=True), calls),
        # Where the kernel has no children files: every process's parent, both ways.
        "l0mem_parent_scan_s": cpu_per_call(parent_map, calls),
        "psutil_process_iter_s": cpu_per_call(
            lambda: [p.info for p in psutil.process_iter(["ppid"])], calls
        ),
        # Per-process memory: the one status read, and psutil's USS/PSS/swap.
        "l0mem_status_s": cpu_per_call(lambda: _statuses(pids), calls),
        "psutil_memory_full_info_s": cpu_per_call(lambda: _full_info(pids), calls),
    }


def run(
    processes: int, samples: int, interval: float, crowd: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return one measurement on /proc and one on the overlay with two DRM devices, and the walks."""
    out = []
    with ExitStack() as stack:
        if crowd:
            stack.enter_context(sleeping_tree(crowd))
        root = stack.enter_context(sleeping_tree(processes))
        plain = measure(TreeProber(root), samples)
        out.append({"proc_root": "/proc", **plain})
        with drm_overlay(root) as overlay:
            drm = measure(TreeProber(root, proc_root=overlay), samples)
            out.append({"proc_root": "overlay with 2 DRM devices", **drm})
        walked = walks(root, max(1, min(samples, 20)))
    for row in out:
        row["core_share"] = row["cpu_s"] / interval
    return out, walked


def render(
    rows: list[dict[str, Any]], walked: dict[str, Any], interval: float, console: Console
) -> None:
    """Print one row per measurement with the goal next to the measured share."""
    table = Table(title=f"l0mem CPU per tree sample (interval {interval:g} s)")
    for name in ("proc root", "processes", "DRM devices", "first ms", "ms/sample", "max ms"):
        table.add_column(name, justify="right")
    table.add_column("share of a core", justify="right")
    table.add_column("goal", justify="right")
    for r in rows:
        ok = "ok" if r["core_share"] < GOAL else "MISSED"
        table.add_row(
            r["proc_root"],
            str(r["processes"]),
            str(r["drm_devices"]),
            f"{r['first_cpu_s'] * 1e3:.2f}",
            f"{r['cpu_s'] * 1e3:.2f}",
            f"{r['cpu_s_max'] * 1e3:.2f}",
            f"{r['core_share']:.2%}",
            f"< {GOAL:.0%} ({ok})",
        )
    console.print(table)
    console.print(
        "first: every file of every process read (what each sample costs when every "
        "process runs); ms/sample: later samples, where a process that has not run "
        "since its last read costs one schedstat read"
    )
    console.print(
        f"the walk alone, among {walked['machine_processes']} processes on the machine: "
        f"l0mem {walked['l0mem_walk_s'] * 1e3:.2f} ms, "
        f"psutil children(recursive=True) {walked['psutil_walk_s'] * 1e3:.2f} ms"
    )
    console.print(
        f"every process's parent: l0mem {walked['l0mem_parent_scan_s'] * 1e3:.2f} ms, "
        f"psutil process_iter(['ppid']) {walked['psutil_process_iter_s'] * 1e3:.2f} ms; "
        f"the memory of {walked['tree_processes']} processes: status files "
        f"{walked['l0mem_status_s'] * 1e3:.2f} ms, psutil memory_full_info "
        f"{walked['psutil_memory_full_info_s'] * 1e3:.2f} ms"
    )


def _error(message: str) -> None:
    print(f"bench_sampling.py: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line; return the exit status.

    0 on success, 2 on bad options, 4 when the JSON file cannot be written,
    6 when the process tree cannot be started or sampled.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=positive, default=200)
    parser.add_argument("--samples", type=positive, default=100)
    parser.add_argument("--interval", type=seconds, default=0.5, help="seconds between samples")
    parser.add_argument(
        "--crowd", type=non_negative, default=0, help="sleeping processes to start outside the tree"
    )
    parser.add_argument("--json", type=Path, help="write the measurements as JSON to this path")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.json is not None:
        try:
            check_writable(args.json)
        except OSError as err:
            _error(str(err))
            return 4
    try:
        rows, walked = run(args.processes, args.samples, args.interval, args.crowd)
    except KeyboardInterrupt:
        _error("interrupted; the process tree was killed")
        return 130
    except Exception as err:
        _error(f"{type(err).__name__}: {err}".splitlines()[0])
        return 6
    render(rows, walked, args.interval, Console())
    if args.json is not None:
        data = {
            "schema": SCHEMA,
            "interval_s": args.interval,
            "goal": GOAL,
            "runs": rows,
            "walks": walked,
        }
        try:
            write_json(args.json, data)
        except OSError as err:
            _error(str(err))
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
