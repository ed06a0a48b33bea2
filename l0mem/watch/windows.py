"""Step windows in a watched series: each change of device memory, between reads where the host was still.

A workload's allocation call may make its host pages before device memory
is seen to move (a mirror filled inside the call, before Sysman counts the
allocation) or after (made resident on a peer by a later call). A window
from the read just before the change to the read just after it then catches
the host's side half done, on every step alike, and reads low. So an edge
moves outward over a run of reads between which the host's cost kept moving
the way the step moved it, to the first read where it was still: the edge
before the change over a run that goes on across the change itself, the
edge after it over a run that starts at the change; never past the next or
previous change, and at most :data:`SETTLE_HORIZON` seconds from the
change. A window is only ever widened over motion its own reads already
hold (from the read before the change to the one after it): where the host
was still there, another process moving memory next to the window stays
out, whichever way it moved. Motion between two changes that runs on into
the later one is the later one's. The price: a host side done less than the
test of stillness before device memory is counted is missed, and its window
reads low; it lies off the others and is outvoted by them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from l0mem.estimate.model import Edge

MIB = 1 << 20
# How far an edge may move from the change it belongs to, in seconds: longer
# than the host's side of an allocation takes to make (the simulator fills
# 128 MiB in about 0.1 s; pinning runs at GB/s), short enough that a neighbour
# rarely moves the same way all through it. A host side made more slowly
# than that reads low.
SETTLE_HORIZON = 2.0
# The host's cost is still between two reads when it moved by at most this much,
# or by at most this fraction of the step's device memory where that is more ...
SETTLE_MIN = 2 * MIB
SETTLE_FRACTION = 1 / 32
# ... over reads this far apart or more. Reads closer than that are held to the same
# rate, never below SETTLE_MIN: at 10 ms a host side made at 1.3 GB/s moves 13 MiB a
# read, under a 512 MiB step's 16 MiB, and passed for still (its window read about 0,
# a clean beside a neighbour that gave memory back). A floor of 1 MiB took in more
# of neighbours' slow motion (replayed over 241 recorded jobs: 180 right against 188).
SETTLE_SPAN = 0.05


def settled(xs: Sequence[int | None]) -> list[bool]:
    """Return, per sample, whether device memory held still from the sample before to the one after.

    A sample taken while the workload changes its device memory can catch the
    host side half done (allocated but not yet resident, a mirror half made
    inside an allocation call the tracer has not recorded yet): such a point
    lies off the line by up to a whole step.
    """
    return [
        0 < i < len(xs) - 1 and x is not None and xs[i - 1] == x == xs[i + 1]
        for i, x in enumerate(xs)
    ]


def step_windows(
    xs: Sequence[int],
    ts: Sequence[float] | None = None,
    cost: Sequence[int | None] | None = None,
    rate: float = 0.0,
) -> dict[int, list[tuple[int, Edge]]]:
    """Return, by index into ``xs``, the window edges each sample is: where device memory changed.

    A change at sample ``i`` makes a window from sample ``i - 1`` to ``i + 1``
    when that sample still holds the new amount (a mirror made just after the
    call that moved device memory is still caught), else to ``i``. With the
    host's cost per sample (``cost``, at times ``ts``), each edge then moves
    outward while the cost kept moving in the step's direction (see the
    module's text). Windows are kept that short because any other process
    may move host memory while one is open; a read that caught a step half
    done lies off the other windows and is outvoted by them. One sample can
    close a window and open the next. ``rate`` (bytes a second): the rate
    other processes moved the host's cost at before the job; motion the
    step's way with it taken out widens a window too (:func:`edges`).
    """
    n = len(xs)
    changes = [i for i in range(1, n) if xs[i] != xs[i - 1]]
    marks: dict[int, list[tuple[int, Edge]]] = {}
    floor = 0  # no window opens before the one before it closed
    for step, i in enumerate(changes, start=1):
        nxt = changes[step] if step < len(changes) else n
        before, after = edges(xs[i] - xs[i - 1], i, floor, nxt, n, ts, cost, rate=rate)
        floor = after
        marks.setdefault(before, []).append((step, "before"))
        marks.setdefault(after, []).append((step, "after"))
    for found in marks.values():
        found.sort(key=lambda e: (e[0], e[1] == "before"))  # a window closes before the next opens
    return marks


def edges(
    delta: int,
    i: int,
    floor: int,
    nxt: int,
    n: int,
    ts: Sequence[float] | None,
    cost: Sequence[int | None] | None,
    reach: float = 0.0,
    rate: float = 0.0,
) -> tuple[int, int]:
    """Return the (before, after) reads of the window of a change of ``delta`` bytes at read ``i``.

    ``floor`` is where the window before it closed and ``nxt`` the next
    change (``n``, the number of reads, where there is none): the edges
    move no further (see :func:`step_windows`). With ``reach`` (seconds),
    the window first runs that long from its first read, as a host side
    that long would make it, and widens from there. An edge moves over
    reads where the cost moved the step's way as read, or with ``rate``
    (bytes a second, another process's) taken out: a host side made while a
    neighbour gave memory back at its pace looks still as read.
    """
    before = i - 1
    after = i + 1 if i + 1 < nxt else i
    if ts is None or cost is None:
        return before, after
    while reach and after + 1 < nxt and ts[after] - ts[before] < reach:
        after += 1
    moving = _mover(delta, cost, ts, rate)
    # Back over the run of moving reads that goes on across the change ...
    while (
        before > floor
        and ts[i] - ts[before - 1] <= SETTLE_HORIZON
        and moving(before, before + 1)
        and moving(before - 1, before)
    ):
        before -= 1
    # ... and on over the run that starts at it, unless that run goes on
    # into the next change: then it is the next step's, made before it.
    k = max(i, after - 1)
    while k + 1 < nxt and ts[k + 1] - ts[i] <= SETTLE_HORIZON and moving(k, k + 1):
        k += 1
    if k > after and not (k + 1 == nxt < n and moving(k, nxt)):
        after = k
    return before, after


def window_spans(marks: dict[int, list[tuple[int, Edge]]]) -> list[tuple[int, int]]:
    """Return each window's (before, after) reads from :func:`step_windows`' marks, in order."""
    found: dict[int, dict[Edge, int]] = {}
    for i, at in marks.items():
        for step, edge in at:
            found.setdefault(step, {})[edge] = i
    return sorted((e["before"], e["after"]) for e in found.values() if len(e) == 2)


def pause_windows(
    ts: Sequence[float],
    cost: Sequence[int | None],
    spans: Sequence[tuple[int, int]],
    delta: int,
    reach: float,
    rate: float = 0.0,
) -> list[tuple[int, int]]:
    """Return windows made as the step windows are, at reads between them where device memory held still.

    ``spans`` are the step windows (:func:`window_spans`). Between the first
    and the last, each pause is filled from its start with windows of a
    make-believe change of ``delta`` bytes whose host side lasts ``reach``
    seconds (the step windows' median length), each opening a read after the
    one before it closed: what the same rule makes of the host where the
    workload changed nothing, over as long (``rate`` as for :func:`edges`).
    """
    out: list[tuple[int, int]] = []
    for (_, closed), (opens, _) in itertools.pairwise(spans):
        lo, hi = closed + 1, opens  # reads of the pause; the next window opens at hi
        i = lo + 1
        while i + 1 < hi:
            before, after = edges(delta, i, lo, hi, len(ts), ts, cost, reach, rate)
            out.append((before, after))
            lo = after + 1
            i = lo + 1
    return out


def still_limit(delta: int, seconds: float) -> float:
    """Return how far the host's cost may move, in bytes, over ``seconds`` between reads and be still.

    ``delta`` is the step's change of device memory: :data:`SETTLE_MIN` or
    :data:`SETTLE_FRACTION` of the step over :data:`SETTLE_SPAN` or more,
    the same rate over less, never below :data:`SETTLE_MIN`.
    """
    still = max(SETTLE_MIN, abs(delta) * SETTLE_FRACTION)
    return min(still, max(SETTLE_MIN, still * seconds / SETTLE_SPAN))


def _mover(
    delta: int, cost: Sequence[int | None], ts: Sequence[float], rate: float = 0.0
) -> Callable[[int, int], bool]:
    """Return a test of whether the host's cost moved from one read to another the way ``delta`` moves it.

    As read, or with ``rate`` (bytes a second) taken out.
    """
    sign = 1 if delta > 0 else -1

    def moving(a: int, b: int) -> bool:
        ca, cb = cost[a], cost[b]
        if ca is None or cb is None:
            return False
        limit = still_limit(delta, abs(ts[b] - ts[a]))
        moved = sign * (cb - ca)
        return moved > limit or moved - sign * rate * (ts[b] - ts[a]) > limit

    return moving


__all__ = [
    "SETTLE_FRACTION",
    "SETTLE_HORIZON",
    "SETTLE_MIN",
    "SETTLE_SPAN",
    "edges",
    "pause_windows",
    "settled",
    "step_windows",
    "still_limit",
    "window_spans",
]
