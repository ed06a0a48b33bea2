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
  (three at least) it moved by at most :data:`STILL_MIB` (and at most
  :data:`STILL_OF_STEP` of the window's device memory), where steps that
  moved it would have moved it in every one;
- something else does: somewhere between the windows, where device memory
  held still, it moved by :data:`ELSEWHERE_MIB` or more from one read to
  the next (a quiet machine's jitter, summed over a run, would pass any
  total);
- the run pays elsewhere: in two allocation windows at least, the total
  showed the run's cost (one share of the step, the clean threshold's or
  more) while the component stayed still. Without that, a driver that puts
  the mirror of some steps in this very component, beside a neighbour that
  moves it too, could pass for a neighbour alone; so a clean run is never
  helped by a bystander, and a clean is never made by taking one out;
- it does not follow the steps: no two of the windows it moved in, and no
  two of the steps' whole cycles (from one window's start to the next
  one's, so a cost paid after the window closed counts), moved it the
  step's way by one share of their device memory (within
  :data:`STILL_MIB`). A driver that puts the mirror of some or all
  allocations in it, inside the call or late, moves it by the same share
  each time; a neighbour's sizes are its own;
- it did not rise between the allocation windows, over the climb, by the
  clean threshold's share of the device memory or more: taking it out
  takes it out of the climb too, and the climb is what shows a cost paid
  after the windows closed (a residency made later, all at once). Such a
  rise may be the run's own as well as another process's growth; nothing
  tells the two apart, so the component stays in and the climb may speak.

Nothing else changes: where no component is a bystander (an anonymous
mirror beside an anonymous neighbour, the case no signal can tell apart)
the samples stand as they were, and the median and its rejection cope as
before. The limit this shares with the windows: a driver that mirrors only
one or two of a job's steps, by different shares, looks like a neighbour in
those windows, and the other windows' clean stands unless the climb
contradicts it (the audit climbs again, and such a step then recurs in
every climb; a watched job climbs once).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from l0mem.estimate.model import Sample
from l0mem.estimate.signals import MIB, signal_info
from l0mem.estimate.steps import Window, reads, windows

# A component moved by at most this much in a window is still there (MiB) ...
STILL_MIB = 2.0
# ... and by no more than this share of the window's device memory: a mirror at a
# tenth of a small step must not pass for still.
STILL_OF_STEP = 1 / 64
# It must have moved by this much from one read to the next, somewhere between the
# windows, to be another process's (jitter summed over a run reaches tens of MiB).
ELSEWHERE_MIB = 16.0
# Reads this close in time are one read (a window's edge).
_EDGE = 1e-6
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


def _levels(samples: Sequence[Sample], component: Component) -> dict[float, float] | None:
    """Return the component's level (MiB, more used positive) at each time all its signals were read."""
    out: dict[float, float] | None = None
    for signal, sign in component:
        try:
            read = dict(reads(samples, signal))
        except ValueError:
            return None
        out = (
            {t: sign * v for t, v in read.items()}
            if out is None
            else {t: level + sign * read[t] for t, level in out.items() if t in read}
        )
    return out or None


def _at(times: Sequence[float], levels: Mapping[float, float], t: float) -> float | None:
    """Return the level read at ``t`` (a window's edge is a read), or None where none was."""
    k = bisect.bisect_left(times, t - _EDGE)
    return levels[times[k]] if k < len(times) and abs(times[k] - t) <= _EDGE else None


def still_limit(w: Window) -> float:
    """Return how far a component may move in window ``w`` and still be still there (MiB)."""
    return min(STILL_MIB, abs(w.device_bytes) / MIB * STILL_OF_STEP)


def _follows_steps(moved: Sequence[tuple[Window, float]]) -> bool:
    """Return whether two of ``moved`` (window, move) moved the component, the step's way, by one share of it."""
    ahead = [(w, m) for w, m in moved if m * w.device_bytes > 0 and abs(m) > still_limit(w)]
    return any(
        abs(ma - mb / b.gib * a.gib) <= STILL_MIB
        for (a, ma), (b, mb) in itertools.combinations(ahead, 2)
    )


