"""Other processes' memory inside a total's step windows, taken out where a component shows it.

A total (``host.available``, MemAvailable, MemFree) falls with every page
anyone takes, so a neighbour that writes a tmpfs file or grows its heap
while a window is open spoils that window. Some components of the host's
loss show such pages by kind: Shmem (tmpfs, ``/dev/shm``, memfds),
anonymous pages (any process's heap), and for MemFree alone the page
cache (MemAvailable counts clean file pages as available, so reading a
file hardly moves it). A component that the run's own steps leave still
but that moves between them holds another process's memory; its move
inside a window is taken out of the total's cost there, and the window
measures the steps again.

A component is a **bystander** of a run only where all of these hold:

- the steps do not move it: in a third of the allocation windows at least
  (three at least) it moved by at most :data:`STILL_MIB`, where steps that
  moved it would have moved it in every one;
- something else does: between the windows, where device memory held
  still, it moved by :data:`ELSEWHERE_MIB` or more in all;
- its moves inside windows do not follow the steps: no two of the windows
  it moved in, in the step's direction, moved it by one share of their
  device memory (within :data:`STILL_MIB`). A driver that puts the mirror
  of only some allocations in it (i915's shmem-backed objects for some
  sizes, say) moves it by the same share each time; a neighbour's sizes
  are its own.

Nothing else changes: where no component is a bystander (an anonymous
mirror beside an anonymous neighbour, the case no signal can tell apart)
the windows stand as they were, and the median and its rejection cope as
before. Taking a neighbour out can only move a window back towards what
the steps cost, whichever verdict that is; the climb's check
(:mod:`l0mem.estimate.climbs`) still stands against a clean the run's
whole climb contradicts.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from l0mem.estimate.model import Sample
from l0mem.estimate.signals import signal_info
from l0mem.estimate.steps import Window, reads, windows

# A component moved by at most this much in a window is still there (MiB).
STILL_MIB = 2.0
# ... and it must have moved by this much in all between the windows to be another process's.
ELSEWHERE_MIB = 16.0
# The fewest allocation windows that must leave a component still, and the least share
# of them: steps that moved it would have moved it in every one (a driver that moves
# it in some steps only is :func:`_follows_steps`).
MIN_WINDOWS = 3
STILL_SHARE = 1 / 3

# A component: the signals it is read from, each with its sign (the page cache
# is Cached less Shmem, which Cached also counts).
Component = tuple[tuple[str, int], ...]
SHMEM: Component = (("meminfo.Shmem", 1),)
ANON: Component = (("meminfo.AnonPages", 1),)
FILE: Component = (("meminfo.Cached", 1), ("meminfo.Shmem", -1))
# Which components each total holds whole: MemAvailable and host.available count
# clean file pages as available, MemFree does not.
HELD_BY: Mapping[str, tuple[Component, ...]] = {
    "host.available": (SHMEM, ANON),
    "meminfo.MemAvailable": (SHMEM, ANON),
    "meminfo.MemFree": (SHMEM, ANON, FILE),
}


def component_name(component: Component) -> str:
    """Return how a reason names ``component``."""
    return {SHMEM: "Shmem", ANON: "AnonPages", FILE: "page cache"}.get(
        component, "+".join(n for n, _ in component)
    )


def _moves(samples: Sequence[Sample], component: Component) -> dict[int, float] | None:
    """Return the component's move (MiB, more used positive) in each step window, by step."""
    out: dict[int, float] = {}
    for signal, sign in component:
        try:
            found = {w.step: w.cost_mib for w in windows(samples, signal)}
        except ValueError:
            return None
        if not found:
            return None
        out = {
            step: out.get(step, 0.0) + sign * cost
            for step, cost in found.items()
            if not out or step in out
        }
    return out


def _elsewhere(samples: Sequence[Sample], component: Component, found: Sequence[Window]) -> float:
    """Return how far the component moved in all outside ``found``'s windows (MiB)."""
    spans = [(w.t - w.seconds, w.t) for w in found]
    total = 0.0
    for signal, _ in component:
        for (t0, c0), (t1, c1) in itertools.pairwise(reads(samples, signal)):
            if not any(a - 1e-6 <= t0 and t1 <= b + 1e-6 for a, b in spans):
                total += abs(c1 - c0)
    return total


def _follows_steps(moved: Sequence[Window], moves: Mapping[int, float]) -> bool:
    """Return whether two windows moved the component, the step's way, by one share of their device memory."""
    ahead = [(w, moves[w.step]) for w in moved if moves[w.step] * w.device_bytes > 0]
    return any(
        abs(ma - mb / b.gib * a.gib) <= STILL_MIB
        for (a, ma), (b, mb) in itertools.combinations(ahead, 2)
    )


def bystanders(
    samples: Sequence[Sample], total: str, found: Sequence[Window]
) -> dict[Component, dict[int, float]]:
    """Return, per bystander component of ``total`` in this run, its move in each window (by step)."""
    out: dict[Component, dict[int, float]] = {}
    grow = [w for w in found if w.device_bytes > 0]
    if len(grow) < MIN_WINDOWS:
        return out
    for component in HELD_BY.get(total, ()):
        moves = _moves(samples, component)
        if moves is None:
            continue
        seen = [w for w in grow if w.step in moves]
        still = sum(abs(moves[w.step]) <= STILL_MIB for w in seen)
        if still < max(MIN_WINDOWS, STILL_SHARE * len(seen)):
            continue
        moved = [w for w in found if w.step in moves and abs(moves[w.step]) > STILL_MIB]
        if not moved or _follows_steps(moved, moves):
            continue
        if _elsewhere(samples, component, found) < ELSEWHERE_MIB:
            continue
        out[component] = {w.step: moves[w.step] for w in moved}
    return out


def without_bystanders(
    samples: Sequence[Sample], totals: Sequence[str]
) -> tuple[list[Sample], dict[str, tuple[str, ...]]]:
    """Return ``samples`` with each total's bystanders added back to it, and their names by total.

    Added back at every sample, not only in the windows: a bystander's
    level is another process's all through the run, so the climb a total's
    windows are checked against (:mod:`l0mem.estimate.climbs`) leaves it
    out too.
    """
    shifts: dict[str, list[Component]] = {}
    for total in totals:
        info = signal_info(total)
        found = windows(samples, total) if info is not None else []
        comps = [
            c
            for c in bystanders(samples, total, found)
            if all(all(n in s.values for n, _ in c) for s in samples if total in s.values)
        ]
        if comps:
            shifts[total] = comps
    if not shifts:
        return list(samples), {}
    out = []
    for s in samples:
        values = dict(s.values)
        for total, comps in shifts.items():
            if total in values:
                sense = signal_info(total).sense  # type: ignore[union-attr]
                # cost = sense * value; the component's cost (its level) comes out of it.
                values[total] -= sense * sum(sign * s.values[n] for c in comps for n, sign in c)
        out.append(dataclasses.replace(s, values=values))
    return out, {t: tuple(component_name(c) for c in comps) for t, comps in shifts.items()}


__all__ = [
    "ELSEWHERE_MIB",
    "HELD_BY",
    "STILL_MIB",
    "bystanders",
    "component_name",
    "without_bystanders",
]
