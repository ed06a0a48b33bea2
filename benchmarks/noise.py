"""How often l0mem's verdict is right beside a noisy neighbour, and how far its slope is off.

    python -m benchmarks.noise --commands audit,run --ratios 1 --kinds quiet,mixed \\
        --amplitudes 768M --runs 2
    python -m benchmarks.noise --time-limit 3600 --json noise.json     # the whole matrix

On l0mem's simulated driver (tests/simdriver, two devices of 16 GiB), each
run starts a neighbour (tests/support/neighbour.py: a process whose host
memory moves in steps of 64 MiB up to ``--amplitudes``, holding at most
2 GiB, every 0.2 to 2.5 s; ``quiet`` starts none), waits ``--warmup``
seconds so that it is moving, runs one l0mem command and stops the
neighbour. The commands:

- ``audit``: ``l0mem audit --setups l0,l0-multi,l0-peer-resident,l0-dmabuf
  --size 1G``; each set-up is a row (``audit:<set-up>``);
- ``run``, ``run-trace``, ``run-npr``, ``run-repeat``: ``l0mem run``
  (``--trace``, ``--no-peer-residency``, ``--repeat 3``) of
  ``examples/peer_resident_job.py --gib 1``;
- ``watch``: the same job started here, held until ``l0mem watch --pid``
  has taken its first sample, then watched to its end.

The truth comes from the simulator's configuration: with ``--mirror-mode
peer-resident`` only ``l0-peer-resident`` and the peer-resident job (not
under ``--no-peer-residency``) mirror, at the mirror ratio r; with ``all``
every allocation does. Its verdict is l0mem's rule for r (mirror from 0.75,
partial from 0.10, else clean) and its slope r * 1024 MiB per GiB.

Per cell (command, ratio, mirror kind, neighbour kind and amplitude) it
prints how many runs gave the right verdict, a wrong clean (the worst: a
mirror called clean), a wrong mirror, a wrong partial, no verdict
(inconclusive) or an error, the median and largest slope error (measured
minus truth, over the runs that gave a slope) and the median seconds a
command took. Runs go round the cells (run 0 of every cell, then run 1, ...),
so ``--time-limit`` leaves every cell with as many runs as time allowed.
Run ``i`` seeds its neighbour with ``--seed`` + i in every cell. A cell the
simulator refuses (``--mirror-kinds anon`` before the simulator has it) is
counted as errors, with the reason.

A run takes 10 to 15 s here (the audit of four set-ups, or the 12 s job; 40 s
for ``run-repeat``), so the whole default matrix (6 commands, 4 ratios, 9
neighbours, 2 mirror kinds, 20 runs: 8,640 runs) takes more than a day: choose
axes, or set ``--time-limit``.
Other processes on the machine move host memory too; a ``quiet`` cell is
only as quiet as the machine.

The numbers are the simulator's, never a hardware result. ``--repo`` measures
another checkout (its l0mem, simulator and example).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import itertools
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.args import non_negative, positive, seconds
from tests.support.neighbour import GIB, MIB, Neighbour, parse_size

SCHEMA = "l0mem.bench.noise/1"
REPO_ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("audit", "run", "run-trace", "watch", "run-npr", "run-repeat")
KINDS = ("quiet", "anon", "pagecache", "shmem", "mixed")
MIRROR_KINDS = ("memfd", "anon")
MIRROR_MODES = ("peer-resident", "all")
SETUPS = ("l0", "l0-multi", "l0-peer-resident", "l0-dmabuf")
OUTCOMES = ("right", "wrong-clean", "wrong-mirror", "wrong-partial", "inconclusive", "error")
VERDICTS = ("mirror", "partial", "clean", "inconclusive")
NEIGHBOUR_STEP_MIN = 64 * MIB
NEIGHBOUR_MAX_HELD = 2 * GIB
NEIGHBOUR_PERIOD = (0.2, 2.5)
DEVICE_MEMORY = "16G"
JOB = "examples/peer_resident_job.py"

# Holds the watched job until `l0mem watch` has taken its first sample (the file exists).
WAIT_THEN_RUN = """
import os, runpy, sys, time
deadline = time.monotonic() + float(sys.argv[2])
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@functools.cache
def _classifier() -> Callable[[float], str]:
    """Return l0mem's rule from a host/device ratio to a verdict, wherever the code under test keeps it."""
    for module in ("l0mem.estimate", "l0mem.audit.analysis"):
        try:
            classify = __import__(module, fromlist=["classify"]).classify
            classify(0.5)
        except Exception:  # moved, renamed, or the tree is mid-edit: try the next place
            continue
        return lambda ratio: str(classify(ratio))

    def fallback(ratio: float) -> str:
        # l0mem's thresholds (AnalysisConfig.mirror_threshold and clean_threshold),
        # used only when neither module can be imported.
        if ratio >= 0.75:
            return "mirror"
        return "partial" if ratio >= 0.10 else "clean"

    return fallback