def bystanders(
    samples: Sequence[Sample], total: str, found: Sequence[Window], late_share: float = 0.10
) -> tuple[Component, ...]:
    """Return the bystander components of ``total`` in this run (its windows ``found``)."""
    out: list[Component] = []
    order = sorted(found, key=lambda w: w.t)
    grow = [w for w in order if w.device_bytes > 0]
    if len(grow) < MIN_WINDOWS:
        return ()
    for component in HELD_BY.get(total, ()):
        levels = _levels(samples, component)
        if levels is None:
            continue
        times = sorted(levels)
        edges = {
            w.step: (_at(times, levels, w.t - w.seconds), _at(times, levels, w.t)) for w in order
        }
        if any(a is None or b is None for a, b in edges.values()):
            continue
        move = {step: b - a for step, (a, b) in edges.items()}  # type: ignore[operator]
        still = sum(abs(move[w.step]) <= still_limit(w) for w in grow)
        if still < max(MIN_WINDOWS, STILL_SHARE * len(grow)):
            continue
        moved = [(w, move[w.step]) for w in order if abs(move[w.step]) > still_limit(w)]
        # Each step's whole cycle, from its window's start to the next one's: a cost the
        # step pays late (after its window closed) moves the component there, step after step.
        cycles = [
            (w, edges[nxt.step][0] - edges[w.step][0])  # type: ignore[operator]
            for w, nxt in itertools.pairwise(order)
            if w.device_bytes > 0
        ]
        if not moved or _follows_steps(moved) or _follows_steps(cycles):
            continue
        # The run's cost is paid elsewhere: two windows where the total shows one share
        # of the step while the component stayed still.
        shown = [(w, w.cost_mib) for w in grow if abs(move[w.step]) <= still_limit(w)]
        if not _follows_steps([(w, c) for w, c in shown if c >= late_share * w.device_bytes / MIB]):
            continue
        if not _moved_elsewhere(times, levels, order) or _climbed_between(
            times, levels, order, move, late_share
        ):
            continue
        out.append(component)
    return tuple(out)


def _climbed_between(
    times: Sequence[float],
    levels: Mapping[float, float],
    order: Sequence[Window],
    move: Mapping[int, float],
    late_share: float,
) -> bool:
    """Return whether the component rose between the allocation windows by what may be the run's late cost.

    Taking a bystander out takes its level out of the climb too, and the
    climb is what shows a cost paid after the windows closed (a residency
    made later, pages committed late). A rise between the windows, over the
    climb, of ``late_share`` of its device memory or more (the clean
    threshold: the least late cost that turns a clean) may be such a
    cost as well as another process's growth; nothing tells the two apart,
    so the component is left in and the climb may speak.
    """
    grow = [w for w in order if w.device_bytes > 0]
    start, end = grow[0].t - grow[0].seconds, grow[-1].t
    # To the last read before memory was given back (or the run ended): a cost paid
    # after the last window lands there.
    freed = min(
        (w.t - w.seconds for w in order if w.device_bytes < 0 and w.t > end), default=times[-1]
    )
    last = max((t for t in times if end <= t <= freed + _EDGE), default=end)
    first = min(times, key=lambda t: abs(t - start))
    inside = sum(
        move[w.step] for w in order if first - _EDGE <= w.t - w.seconds and w.t <= last + _EDGE
    )
    between = levels[last] - levels[first] - inside
    return between >= late_share * sum(w.device_bytes for w in grow) / MIB


def _moved_elsewhere(
    times: Sequence[float], levels: Mapping[float, float], order: Sequence[Window]
) -> bool:
    """Return whether the component moved by :data:`ELSEWHERE_MIB` from one read to the next outside every window."""
    spans = [(w.t - w.seconds, w.t) for w in order]
    return any(
        abs(levels[t1] - levels[t0]) >= ELSEWHERE_MIB
        and not any(a - _EDGE <= t0 and t1 <= b + _EDGE for a, b in spans)
        for t0, t1 in itertools.pairwise(times)
    )


def without_bystanders(
    samples: Sequence[Sample], totals: Sequence[str], late_share: float = 0.10
) -> tuple[list[Sample], dict[str, tuple[str, ...]]]:
    """Return ``samples`` with each total's bystanders added back to it, and their names by total.

    Added back at every sample, not only in the windows: a bystander's
    level is another process's all through the run, so the climb a total's
    windows are checked against (:mod:`l0mem.estimate.climbs`) leaves it
    out too.
    """
    shifts: dict[str, tuple[int, list[Component]]] = {}  # total -> (its sense, components)
    for total in totals:
        info = signal_info(total)
        if info is None:
            continue
        comps = [
            c
            for c in bystanders(samples, total, windows(samples, total), late_share)
            if all(all(n in s.values for n, _ in c) for s in samples if total in s.values)
        ]
        if comps:
            shifts[total] = (info.sense, comps)
    if not shifts:
        return list(samples), {}
    out = []
    for s in samples:
        values = dict(s.values)
        for total, (sense, comps) in shifts.items():
            if total in values:
                # cost = sense * value; the component's cost (its level) comes out of it.
                values[total] -= sense * sum(sign * s.values[n] for c in comps for n, sign in c)
        out.append(dataclasses.replace(s, values=values))
    return out, {t: tuple(component_name(c) for c in comps) for t, (_, comps) in shifts.items()}


__all__ = [
    "ELSEWHERE_MIB",
    "HELD_BY",
    "STILL_MIB",
    "bystanders",
    "component_name",
    "without_bystanders",
]
