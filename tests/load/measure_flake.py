"""Measure how often l0mem's memory-measuring tests fail while other processes load the machine.

    python tests/load/measure_flake.py run --runs 20             # this checkout, under load
    python tests/load/measure_flake.py run --repo /tmp/base --runs 8 --time-limit 600
    python tests/load/measure_flake.py run --runs 5 --no-load    # the same without the load
    python tests/load/measure_flake.py load --seconds 30         # only the load (to watch noise)
    python tests/load/measure_flake.py noise --seconds 10        # host memory noise, as the audit sees it

Each run is one ``pytest`` process over ``--tests`` (default: the tests that
read host memory, ``DEFAULT_TESTS``) in the checkout ``--repo``; the per-test
outcome comes from its JUnit XML. While the runs go on, the load beside them is:

- one CPU burner per core (``os.cpu_count()``), each a busy loop;
- one memory churner: maps ``--churn-gib`` GiB of anonymous memory, touches
  every page, holds it for 0.2 to 1 s, unmaps it and waits 0.2 to 1 s, again
  and again (random durations, so that it never keeps step with a test). It
  moves ``MemAvailable`` by that much several times a second.

At the end it prints, per test, how many runs it passed and failed and the
failure rate, then the load average and how many other ``pytest`` processes
(not ours) were seen during the runs: other engineers' tests share the
machine and add their own load to the numbers. ``--time-limit`` stops
starting new runs after that many seconds (the run under way finishes). The
load processes are started here and stopped by their process ids, also on
SIGINT or SIGTERM (which end the run under way as well).
Exit code: 0 when every selected test passed in every run, else 1.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import mmap
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path

GIB = 1 << 30
MIB = 1 << 20
HERE_REPO = Path(__file__).resolve().parent.parent.parent

# The tests that read host memory (system-wide signals or an audit's analysis of
# real samples); a name missing from a checkout (renamed, new) is simply not run there.
DEFAULT_TESTS = (
    "tests/test_audit_runner.py::test_every_mirror_mode_gets_the_right_verdict_and_slope",
    "tests/test_audit_runner.py::test_a_mirror_kept_after_free_is_reported_as_not_released",
    "tests/test_audit_runner.py::test_device_out_of_memory_stops_early_and_judges_the_data",
    "tests/test_audit_runner.py::test_remedies_rerun_mirrored_setups_and_say_which_remove_the_mirror",
    "tests/test_audit_runner.py::test_remedies_leave_a_clean_setup_alone",
    "tests/test_audit_runner.py::test_sycl_cpu_device_is_a_real_positive_control",
    "tests/test_audit_runner.py::test_the_real_host_signal_shows_the_simulated_mirror",
    "tests/test_cli_audit.py::test_full_audit_writes_json_junit_plot_and_fails_on_mirror",
    "tests/test_cli_audit.py::test_a_failed_setup_next_to_a_good_one_exits_6",
    "tests/test_cli_audit.py::test_sycl_cpu_positive_control_next_to_the_simulator",
    "tests/test_audit_sycl_sim.py",
    "tests/test_audit_signals.py",
    "tests/test_guard_slope.py::test_the_floor_holds_against_a_simulated_mirror_of_any_ratio",
    "tests/test_probe_live.py",
    "tests/test_guard.py",
    "tests/test_cli_audit.py::test_floor_above_available_stops_early_and_kills_nothing",
    "tests/test_examples.py::test_one_experiment_script_measures_the_simulated_mirror",
    "tests/test_simdriver.py::test_zero_fill_of_device_memory_costs_no_host_memory",
    "tests/test_simdriver.py::test_mirror_costs_host_memory_outside_rss_and_is_released",
    "tests/test_simdriver.py::test_mirror_none_costs_nothing",
    "tests/test_simdriver.py::test_mirror_release_0_keeps_host_memory_after_free",
    "tests/test_audit_noise.py",
    "tests/test_audit_cycles.py",
    "tests/test_neighbour.py",
    "tests/test_sim_mirror_kind.py",
    "tests/test_watch_engine.py",
)


# ---------------------------------------------------------------- the load


def _burn() -> None:
    """Keep one core busy until killed."""
    x = 0
    while True:
        x = (x * 31 + 7) & 0xFFFF


def _churn(nbytes: int, seed: int) -> None:
    """Map, touch, hold and unmap ``nbytes`` of anonymous memory in a loop until killed."""
    rng = random.Random(seed)
    page = mmap.PAGESIZE
    populate = getattr(mmap, "MAP_POPULATE", 0)
    while True:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        if not populate:
            for off in range(0, nbytes, page):
                m[off] = 1
        time.sleep(rng.uniform(0.2, 1.0))
        m.close()
        time.sleep(rng.uniform(0.2, 1.0))


@contextlib.contextmanager
def load(churn_gib: float, burners: int | None = None) -> Iterator[list[int]]:
    """Run the CPU burners and the memory churner for the duration; yield their process ids."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_burn, daemon=True) for _ in range(burners or os.cpu_count() or 1)]
    if churn_gib > 0:
        procs.append(ctx.Process(target=_churn, args=(int(churn_gib * GIB), 1), daemon=True))
    for p in procs:
        p.start()
    try:
        yield [p.pid for p in procs if p.pid is not None]
    finally:
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
            p.join()


# ---------------------------------------------------------------- measuring


def _host_available() -> int:
    """Return MemAvailable plus the per-CPU free pages (the audit's host.available), in bytes."""
    from l0mem.probe import take_snapshot

    values = take_snapshot().values
    return values.get("host.available", values["meminfo.MemAvailable"])


