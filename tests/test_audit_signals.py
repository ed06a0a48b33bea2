"""``l0mem audit`` stopped by SIGINT, SIGTERM or SIGHUP in a real process.

Each signal must free device memory, keep every sample measured, write the
partial report, name the signal and exit 128 + N. The audit runs as
``python -m l0mem audit`` against the simulator; off a terminal it prints one
progress line per step, and each such line is an alloc sample the parent has
received: the test signals after the first one and checks that the report
holds every sample the lines announced.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from l0mem.audit import read_json
from l0mem.audit.model import SetupRun
from tests.support import sim

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = re.compile(r"^l0mem audit: (?P<label>\S+): .+ allocated \(step \d+ of \d+\)$")
# Only a hang guard: every wait below ends as soon as the line or the exit comes.
HANG_S = 180.0


class Audit:
    """An ``l0mem audit`` in a process group of its own, its stderr read line by line."""

    def __init__(self, args: list[str], env: dict[str, str], out_dir: Path) -> None:
        """Start the audit with ``args`` under ``env``; its tables go to a file in ``out_dir``."""
        self.stdout_path = out_dir / "stdout.txt"
        stdout: IO[str] = self.stdout_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "l0mem", "audit", *args],
            env=env,
            cwd=ROOT,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a shell job has
        )
        stdout.close()
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def progress(self, label: str) -> list[str]:
        """Return the progress lines of ``label`` printed so far."""
        with self._changed:
            return [ln for ln in self.lines if (m := PROGRESS.match(ln)) and m["label"] == label]

    def wait_for_progress(self, label: str) -> int:
        """Wait for the first progress line of ``label``; return how many there are by then."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: bool(self.progress(label)) or not self._reader.is_alive(), HANG_S
            )
        assert found and self.progress(label), "\n".join(self.lines)
        return len(self.progress(label))

    def finish(self) -> tuple[int, str, str]:
        """Wait for the audit to exit; return its exit code, stderr and stdout."""
        try:
            code = self.proc.wait(timeout=HANG_S)
        finally:
            self.kill()
        self._reader.join(HANG_S)
        return code, "\n".join(self.lines), self.stdout_path.read_text()

    def kill(self) -> None:
        """Kill the whole process group if anything of it still runs."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def group_alive(self) -> bool:
        """Return whether any process of the audit's group is still there."""
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True


def send(audit: Audit, signum: signal.Signals) -> None:
    """Deliver ``signum`` as it comes in life.

    Ctrl-C and a closed terminal signal the whole foreground process group
    (the audit and its child alike); SIGTERM comes from ``kill``, ``timeout``
    or a CI runner to the audit's process alone.
    """
    if signum == signal.SIGTERM:
        os.kill(audit.proc.pid, signum)
    else:
        os.killpg(audit.proc.pid, signum)


def interrupted_run(report_path: Path) -> SetupRun:
    """Return the one interrupted run of the partial report at ``report_path``."""
    report = read_json(report_path)
    assert report.complete is False
    runs = [r for r in report.runs if r.status == "interrupted"]
    assert len(runs) == 1, [(r.label, r.status, r.reason) for r in report.runs]
    # Nothing runs after the interrupt: no set-up after it has a run.
    assert report.runs[-1] is runs[0]
    return runs[0]


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_stop_signal_frees_keeps_every_sample_and_exits_128_plus_n(
    tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "partial.json"
    args = ["--setups", "l0-peer-resident,l0", "--size", "512MiB", "--steps", "32"]
    args += ["--settle", "0.2", "--json", str(out)]
    audit = Audit(args, sim.sim_env(mirror="peer-resident"), tmp_path)
    try:
        seen = audit.wait_for_progress("l0-peer-resident")
        send(audit, signum)
        code, stderr, stdout = audit.finish()
    finally:
        audit.kill()
    name = signum.name
    assert code == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert f"l0mem audit: error: interrupted by {name}; device memory was freed, partial results kept" in (
        stderr.splitlines()
    )
    run = interrupted_run(out)
    assert run.reason is not None and run.reason.startswith(f"interrupted ({name})"), run.reason
    # Every sample the audit announced is in the report, none more: the lines
    # are printed as the parent receives each alloc sample.
    alloc = [s for s in run.samples if s.phase == "alloc"]
    assert len(alloc) == len(audit.progress(run.label)) >= seen >= 1
    # The child freed every allocation it made (one per step, each step whole)...
    assert f"freed {len(alloc)} allocation(s)" in run.reason
    # ...and the device's own count went back to its idle value before it exited.
    idle = [s for s in run.samples if s.phase == "idle"]
    freed = [s for s in run.samples if s.phase == "freed"]
    assert freed and freed[-1].values["sysman.0.used"] == idle[0].values["sysman.0.used"]
    assert alloc[-1].values["sysman.0.used"] > idle[0].values["sysman.0.used"]
    assert not audit.group_alive(), "a process of the audit outlived it"
    assert "l0-peer-resident" in stdout


def test_a_child_slower_than_the_grace_period_is_killed_and_its_samples_kept(
    tmp_path: Path,
) -> None:
    # Each zeMemFree of the simulator takes 15 s here, longer than the guard's
    # 10 s grace: the child cannot finish freeing, and the audit kills it.
    out = tmp_path / "partial.json"
    args = ["--setups", "l0", "--size", "512MiB", "--steps", "32", "--settle", "0.2"]
    args += ["--json", str(out)]
    audit = Audit(args, sim.sim_env(mirror="all", free_delay_ms=15000), tmp_path)
    try:
        seen = audit.wait_for_progress("l0")
        send(audit, signal.SIGTERM)
        code, stderr, _ = audit.finish()
    finally:
        audit.kill()
    assert code == 143, stderr
    assert "Traceback" not in stderr
    assert "l0mem audit: error: interrupted by SIGTERM; device memory was freed" in stderr
    run = interrupted_run(out)
    assert run.reason is not None and run.reason.startswith("interrupted (SIGTERM)"), run.reason
    # The parent says it killed the child, and why: not a guess at the OOM killer.
    assert "killed by the audit: it did not end within the 10 s grace period" in run.reason
    assert "OOM" not in run.reason
    alloc = [s for s in run.samples if s.phase == "alloc"]
    assert len(alloc) == len(audit.progress("l0")) >= seen >= 1
    assert {s.phase for s in run.samples} == {"idle", "alloc"}  # it never got to free
    # The killed child took its device memory (simulated in its own pages) with it.
    assert not audit.group_alive(), "a process of the audit outlived it"
