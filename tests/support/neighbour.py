"""A noisy neighbour: a seeded process whose host memory moves in steps (test and benchmark support).

    python -m tests.support.neighbour --kind mixed --step 64M-768M --period 0.2-2.5 \\
        --max-held 2G --seed 1 --seconds 60

It models the other work on a busy multi-GPU server, beside which l0mem
measures: every step it grows or shrinks what it holds by a chunk of
``--step`` bytes, then sleeps a period drawn from ``--period``. Kinds:

- ``anon``: private anonymous memory (``mmap``), every page written;
- ``pagecache``: a file written to a directory on a real disk (default: a
  private directory under /var/tmp; tmpfs is refused), left in the page cache;
  a shrink deletes a file, which drops its cache;
- ``shmem``: a file in /dev/shm whose pages are allocated with
  ``posix_fallocate`` (Shmem in /proc/meminfo);
- ``mixed``: each step picks one of the three at random.

A quiet neighbour is no neighbour: callers model ``quiet`` by starting none.

The decisions (grow or shrink, size, kind, sleep) come from :class:`Schedule`,
a pure function of the seed and of which grows were carried out: the same seed
gives the same schedule (:func:`plan` lists it without running anything).
It never holds more than ``--max-held`` in total, and skips a grow that would
take the machine's MemAvailable below ``--floor`` (default: the larger of
2 GiB and 10% of MemTotal, l0mem's own floor).

It ends by itself after ``--seconds``. SIGTERM, SIGINT and SIGHUP end it
early (exit 128 + the signal's number), and it dies with the thread that
started it (``PR_SET_PDEATHSIG``, SIGTERM). On every way out it frees its
memory and removes its private directories whole, so a file created but not
yet recorded goes too. Each step is one JSON line in ``--log`` (default
standard output): ``start``, then ``step`` events (``action`` grow, shrink or
skip; ``kind``; ``bytes``; ``chunk``; ``held`` per kind after the step;
``t`` and ``began`` seconds since the start when the step was done and when it
began, ``mono`` and ``until``: CLOCK_MONOTONIC when the step was done and when
its sleep ends), then ``end`` with its ``reason``. No step begins after
``--seconds``; one begun just before may end after them.

From Python, :class:`Neighbour` starts one as a child process and stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Literal

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
PAGE = mmap.PAGESIZE
KINDS = ("anon", "pagecache", "shmem")
NEIGHBOUR_KINDS = (*KINDS, "mixed")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
DEFAULT_DISK_ROOT = "/var/tmp"
SHM_ROOT = "/dev/shm"
DIR_PREFIX = "l0mem-neighbour-"
REPO_ROOT = Path(__file__).resolve().parents[2]
_PR_SET_PDEATHSIG = 1
_WRITE_CHUNK = MIB
_BLOCK = memoryview(b"\xa5" * _WRITE_CHUNK)  # what pagecache files are written with, made once
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0

Action = Literal["grow", "shrink"]


# ---------------------------------------------------------------- sizes


def parse_size(text: str) -> int:
    """Return ``text`` (a number of bytes with an optional K, M, G or T suffix, powers of 1024) in bytes."""
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = 1
    if s and s[-1] in "KMGT":
        scale = 1 << (10 * ("KMGT".index(s[-1]) + 1))
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (expected e.g. 4096, 64M, 1.5G)") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"not a size: {text!r} (must be a finite number >= 0)")
    return int(value * scale)


def parse_range(text: str, parse: Any = float) -> tuple[Any, Any]:
    """Return ``LOW-HIGH`` (or a single value, both ends) parsed with ``parse``; raise ValueError when LOW > HIGH."""
    low_text, sep, high_text = text.partition("-")
    low = parse(low_text)
    high = parse(high_text) if sep else low
    if low > high:
        raise ValueError(f"{text!r}: the low end is above the high end")
    return low, high


def default_floor() -> int:
    """Return l0mem's default host floor: the larger of 2 GiB and 10% of MemTotal."""
    return max(2 * GIB, meminfo()["MemTotal"] // 10)


def meminfo() -> dict[str, int]:
    """Return /proc/meminfo in bytes."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields:
                out[key] = int(fields[0]) * (KIB if len(fields) > 1 else 1)
    return out


def filesystem_type(path: str | os.PathLike[str]) -> str:
    """Return the type of the filesystem holding ``path`` (the longest mount point above it)."""
    target = os.path.realpath(path)
    best, kind = "", "unknown"
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 3:
                continue
            point = fields[1].replace("\\040", " ")
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


# ---------------------------------------------------------------- the schedule


@dataclasses.dataclass(frozen=True)
class Step:
    """One decision: grow by a new chunk or shrink by releasing one, then sleep."""

    index: int
    action: Action
    kind: str
    size: int
    chunk: int  # a grow's new chunk number, or the chunk a shrink releases
    sleep: float


class Schedule:
    """The neighbour's decisions, from its seed and from which grows were carried out.

    Every step draws the same five numbers from the seed's RNG whatever it
    decides, so the stream never shifts: the same seed and the same outcomes
    (:meth:`done`) give the same steps. Grow when nothing is held, shrink when
    no step fits under ``max_held``, else either with even odds.
    """

    def __init__(
        self,
        kind: str,
        step: tuple[int, int],
        period: tuple[float, float],
        max_held: int,
        seed: int,
    ) -> None:
        """Check the parameters and start with nothing held."""
        if kind not in NEIGHBOUR_KINDS:
            raise ValueError(f"unknown kind {kind!r}; known: {', '.join(NEIGHBOUR_KINDS)}")
        low = -(-step[0] // PAGE)  # whole pages within the range
        high = step[1] // PAGE
        if step[0] <= 0 or low > high:
            raise ValueError(f"step {step[0]}-{step[1]}: need 0 < low <= high, at least a page")
        if max_held < low * PAGE:
            raise ValueError(f"max_held {max_held} is below the smallest step {low * PAGE}")
        if not 0 <= period[0] <= period[1] < float("inf"):
            raise ValueError(f"period {period[0]}-{period[1]}: need 0 <= low <= high")
        self.kind = kind
        self.pages = (low, high)
        self.period = period
        self.max_held = max_held
        self._rng = random.Random(seed)
        self._index = 0
        self._next_chunk = 0
        self.chunks: dict[int, tuple[str, int]] = {}  # chunk -> (kind, bytes), in order

    @property
    def held(self) -> int:
        """Return the bytes held in all chunks."""
        return sum(size for _, size in self.chunks.values())

    def held_by_kind(self) -> dict[str, int]:
        """Return the bytes held per kind (every kind, 0 when none)."""
        out = dict.fromkeys(KINDS, 0)
        for kind, size in self.chunks.values():
            out[kind] += size
        return out

    def next(self) -> Step:
        """Return the next decision (not yet carried out)."""
        r_action, r_kind, r_size, r_pick = (self._rng.random() for _ in range(4))
        sleep = self._rng.uniform(*self.period)
        kind = self.kind if self.kind != "mixed" else KINDS[int(r_kind * len(KINDS))]
        room = (self.max_held - self.held) // PAGE
        low, high = self.pages
        index = self._index
        self._index += 1
        if self.chunks and (room < low or r_action >= 0.5):
            same = [c for c, (k, _) in self.chunks.items() if k == kind]
            candidates = same or list(self.chunks)
            chunk = candidates[min(int(r_pick * len(candidates)), len(candidates) - 1)]
            held_kind, size = self.chunks[chunk]
            return Step(index, "shrink", held_kind, size, chunk, sleep)
        top = min(high, room)
        pages = low + min(int(r_size * (top - low + 1)), top - low)
        chunk = self._next_chunk
        self._next_chunk += 1
        return Step(index, "grow", kind, pages * PAGE, chunk, sleep)

    def done(self, step: Step, applied: bool = True) -> None:
        """Record whether ``step`` was carried out (a grow may be skipped for the floor)."""
        if not applied:
            return
        if step.action == "grow":
            self.chunks[step.chunk] = (step.kind, step.size)
        else:
            del self.chunks[step.chunk]


def plan(
    kind: str,
    step: tuple[int, int],
    period: tuple[float, float],
    max_held: int,
    seed: int,
    count: int,
) -> list[tuple[Step, dict[str, int]]]:
    """Return the first ``count`` steps with every grow carried out, each with the bytes held per kind after it."""
    schedule = Schedule(kind, step, period, max_held, seed)
    out = []
    for _ in range(count):
        s = schedule.next()
        schedule.done(s)
        out.append((s, schedule.held_by_kind()))
    return out


# ---------------------------------------------------------------- the process


class _Stopped(BaseException):
    """Raised in the main thread by a stop signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise _Stopped(signum)


def set_parent_death_signal(signum: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``signum`` to this process when the thread that started it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")


class Holdings:
    """What the neighbour holds: anonymous maps and files in its private directories."""

    def __init__(self, disk_dir: Path | None, shm_dir: Path | None) -> None:
        """Hold nothing yet; files go into ``disk_dir`` (pagecache) and ``shm_dir`` (shmem)."""
        self.disk_dir = disk_dir
        self.shm_dir = shm_dir
        self.maps: dict[int, mmap.mmap] = {}
        self.files: dict[int, Path] = {}
        self.sizes: dict[int, tuple[str, int]] = {}

    def held_by_kind(self) -> dict[str, int]:
        """Return the bytes held per kind."""
        out = dict.fromkeys(KINDS, 0)
        for kind, size in self.sizes.values():
            out[kind] += size
        return out

    def grow(self, kind: str, chunk: int, size: int) -> str:
        """Take ``size`` bytes of ``kind`` as chunk ``chunk``; return its name."""
        if kind == "anon":
            m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self.maps[chunk] = m
            # A byte per page: every page is the process's.
            m[0:size:PAGE] = b"\x01" * (size // PAGE)
            name = f"anon-{chunk}"
        else:
            directory = self.disk_dir if kind == "pagecache" else self.shm_dir
            assert directory is not None, f"no directory for {kind}"
            path = directory / f"{kind}-{chunk}"
            self.files[chunk] = path
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                if kind == "shmem":
                    os.posix_fallocate(fd, 0, size)
                else:
                    left = size
                    while left > 0:
                        left -= os.write(fd, _BLOCK[: min(left, _WRITE_CHUNK)])
            finally:
                os.close(fd)
            name = path.name
        self.sizes[chunk] = (kind, size)
        return name

    def shrink(self, chunk: int) -> str:
        """Release chunk ``chunk`` (unmap it, or delete its file and so its cache); return its name."""
        kind, _ = self.sizes.pop(chunk)
        if kind == "anon":
            self.maps.pop(chunk).close()
            return f"anon-{chunk}"
        path = self.files.pop(chunk)
        path.unlink(missing_ok=True)
        return path.name

    def release(self) -> None:
        """Free everything and remove the private directories whole."""
        for m in self.maps.values():
            m.close()
        self.maps.clear()
        self.files.clear()
        self.sizes.clear()
        for directory in (self.disk_dir, self.shm_dir):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)


def _emit(log: IO[str], record: dict[str, Any]) -> None:
    log.write(json.dumps(record, separators=(",", ":")) + "\n")
    log.flush()


def run(
    kind: str,
    step: tuple[int, int],
    period: tuple[float, float],
    max_held: int,
    seed: int,
    seconds: float,
    floor: int,
    log: IO[str],
    disk_dir: Path | None = None,
    shm_dir: Path | None = None,
    disk_root: str | os.PathLike[str] = DEFAULT_DISK_ROOT,
) -> int:
    """Be the neighbour in this process until ``seconds`` pass or a stop signal; return the exit status.

    ``disk_dir`` and ``shm_dir`` are private directories for its files (made
    here, under ``disk_root`` and /dev/shm, when None and the kind needs them);
    both are removed whole at the end. The stop signals are blocked until the
    handlers and directories are in place, so none is lost and nothing is left.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    schedule = Schedule(kind, step, period, max_held, seed)
    needs = {kind} if kind != "mixed" else set(KINDS)
    previous = {signum: signal.signal(signum, _on_signal) for signum in STOP_SIGNALS}
    holdings = Holdings(disk_dir, shm_dir)
    start = time.monotonic()
    deadline = start + seconds
    reason = "time"
    status = 0
    try:
        if "pagecache" in needs and holdings.disk_dir is None:
            holdings.disk_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=disk_root))
        if "shmem" in needs and holdings.shm_dir is None:
            holdings.shm_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=SHM_ROOT))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a pending one raises here
        _emit(log, {
            "event": "start", "t": 0.0, "mono": start, "pid": os.getpid(), "kind": kind,
            "seed": seed, "step": list(step), "period": list(period), "max_held": max_held,
            "seconds": seconds, "floor": floor,
            "disk_dir": None if holdings.disk_dir is None else str(holdings.disk_dir),
            "shm_dir": None if holdings.shm_dir is None else str(holdings.shm_dir),
        })  # fmt: skip
        while (began := time.monotonic()) < deadline:
            s = schedule.next()
            action: str = s.action
            if s.action == "grow" and meminfo()["MemAvailable"] - s.size < floor:
                action = "skip"
                name = f"{s.kind}-{s.chunk}"
            elif s.action == "grow":
                name = holdings.grow(s.kind, s.chunk, s.size)
            else:
                name = holdings.shrink(s.chunk)
            schedule.done(s, applied=action != "skip")
            now = time.monotonic()
            until = min(now + s.sleep, deadline)
            _emit(log, {
                "event": "step", "i": s.index, "t": now - start, "began": began - start,
                "mono": now, "until": until,
                "action": action, "kind": s.kind, "bytes": s.size, "chunk": name,
                "held": holdings.held_by_kind(), "sleep": s.sleep,
            })  # fmt: skip
            time.sleep(max(until - time.monotonic(), 0.0))
    except _Stopped as stop:
        reason = signal.Signals(stop.signum).name
        status = 128 + stop.signum
    except BrokenPipeError:  # nobody reads the log any more (``| head``)
        reason = "log closed"
        status = 128 + signal.SIGPIPE
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), log.fileno())
    finally:
        # A second signal must not cut the clean-up short.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        holdings.release()
        now = time.monotonic()
        with contextlib.suppress(OSError, ValueError):
            _emit(log, {"event": "end", "t": now - start, "mono": now, "reason": reason})
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run a neighbour from the command line; return its exit status (2 on bad options)."""
    # Until run() has its handlers, a stop signal waits (and a parent's death with it).
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=NEIGHBOUR_KINDS, default="mixed")
    parser.add_argument("--step", default="64M-768M", help="chunk size range LOW-HIGH (64M-768M)")
    parser.add_argument("--period", default="0.2-2.5", help="seconds between steps LOW-HIGH")
    parser.add_argument("--max-held", default="2G", help="most bytes held at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0, help="end by itself after this")
    parser.add_argument("--floor", help="skip a grow that would take MemAvailable below this")
    parser.add_argument("--directory", default=DEFAULT_DISK_ROOT, help="where pagecache files go")
    parser.add_argument("--log", default="-", help="JSON-lines log (- is standard output)")
    # Set by Neighbour: directories it made (and removes if left), the pid to die with.
    parser.add_argument("--disk-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--shm-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    set_parent_death_signal(signal.SIGTERM)
    if args.parent is not None and os.getppid() != args.parent:  # it died before prctl
        for d in (args.disk_dir, args.shm_dir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
        return 128 + signal.SIGTERM
    try:
        step = parse_range(args.step, parse_size)
        period = parse_range(args.period, float)
        max_held = parse_size(args.max_held)
        floor = default_floor() if args.floor is None else parse_size(args.floor)
        if not 0 < args.seconds < float("inf"):
            raise ValueError(f"--seconds {args.seconds}: must be > 0")
        Schedule(args.kind, step, period, max_held, args.seed)
        if args.kind in ("pagecache", "mixed") and args.disk_dir is None:
            _check_disk(args.directory)
    except ValueError as err:
        parser.error(str(err))
    with contextlib.ExitStack() as stack:
        log: IO[str] = sys.stdout
        if args.log != "-":
            log = stack.enter_context(open(args.log, "a", encoding="utf-8"))
        return run(args.kind, step, period, max_held, args.seed, args.seconds, floor, log,
                   args.disk_dir, args.shm_dir, args.directory)  # fmt: skip
    return 0  # pragma: no cover (the with block returns)


def _check_disk(directory: str | os.PathLike[str]) -> None:
    """Raise ValueError unless ``directory`` is a directory on a filesystem with a page cache."""
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: not a directory")
    fs = filesystem_type(directory)
    if fs in ("tmpfs", "ramfs", "devtmpfs"):
        raise ValueError(f"{directory} is on {fs}: pagecache needs a directory on a disk")


# ---------------------------------------------------------------- the parent's side


class Neighbour:
    """A neighbour process started and stopped from Python: ``with Neighbour(...) as n:``.

    Enter starts it (and waits until it has logged its start), exit stops it
    (SIGTERM, then SIGKILL after a bounded wait) and removes its directories
    if it left them. It dies with the thread that entered (PR_SET_PDEATHSIG):
    enter from a thread that outlives it, normally the main thread.
    """

    def __init__(
        self,
        kind: str,
        step: tuple[int, int] = (64 * MIB, 768 * MIB),
        period: tuple[float, float] = (0.2, 2.5),
        max_held: int = 2 * GIB,
        seed: int = 1,
        seconds: float = 60.0,
        floor: int | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        """Check the parameters (ValueError); nothing starts before :meth:`start`."""
        Schedule(kind, step, period, max_held, seed)
        if not 0 < seconds < float("inf"):
            raise ValueError(f"seconds {seconds}: must be > 0")
        self.kind = kind
        self.step = step
        self.period = period
        self.max_held = max_held
        self.seed = seed
        self.seconds = seconds
        self.floor = floor
        self.directory = Path(directory) if directory is not None else Path(DEFAULT_DISK_ROOT)
        if kind in ("pagecache", "mixed"):
            _check_disk(self.directory)
        self.disk_dir: Path | None = None
        self.shm_dir: Path | None = None
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._work: Path | None = None
        self._events: list[dict[str, Any]] | None = None
        self._stderr = ""

    @property
    def pid(self) -> int:
        """Return the neighbour's process id (started)."""
        if self._proc is None:
            raise RuntimeError("the neighbour is not started")
        return self._proc.pid

    @property
    def log_path(self) -> Path | None:
        """Return the JSON-lines log the process writes (None once stopped: read :meth:`events`)."""
        return None if self._work is None else self._work / "events.jsonl"

    def command(self) -> list[str]:
        """Return the command line that runs this neighbour (directories and log not yet set)."""
        step = f"{self.step[0]}-{self.step[1]}"
        period = f"{self.period[0]!r}-{self.period[1]!r}"
        cmd = [sys.executable, "-m", "tests.support.neighbour", "--kind", self.kind,
               "--step", step, "--period", period, "--max-held", str(self.max_held),
               "--seed", str(self.seed), "--seconds", repr(self.seconds),
               "--directory", str(self.directory)]  # fmt: skip
        if self.floor is not None:
            cmd += ["--floor", str(self.floor)]
        return cmd

    def start(self) -> Neighbour:
        """Start the process and wait (bounded) until it has logged its start; return self."""
        if self._proc is not None:
            raise RuntimeError("the neighbour was started already")
        self._work = Path(tempfile.mkdtemp(prefix="l0mem-neighbour-log-"))
        cmd = [*self.command(), "--log", str(self._work / "events.jsonl"),
               "--parent", str(os.getpid())]  # fmt: skip
        try:
            if self.kind in ("pagecache", "mixed"):
                self.disk_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self.directory))
                cmd += ["--disk-dir", str(self.disk_dir)]
            if self.kind in ("shmem", "mixed"):
                self.shm_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=SHM_ROOT))
                cmd += ["--shm-dir", str(self.shm_dir)]
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
            )
            with open(self._work / "stderr", "wb") as err:
                self._proc = subprocess.Popen(
                    cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
                )
            deadline = time.monotonic() + _START_TIMEOUT_S
            while not any(e["event"] == "start" for e in self._read()):
                if self._proc.poll() is not None:
                    raise RuntimeError(f"the neighbour exited {self._proc.returncode}: "
                                       f"{self._read_stderr() or '(no output)'}")  # fmt: skip
                if time.monotonic() > deadline:
                    raise RuntimeError("the neighbour did not start within "
                                       f"{_START_TIMEOUT_S:g} s")  # fmt: skip
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise
        return self

    def running(self) -> bool:
        """Return whether the process is still running."""
        return self._proc is not None and self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end by itself (subprocess.TimeoutExpired after ``timeout``); return its status."""
        if self._proc is None:
            raise RuntimeError("the neighbour is not started")
        return self._proc.wait(timeout)

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> int | None:
        """End the process (SIGTERM, SIGKILL after ``timeout``), remove what it left; return its status."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
        if proc is not None:
            self.returncode = proc.returncode
        for directory in (self.disk_dir, self.shm_dir):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
        if self._work is not None:
            self._events = self._read()
            self._stderr = self._read_stderr()
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
        return self.returncode

    def events(self) -> list[dict[str, Any]]:
        """Return what it logged so far (after :meth:`stop`: everything), one dict per JSON line."""
        if self._events is not None:
            return list(self._events)
        return self._read()

    def stderr(self) -> str:
        """Return what the process wrote to standard error."""
        return self._stderr if self._work is None else self._read_stderr()

    def _read(self) -> list[dict[str, Any]]:
        if self._work is None:
            return list(self._events or [])
        try:
            text = (self._work / "events.jsonl").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            # The last line may be half written.
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def _read_stderr(self) -> str:
        if self._work is None:
            return self._stderr
        try:
            return (self._work / "stderr").read_text(errors="replace").strip()
        except FileNotFoundError:
            return ""

    def __enter__(self) -> Neighbour:
        """Start the neighbour."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the neighbour and wait for it."""
        self.stop()


def iter_steps(events: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yield the ``step`` events of a log."""
    return (e for e in events if e.get("event") == "step")


if __name__ == "__main__":
    sys.exit(main())