@dataclasses.dataclass(frozen=True)
class Config:
    """What to measure: the axes, the run count and the commands' sizes."""

    commands: tuple[str, ...] = COMMANDS
    ratios: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
    kinds: tuple[str, ...] = KINDS
    amplitudes: tuple[int, ...] = (256 * MIB, 768 * MIB)
    mirror_kinds: tuple[str, ...] = MIRROR_KINDS
    mirror_mode: str = "peer-resident"
    runs: int = 20
    seed: int = 1
    time_limit: float = math.inf
    setups: tuple[str, ...] = SETUPS
    size: str = "1G"
    gib: float = 1.0
    extra: tuple[str, ...] = ()
    warmup: float = 1.0
    timeout: float = 600.0
    repo: Path = REPO_ROOT
    keep: Path | None = None  # where each run's reports and logs are kept (None: nowhere)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One combination of the axes; a command may yield several targets (audit: one per set-up)."""

    command: str
    ratio: float
    mirror_kind: str
    kind: str
    amplitude: int | None  # None: quiet


def cells(config: Config) -> list[Cell]:
    """Return every cell of the matrix, in the order they are run and printed."""
    out: list[Cell] = []
    for command, ratio, mirror_kind, kind in itertools.product(
        config.commands, config.ratios, config.mirror_kinds, config.kinds
    ):
        amplitudes: Sequence[int | None] = (None,) if kind == "quiet" else config.amplitudes
        out.extend(Cell(command, ratio, mirror_kind, kind, a) for a in amplitudes)
    return out


def targets(cell: Cell, config: Config) -> list[str]:
    """Return the names of the rows one run of ``cell`` gives."""
    if cell.command == "audit":
        return [f"audit:{s}" for s in config.setups]
    return [cell.command]


def truth_ratio(target: str, ratio: float, mirror_mode: str) -> float:
    """Return the host/device ratio the simulator is configured to cost ``target``."""
    if mirror_mode == "all":
        return ratio
    mirrors = target in ("audit:l0-peer-resident", "run", "run-trace", "watch", "run-repeat")
    return ratio if mirrors else 0.0


def outcome(verdict: str | None, truth: str) -> str:
    """Return how a verdict compares to the truth: one of OUTCOMES."""
    if verdict is None:
        return "error"
    if verdict == "inconclusive":
        return "inconclusive"
    if verdict == truth:
        return "right"
    return f"wrong-{verdict}"


# ---------------------------------------------------------------- the simulator


@dataclasses.dataclass(frozen=True)
class Simulator:
    """The built simulator of a checkout, and whether it reads ``mirror_kind``."""

    library: str
    knows_mirror_kind: bool


def build_simulator(repo: Path) -> Simulator:
    """Build the checkout's simulator (in a fresh interpreter: its own tests.support.sim)."""
    code = (
        "from tests.support import sim; print(sim.build()); "
        "print('mirror_kind' in sim.CONFIG_KEYS)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=_with_repo(os.environ, repo),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"building the simulator failed: {last}")
    return Simulator(lines[0], lines[1] == "True")


def _with_repo(env: dict[str, str] | os._Environ[str], repo: Path) -> dict[str, str]:
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), out.get("PYTHONPATH", "")) if p)
    return out