def noise(seconds: float) -> dict[str, float]:
    """Return how host.available moved over ``seconds`` sampled every 20 ms (MiB)."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.append(_host_available() / MIB)
        time.sleep(0.02)
    steps = [abs(b - a) for a, b in itertools.pairwise(seen)]
    mean = sum(seen) / len(seen)
    sd = (sum((x - mean) ** 2 for x in seen) / max(len(seen) - 1, 1)) ** 0.5
    return {"samples": len(seen), "range": max(seen) - min(seen), "sd": sd, "max_step": max(steps)}


def _other_pytests(ours: set[int]) -> int:
    """Return how many pytest processes run on the machine that are not ours."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in ours:
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"pytest" in part for part in cmd[:3]):
            count += 1
    return count


def _outcomes(junit: Path) -> dict[str, str]:
    """Return test id -> passed, failed, error or skipped from a pytest JUnit XML file."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            out[name] = "failed"
        elif case.find("error") is not None:
            out[name] = "error"
        elif case.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def _existing(repo: Path, tests: Sequence[str]) -> list[str]:
    """Return the test ids that exist in ``repo`` (pytest stops at a node id it cannot find)."""
    out = []
    for test in tests:
        path, _, name = test.partition("::")
        source = repo / path
        function = name.partition("[")[0]  # a parametrized id names its function first
        if source.is_file() and (not name or f"def {function}(" in source.read_text()):
            out.append(test)
    return out


def measure(
    repo: Path, tests: Sequence[str], runs: int, time_limit: float, python: str
) -> tuple[dict[str, collections.Counter[str]], list[float], int]:
    """Run pytest on ``tests`` in ``repo`` up to ``runs`` times; return outcomes per test."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    durations: list[float] = []
    others = 0
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.setdefault("OCL_ICD_FILENAMES", "/work/main/.venv/lib/libintelocl.so")
    with tempfile.TemporaryDirectory(prefix="l0mem-flake-") as tmp:
        for i in range(runs):
            if i and time.monotonic() - start > time_limit:
                print(f"time limit reached after {i} run(s)", flush=True)
                break
            junit = Path(tmp) / f"run-{i}.xml"
            t0 = time.monotonic()
            log = Path(tmp) / f"run-{i}.log"
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [python, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider",
                     f"--junitxml={junit}", *_existing(repo, tests)],
                    cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
                try:
                    while proc.poll() is None:
                        others = max(others, _other_pytests({os.getpid(), proc.pid}))
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            proc.wait(timeout=5)
                finally:
                    if proc.poll() is None:  # interrupted: the run under way goes too
                        proc.terminate()
                        proc.wait()
            stdout = log.read_text(errors="replace")
            durations.append(time.monotonic() - t0)
            found = _outcomes(junit) if junit.is_file() else {}
            for name, outcome in found.items():
                counts[name][outcome] += 1
            lines = stdout.strip().splitlines()
            print(f"run {i + 1}: {durations[-1]:.0f} s, {(lines or ['(no output)'])[-1]}")
            # pytest's short summary: one line per failure with its message
            for line in lines:
                if line.startswith(("FAILED ", "ERROR ")):
                    print(f"    {line[:400]}")
            sys.stdout.flush()
    return counts, durations, others


def report(counts: dict[str, collections.Counter[str]]) -> bool:
    """Print pass/fail counts and the failure rate per test; return True when none failed."""
    width = max((len(n) for n in counts), default=10)
    print(f"{'test':<{width}}  pass  fail  rate")
    total_runs = total_fail = 0
    for name in sorted(counts):
        c = counts[name]
        bad = c["failed"] + c["error"]
        n = c["passed"] + bad
        total_runs += n
        total_fail += bad
        rate = f"{bad / n:.1%}" if n else "-"
        print(f"{name:<{width}}  {c['passed']:>4}  {bad:>4}  {rate:>5}")
    if total_runs:
        print(f"all: {total_fail} failure(s) in {total_runs} test executions")
    return total_fail == 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the load, the noise probe or the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("run", "load", "noise"))
    parser.add_argument("--repo", type=Path, default=HERE_REPO, help="checkout to test")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=1800.0, help="seconds")
    parser.add_argument("--seconds", type=float, default=10.0, help="load/noise duration")
    parser.add_argument("--churn-gib", type=float, default=3.0)
    parser.add_argument("--no-load", action="store_true")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("tests", nargs="*", default=list(DEFAULT_TESTS))
    args = parser.parse_intermixed_args(argv)
    # Started in the background, SIGINT may be ignored: both stop the runs and the load.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.mode == "noise":
        print(noise(args.seconds))
        return 0
    churn = 0.0 if args.no_load else args.churn_gib
    with contextlib.ExitStack() as stack:
        if not args.no_load:
            pids = stack.enter_context(load(churn))
            print(f"load: {len(pids) - 1} CPU burner(s), {churn:g} GiB churner; pids {pids}")
        if args.mode == "load":
            time.sleep(args.seconds)
            return 0
        counts, durations, others = measure(
            args.repo, args.tests, args.runs, args.time_limit, args.python
        )
    ok = report(counts)
    if durations:
        print(
            f"{len(durations)} run(s), {sum(durations) / len(durations):.0f} s each on average; "
            f"load average {os.getloadavg()[0]:.1f}; up to {others} other pytest process(es) seen"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
