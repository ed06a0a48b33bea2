"""The host memory an audit run moved itself, from the simulator's ground truth (test support only).

Host memory signals are system-wide: other processes on the machine move them.
:func:`host_env` (or :func:`use_in_process`) starts the audit's children with
tests/support/child_site/ on PYTHONPATH and ``L0MEM_TEST_HOST`` set, so that
every sample carries the simulated mirror's ground truth
(:data:`TRUTH_KEY`: the bytes of host pages its memfds hold in the child,
counted by the kernel). Two modes:

- ``quiet``: the system-wide signals in the samples are those of a host where
  only the child moves memory (child_site/host_model.py), and so is the
  MemAvailable its safety guard reads. For tests whose question is the
  audit's logic: nobody else can change their answer.
- ``truth``: the signals stay real. For the few tests that must read the real
  signal: :func:`disturbance` says whether, and where, another process moved
  it by more than an allowance, measured against the child's own memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from l0mem.audit.model import Sample, SetupRun
from l0mem.estimate import DEFAULT_CONFIG, cost_series, recorded_signals
from tests.support.child_site.host_model import (
    LOWEST_KEY,
    MIRROR_ONLY,
    MODE_VAR,
    MODES,
    START_VAR,
    TRUTH_KEY,
    child_pids,
    process_own,
)

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_site")
MIB = 1 << 20
GIB = 1 << 30

__all__ = [
    "LOWEST_KEY",
    "MODE_VAR",
    "SITE_DIR",
    "TRUTH_KEY",
    "QuietParent",
    "assert_mirrored",
    "deciding_candidate",
    "disturbance",
    "host_env",
    "kept_after_free",
    "mirror_truth",
    "use_in_process",
    "with_site",
]


def with_site(env: Mapping[str, str]) -> dict[str, str]:
    """Return ``env`` with child_site/ first on PYTHONPATH (once)."""
    out = dict(env)
    paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != SITE_DIR]
    out["PYTHONPATH"] = os.pathsep.join([SITE_DIR, *paths])
    return out


def host_env(
    env: Mapping[str, str], mode: str = "quiet", *, start: int | None = None
) -> dict[str, str]:
    """Return ``env`` set up so that audit children record the truth (``quiet``: on a quiet host).

    ``start`` (quiet only): the MemAvailable in bytes the quiet host starts from.
    """
    if mode not in MODES:
        raise ValueError(f"unknown host mode {mode!r}; known: {', '.join(MODES)}")
    if start is not None and mode != "quiet":
        raise ValueError("only the quiet host has a start")
    out = with_site(env)
    out[MODE_VAR] = mode
    out.pop(START_VAR, None)
    if start is not None:
        out[START_VAR] = str(start)
    return out


def use_in_process(monkeypatch: Any, mode: str = "quiet", *, start: int | None = None) -> None:
    """Make the audit children this process starts record the truth (undone by ``monkeypatch``)."""
    env = host_env(os.environ, mode, start=start)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    monkeypatch.setenv(MODE_VAR, mode)
    if start is None:
        monkeypatch.delenv(START_VAR, raising=False)
    else:
        monkeypatch.setenv(START_VAR, str(start))


class QuietParent:
    """MemAvailable as the audit's parent sees it on a host where only its children move memory.

    The parent's watchdog reads ``mem_available``; replaced by :meth:`install`,
    it reads the value it had at the start (or ``start``) minus what this process's children
    have moved since (their mirrors' pages and their anonymous memory), so no
    other process on the machine changes when the watchdog fires.
    """

    def __init__(self, start: int | None = None) -> None:
        from l0mem.probe import mem_available

        self.start = mem_available() if start is None else start
        self._base: dict[int, int] = {}

    def mem_available(self, proc_root: str = "/proc") -> int:
        """Return the quiet host's MemAvailable now."""
        moved = 0
        for pid in child_pids(proc_root):
            own = process_own(pid, proc_root)
            moved += own - self._base.setdefault(pid, own)
        return max(self.start - moved, 0)

    def install(self, monkeypatch: Any) -> QuietParent:
        """Make the audit's parent side read this quiet host (undone by ``monkeypatch``)."""
        from l0mem.audit import execute

        monkeypatch.setattr(execute, "mem_available", self.mem_available)
        return self


def mirror_truth(run: SetupRun) -> list[tuple[str, int, int]]:
    """Return (phase, device bytes, mirror bytes more than at the first sample) for every sample."""
    assert run.samples, f"{run.label}: no samples ({run.status}: {run.reason})"
    missing = [i for i, s in enumerate(run.samples) if TRUTH_KEY not in s.values]
    assert not missing, f"{run.label}: samples {missing} lack {TRUTH_KEY}: child_site not loaded?"
    first = run.samples[0].values[TRUTH_KEY]
    return [(s.phase, s.device_bytes, s.values[TRUTH_KEY] - first) for s in run.samples]


def assert_mirrored(run: SetupRun, ratio: float, *, kept: bool = False) -> None:
    """Fail unless the simulator mirrored exactly ``ratio`` of each step's bytes, and freed it unless ``kept``."""
    truth = mirror_truth(run)
    peak = 0  # the most device memory held so far: a kept mirror stays at its size
    for phase, device, mirror in truth:
        peak = max(peak, device)
        want = int(ratio * (peak if kept else device))
        assert mirror == want, f"{run.label}: {phase} at {device} device bytes: {truth}"


def steps_up(samples: list[Sample]) -> list[Sample]:
    """Return the sample that ends each step of allocation: a window's "after" edge that grew."""
    before = {s.step: s.device_bytes for s in samples if s.edge == "before"}
    return [
        s
        for s in samples
        if s.edge == "after" and s.step in before and s.device_bytes > before[s.step]
    ]


def kept_after_free(run: SetupRun) -> int:
    """Return the mirror bytes still held at the last sample, more than at the first."""
    return mirror_truth(run)[-1][2]


def deciding_candidate(run: SetupRun) -> str:
    """Return the host signal the analysis tries first among those this run recorded."""
    recorded = set(recorded_signals(run.samples))
    return next(s for s in DEFAULT_CONFIG.priority if s in recorded)


def disturbance(run: SetupRun, allowance_mib: float, signal: str | None = None) -> str | None:
    """Return where ``signal`` strayed from the child's own memory by more than the allowance, else None.

    The child's own memory at each sample is the mirror (ground truth) plus its
    anonymous RSS (the mirror alone for Shmem), relative to the first sample;
    ``signal`` (default: the one the analysis tries first) must show that, as a
    cost, within ``allowance_mib``. More is another process's doing (or a probe
    that misreads, which strays in every attempt).
    """
    signal = signal or deciding_candidate(run)
    truth = mirror_truth(run)
    costs = cost_series(run.samples, signal)
    assert len(costs) == len(truth), f"{run.label}: {signal} missing from some samples"
    rss0 = run.samples[0].values.get("proc.RssAnon", 0)
    with_rss = signal not in MIRROR_ONLY
    offset = costs[0][2]
    worst = (0.0, 0)
    for i, ((_, _, cost), (_, _, mirror), sample) in enumerate(
        zip(costs, truth, run.samples, strict=True)
    ):
        rss = sample.values.get("proc.RssAnon", 0) - rss0 if with_rss else 0
        own = (mirror + rss) / MIB
        stray = (cost - offset) - own
        if abs(stray) > abs(worst[0]):
            worst = (stray, i)
    if abs(worst[0]) <= allowance_mib:
        return None
    stray, i = worst
    s = run.samples[i]
    return (
        f"{signal} strayed {stray:+.0f} MiB from the child's own memory at sample {i} "
        f"({s.phase}, {s.device_bytes // MIB} MiB of device memory)"
    )