# Variables a real driver reads that the simulator honours: never inherited.
_DRIVER_KEYS = ("ZE_AFFINITY_MASK", "NEOReadDebugKeys", "ForceZeDeviceCanAccessPerReturnValue",
                "EnableDeferBacking")  # fmt: skip


def sim_environment(
    sim: Simulator, cell: Cell, mirror_mode: str, state: Path, repo: Path
) -> dict[str, str]:
    """Return the environment of one run: the simulator configured for ``cell``, nothing inherited.

    ``memfd`` is the simulator's own mirror (its only one before ``mirror_kind``
    existed): the key is set only where the simulator reads it. Any other
    kind is always set, so that a simulator without it refuses the run.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("ZESIM_") or k == "ZESIM_INIT_DRIVERS") and k not in _DRIVER_KEYS
    }
    env.update(
        ZE_ENABLE_ALT_DRIVERS=sim.library,
        ZES_ENABLE_SYSMAN="1",
        ZESIM_DEVICES="2",
        ZESIM_DEVICE_MEMORY=DEVICE_MEMORY,
        ZESIM_MIRROR=mirror_mode,
        ZESIM_MIRROR_RATIO=repr(cell.ratio),
        # Sysman counts every process's device memory, as on a real device, so that
        # `run` and `watch` without the tracer see the job's.
        ZESIM_SHARED_STATE=str(state),
    )
    if cell.mirror_kind != "memfd" or sim.knows_mirror_kind:
        env["ZESIM_MIRROR_KIND"] = cell.mirror_kind
    return _with_repo(env, repo)


# ---------------------------------------------------------------- one run


class Found(NamedTuple):
    """What one command said about one target: a verdict and slope, or what went wrong."""

    verdict: str | None = None
    slope: float | None = None  # MiB of host memory per GiB of device memory
    error: str = ""  # why there is no verdict (the run is counted as an error)
    reason: str = ""  # l0mem's reason for its verdict


def _lines(log: Path) -> list[str]:
    try:
        return [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return []


def _config_error(log: Path) -> str | None:
    """Return the simulator's line refusing its configuration, if the command's output has one."""
    return next((ln for ln in _lines(log) if "zesim: bad configuration" in ln), None)


def _tail(log: Path) -> str:
    """Return the line of a command's output that says why it failed."""
    lines = _lines(log)
    return _config_error(log) or (lines[-1][:300] if lines else "(no output)")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _l0mem(*args: str) -> list[str]:
    return [sys.executable, "-m", "l0mem", *args]


def _job(config: Config) -> list[str]:
    """Return the job's script and arguments (without the interpreter)."""
    return [JOB, "--gib", repr(config.gib)]


def _run_logged(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float) -> int:
    """Run ``cmd`` with its output in ``log``; return its exit status (-9 after the timeout)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            out.write(f"\nbenchmark: timed out after {timeout:g} s\n".encode())
            return -9
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _audit(config: Config, env: dict[str, str], work: Path) -> dict[str, Found]:
    """Run the audit; return per target its verdict, slope (MiB/GiB) and what went wrong."""
    report, log = work / "audit.json", work / "audit.log"
    cmd = _l0mem("audit", "--setups", ",".join(config.setups), "--size", config.size,
                 "--json", str(report), *config.extra)  # fmt: skip
    code = _run_logged(cmd, env, config.repo, log, config.timeout)
    data = _load(report)
    if data is None:
        failed = Found(error=f"exit {code}: {_tail(log)}")
        return {f"audit:{s}": failed for s in config.setups}
    out: dict[str, Found] = {}
    for run in data.get("runs", []):
        if run.get("remedy"):
            continue
        name = f"audit:{run.get('setup')}"
        result = run.get("result") or {}
        if run.get("status") not in ("ok", "stopped-early") or not result.get("verdict"):
            why = _config_error(log) or run.get("reason") or _tail(log)
            out[name] = Found(error=f"{run.get('status')}: {why}")
            continue
        ratio = result.get("ratio")
        slope = None if ratio is None else ratio * 1024.0
        out[name] = Found(result["verdict"], slope, reason=result.get("reason") or "")
    for s in config.setups:
        out.setdefault(f"audit:{s}", Found(error=f"exit {code}: not in the report: {_tail(log)}"))
    return out


def _summary(data: dict[str, Any] | None, code: int, log: Path) -> Found:
    """Return the verdict, slope and what went wrong from a run or watch report."""
    if data is None:
        return Found(error=f"exit {code}: {_tail(log)}")
    summary = data.get("summary") or {}
    job = (data.get("exit") or {}).get("returncode")
    if data.get("floor_stop"):
        return Found(error=f"stopped at the host floor: {data['floor_stop'].get('message')}")
    if data.get("stop_signal"):
        return Found(error=f"exit {code}: l0mem was stopped by {data['stop_signal']} (not by the benchmark)")
    if code != 0 or job not in (0, None):
        return Found(error=f"exit {code} (job {job}): {_tail(log)}")
    return Found(summary.get("verdict"), summary.get("slope_mib_per_gib"),
                 reason=summary.get("reason") or "")  # fmt: skip


def _run(config: Config, env: dict[str, str], work: Path, options: Sequence[str]) -> Found:
    """Run ``l0mem run OPTIONS -- job``; return its verdict, slope and what went wrong."""
    report, log = work / "run.json", work / "run.log"
    cmd = _l0mem("run", "--quiet", *options, "--json", str(report), "--", sys.executable,
                 *_job(config))  # fmt: skip
    code = _run_logged(cmd, env, config.repo, log, config.timeout)
    return _summary(_load(report), code, log)


def _watch(config: Config, env: dict[str, str], work: Path) -> Found:
    """Start the job held at a gate, watch it, open the gate at the first sample; return the result."""
    report, log, gate = work / "watch.json", work / "watch.log", work / "go"
    job_log = work / "job.log"
    hold = config.timeout
    with job_log.open("ab") as job_out, log.open("ab") as watch_out:
        job = subprocess.Popen(
            [sys.executable, "-c", WAIT_THEN_RUN, str(gate), repr(hold), *_job(config)],
            cwd=config.repo, env=env, stdin=subprocess.DEVNULL, stdout=job_out, stderr=job_out,
        )  # fmt: skip
        watch = None
        try:
            watch = subprocess.Popen(
                _l0mem("watch", "--pid", str(job.pid), "--json", str(report)),
                cwd=config.repo, env=env, stdin=subprocess.DEVNULL, stdout=watch_out,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            sampled = threading.Event()

            def pump() -> None:
                assert watch is not None and watch.stderr is not None
                for line in watch.stderr:
                    watch_out.write(line)
                    watch_out.flush()
                    if line.startswith(b"l0mem watch: t="):
                        sampled.set()
                sampled.set()  # it ended: let the job go either way

            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            sampled.wait(60.0)
            gate.touch()
            job_code = job.wait(config.timeout)
            code = watch.wait(config.timeout)
            reader.join(10.0)
        except subprocess.TimeoutExpired:
            return Found(error=f"timed out after {config.timeout:g} s")
        finally:
            for proc in (job, watch):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
    if job_code != 0:
        return Found(error=f"the job exited {job_code}: {_tail(job_log)}")
    return _summary(_load(report), code, log)


def measure_once(
    config: Config, cell: Cell, run_index: int, sim: Simulator
) -> list[dict[str, Any]]:
    """Run ``cell`` once beside its neighbour; return one result per target."""
    seed = config.seed + run_index
    started = time.monotonic()
    command_s = 0.0
    with tempfile.TemporaryDirectory(prefix="l0mem-bench-noise-") as tmp:
        work = Path(tmp)
        env = sim_environment(sim, cell, config.mirror_mode, work / "devices.state", config.repo)
        neighbour = None
        try:
            if cell.kind != "quiet":
                assert cell.amplitude is not None
                neighbour = Neighbour(
                    cell.kind, step=(min(NEIGHBOUR_STEP_MIN, cell.amplitude), cell.amplitude),
                    period=NEIGHBOUR_PERIOD, max_held=NEIGHBOUR_MAX_HELD, seed=seed,
                    seconds=config.timeout * 2 + 60,
                ).start()  # fmt: skip
            time.sleep(config.warmup)
            t0 = time.monotonic()
            if cell.command == "audit":
                found = _audit(config, env, work)
            elif cell.command == "watch":
                found = {"watch": _watch(config, env, work)}
            else:
                options = {
                    "run": [],
                    "run-trace": ["--trace"],
                    "run-npr": ["--no-peer-residency"],
                    "run-repeat": ["--repeat", "3"],
                }
                found = {cell.command: _run(config, env, work, options[cell.command])}
            command_s = time.monotonic() - t0
        finally:
            if neighbour is not None:
                neighbour.stop()
            if config.keep is not None:
                _keep(work, config.keep / f"{_cell_name(cell)}-run{run_index}")
    wall_s = time.monotonic() - started
    classify = _classifier()
    out = []
    for target in targets(cell, config):
        got = found.get(target, Found(error="no result"))
        ratio = truth_ratio(target, cell.ratio, config.mirror_mode)
        truth = classify(ratio)
        truth_slope = ratio * 1024.0
        out.append({
            "target": target, "command": cell.command, "ratio": cell.ratio,
            "mirror_kind": cell.mirror_kind, "mirror_mode": config.mirror_mode,
            "kind": cell.kind, "amplitude": cell.amplitude, "run": run_index, "seed": seed,
            "truth": truth, "truth_slope": truth_slope, "verdict": got.verdict,
            "slope": got.slope, "slope_error": None if got.slope is None else got.slope - truth_slope,
            "outcome": "error" if got.error else outcome(got.verdict, truth),
            "error": got.error or None, "reason": got.reason or None,
            "command_s": command_s, "wall_s": wall_s,
        })  # fmt: skip
    return out


def _cell_name(cell: Cell) -> str:
    amplitude = "" if cell.amplitude is None else f"-{_size(cell.amplitude)}"
    return f"{cell.command}-r{cell.ratio:g}-{cell.mirror_kind}-{cell.kind}{amplitude}"


def _keep(work: Path, dest: Path) -> None:
    """Copy a run's reports and logs (not the simulator's state) to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in work.iterdir():
        if path.is_file() and path.suffix in (".json", ".log", ".csv"):
            shutil.copy2(path, dest / path.name)


# ---------------------------------------------------------------- the matrix


def measure(
    config: Config,
    progress: Callable[[dict[str, Any]], None] | None = None,
    sim: Simulator | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Run the matrix, round the cells, until done or the time limit; return the results and whether complete."""
    sim = sim or build_simulator(config.repo)
    start = time.monotonic()
    results: list[dict[str, Any]] = []
    for run_index in range(config.runs):
        for cell in cells(config):
            if results and time.monotonic() - start > config.time_limit:
                return results, False
            found = measure_once(config, cell, run_index, sim)
            results.extend(found)
            if progress is not None:
                for r in found:
                    progress(r)
    return results, True


def _cell_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["target"], r["ratio"], r["mirror_kind"], r["kind"], r["amplitude"])


def summarize(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return one row per cell and target: outcome counts, slope error, seconds per command."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(_cell_key(r), []).append(r)
    rows = []
    for (target, ratio, mirror_kind, kind, amplitude), runs in groups.items():
        errors = [r["slope_error"] for r in runs if r["slope_error"] is not None]
        counts = {o: sum(r["outcome"] == o for r in runs) for o in OUTCOMES}
        reasons = sorted({r["error"] for r in runs if r["error"]})
        rows.append({
            "target": target, "ratio": ratio, "mirror_kind": mirror_kind, "kind": kind,
            "amplitude": amplitude, "truth": runs[0]["truth"], "runs": len(runs), **counts,
            "verdicts": {v: sum(r["verdict"] == v for r in runs) for v in VERDICTS},
            "slope_error_median": statistics.median(errors) if errors else None,
            "slope_error_max_abs": max(abs(e) for e in errors) if errors else None,
            "command_s_median": statistics.median(r["command_s"] for r in runs),
            "errors": reasons,
        })  # fmt: skip
    return rows


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / GIB:g}G" if n % GIB == 0 else f"{n / MIB:g}M"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0f}"


HEADER = ("command", "ratio", "mkind", "neighbour", "ampl", "truth", "runs", "right",
          "wr-clean", "wr-mirror", "wr-part", "inconcl", "error", "err med", "max|err|",
          "s/run")  # fmt: skip


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Return the rows as a plain text table, slope errors in MiB/GiB, and each error's reason."""
    lines = [HEADER]
    for r in rows:
        lines.append((
            r["target"], f"{r['ratio']:g}", r["mirror_kind"], r["kind"], _size(r["amplitude"]),
            r["truth"], str(r["runs"]), str(r["right"]), str(r["wrong-clean"]),
            str(r["wrong-mirror"]), str(r["wrong-partial"]), str(r["inconclusive"]),
            str(r["error"]), _num(r["slope_error_median"]), _num(r["slope_error_max_abs"]),
            f"{r['command_s_median']:.1f}",
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    text = [
        "  ".join(c.ljust(w) if i < 6 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        for line in lines
    ]
    reasons = sorted({e for r in rows for e in r["errors"]})
    text += [f"error: {e}" for e in reasons]
    return "\n".join(text)


def total_line(rows: Sequence[dict[str, Any]]) -> str:
    """Return one line adding up every row."""
    n = sum(r["runs"] for r in rows)
    parts = [f"{sum(r[o] for r in rows)} {o}" for o in OUTCOMES[1:]]
    right = sum(r["right"] for r in rows)
    share = f" ({right / n:.0%})" if n else ""
    return f"total: {right}/{n} right{share}, " + ", ".join(parts)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


# ---------------------------------------------------------------- the command line


def _list(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def check(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(choices)}"
            )
        return items

    return check


def _ratios(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(0 <= v <= 64 for v in values):
        raise argparse.ArgumentTypeError("each ratio must be from 0 to 64 (the simulator's range)")
    return values


def _amplitudes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(parse_size(t) for t in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not all(MIB <= v <= NEIGHBOUR_MAX_HELD for v in values):
        raise argparse.ArgumentTypeError("each amplitude must be from 1M to 2G (the most held)")
    return values


def parse_args(argv: Sequence[str] | None) -> tuple[Config, Path | None]:
    """Return the configuration the command line asks for and the JSON path (argparse exits 2 on bad options)."""
    p = argparse.ArgumentParser(prog="noise.py", description=__doc__.splitlines()[0])
    p.add_argument("--commands", type=_list(COMMANDS), default=COMMANDS)
    p.add_argument("--ratios", type=_ratios, default=(0.0, 0.5, 1.0, 2.0),
                   help="simulator mirror ratios (ZESIM_MIRROR_RATIO)")  # fmt: skip
    p.add_argument("--kinds", type=_list(KINDS), default=KINDS, help="neighbour kinds")
    p.add_argument("--amplitudes", type=_amplitudes, default=(256 * MIB, 768 * MIB),
                   help="largest neighbour step (steps are 64M up to it)")  # fmt: skip
    p.add_argument("--mirror-kinds", type=_list(MIRROR_KINDS), default=MIRROR_KINDS,
                   help="ZESIM_MIRROR_KIND")  # fmt: skip
    p.add_argument("--mirror-mode", choices=MIRROR_MODES, default="peer-resident")
    p.add_argument("--runs", type=positive, default=20)
    p.add_argument("--seed", type=non_negative, default=1)
    p.add_argument("--time-limit", type=seconds, default=math.inf,
                   help="start no new run after this many seconds")  # fmt: skip
    p.add_argument("--setups", type=_list(SETUPS), default=SETUPS, help="audit set-ups")
    p.add_argument("--size", default="1G", help="audit --size")
    p.add_argument("--gib", type=float, default=1.0, help="the job's --gib")
    p.add_argument("--extra", default="",
                   help='more arguments for l0mem audit, one string: --extra="--steps 4"')  # fmt: skip
    p.add_argument("--warmup", type=float, default=1.0, help="seconds the neighbour runs first")
    p.add_argument("--timeout", type=seconds, default=600.0, help="seconds one command may take")
    p.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout to measure")
    p.add_argument("--json", type=Path, help="write every run's result and the rows here")
    p.add_argument("--keep", type=Path, help="keep each run's reports and logs in this directory")
    args = p.parse_args(argv)
    config = Config(
        commands=args.commands, ratios=args.ratios, kinds=args.kinds, amplitudes=args.amplitudes,
        mirror_kinds=args.mirror_kinds, mirror_mode=args.mirror_mode, runs=args.runs,
        seed=args.seed, time_limit=args.time_limit, setups=args.setups, size=args.size,
        gib=args.gib, extra=tuple(shlex.split(args.extra)), warmup=args.warmup,
        timeout=args.timeout, repo=args.repo.resolve(),
        keep=None if args.keep is None else args.keep.resolve(),
    )  # fmt: skip
    return config, args.json


def _progress(r: dict[str, Any]) -> None:
    slope = "-" if r["slope"] is None else f"{r['slope']:.0f}"
    amp = _size(r["amplitude"])
    what = r["error"] or f"{r['verdict']} {slope} MiB/GiB (truth {r['truth']} {r['truth_slope']:.0f})"
    print(
        f"run {r['run']}: {r['target']} ratio {r['ratio']:g} {r['mirror_kind']} beside "
        f"{r['kind']} {amp}: {r['outcome']}: {what} [{r['command_s']:.1f} s]",
        flush=True,
    )


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """Make SIGTERM and SIGHUP end the benchmark as Ctrl-C does (the neighbour is stopped)."""
    previous = {s: signal.signal(s, signal.default_int_handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line; return 0, 2 (bad options), 4 (JSON) or 6 (no simulator)."""
    try:
        config, json_path = parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if json_path is not None and not os.access(json_path.parent.resolve(), os.W_OK):
        print(f"noise.py: cannot write {json_path}", file=sys.stderr)
        return 4
    started = time.monotonic()
    try:
        sim = build_simulator(config.repo)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        print(f"noise.py: {err}", file=sys.stderr)
        return 6
    print("SIMULATOR: l0mem's simulated driver (tests/simdriver): not a hardware result", flush=True)
    complete = False
    results: list[dict[str, Any]] = []
    interrupted = False
    with _stop_signals():
        try:
            results, complete = measure(config, _progress, sim)
        except KeyboardInterrupt:
            interrupted = True
    elapsed = time.monotonic() - started
    rows = summarize(results)
    print()
    print(table(rows))
    print(total_line(rows))
    runs = len({(r["run"], r["command"], r["ratio"], r["mirror_kind"], r["kind"], r["amplitude"]) for r in results})
    state = "interrupted" if interrupted else ("complete" if complete else "time limit reached")
    per_run = f", {elapsed / runs:.1f} s a run on average" if runs else ""
    print(f"{runs} run(s) in {elapsed:.0f} s{per_run} ({state}); mirror mode {config.mirror_mode}; "
          f"load average {os.getloadavg()[0]:.1f} (other processes move host memory too)")  # fmt: skip
    if json_path is not None:
        settings: dict[str, Any] = {
            k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(config).items()
        }
        if math.isinf(config.time_limit):
            settings["time_limit"] = None
        data = {
            "schema": SCHEMA, "complete": complete and not interrupted, "elapsed_s": elapsed,
            "config": settings, "rows": rows, "results": results,
        }  # fmt: skip
        try:
            write_json(json_path, data)
        except OSError as err:
            print(f"noise.py: {err}", file=sys.stderr)
            return 4
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
