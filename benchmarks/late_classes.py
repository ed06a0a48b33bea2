"""Watched jobs whose host side is paid late and slowly: how many each class reads wrongly.

    python -m benchmarks.late_classes [--jobs 60] [--seed 0]

Synthetic jobs (l0mem's own series, no simulator process), classes a
read-only review found wrong cleans in (open in issue 21): a host side paid
late at 50-300 MB/s, so that it spreads over much of the pause after its
step (``slow``); the same with steps 0.3 s apart (``gap03``); a late host
side paid over 40-80% of the pause (``spread``); and a neighbour giving
memory back in steps of 1-10 MiB rather than steadily (``stepwise``). Ratios
0.12-0.5 (all of them partial: a ``clean`` is a wrong clean), steps of
32-512 MiB, a neighbour giving back 0-80 MiB/s, reads jittering by up to
1.5 MiB. Prints per class how many jobs read right, inconclusive, wrong,
and wrong clean. A measurement of the estimation, not a test: it exits 0.
"""

from __future__ import annotations

import argparse
import collections
import random

from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize
from tests.test_watch_late import late_job, truth

MIB = 1 << 20
GIB = 1 << 30
CLASSES = ("slow", "gap03", "spread", "stepwise")


def stepwise_job(rng: random.Random, seed: int, ratio: float, step_mib: int, gap: float) -> Series:
    """Return a job paying ``ratio`` of each step late, beside a neighbour giving back in steps."""
    step = step_mib * MIB
    changes = [1.0 + k * gap + rng.uniform(0.0, 0.1 * gap) for k in range(rng.randint(6, 14))]
    delay, share = rng.uniform(0.1, 0.8) * gap, rng.choice([0.5, 1.0])
    pace = rng.choice([0.1e9, 0.3e9, 1.3e9])
    give, every = rng.choice([1.0, 2.0, 5.0, 10.0]) * MIB, rng.choice([0.05, 0.1, 0.25, 0.5])
    jitter = rng.choice([0.0, 0.5, 1.5]) * MIB
    end = changes[-1] + 1.5
    noise = random.Random(seed)
    samples, t = [], 0.0
    while t < end:
        t += noise.uniform(0.008, 0.012)
        freed = t >= end - 0.5
        device = 0 if freed else step * sum(1 for c in changes if c <= t)
        host = 0.0
        for c in changes if not freed else ():
            if t >= c:
                host += ratio * step * (1.0 - share)
            if t >= c + delay:
                host += min(ratio * step * share, (t - c - delay) * pace)
        other = -give * int(t / every)
        off = noise.uniform(-1.0, 1.0) * jitter
        values = {"host.available": 64 * GIB - round(host + other + off), "sysman.0.used": device}
        samples.append(WatchSample(round(t, 6), values, pids=1))
    base = WatchSample(0.0, {"host.available": 64 * GIB, "sysman.0.used": 0})
    return Series(base, tuple(samples), {})


def job(kind: str, seed: int) -> tuple[Series, float]:
    """Return one seeded job of class ``kind`` and its ratio."""
    rng = random.Random(f"{kind}-{seed}")
    ratio = rng.choice([0.12, 0.15, 0.2, 0.3, 0.5])
    step_mib = rng.choice([32, 64, 128, 256, 512])
    gap = 0.3 if kind == "gap03" else rng.choice([0.3, 0.5, 1.0])
    if kind == "stepwise":
        return stepwise_job(rng, seed, ratio, step_mib, gap), ratio
    late = rng.choice([0.3, 0.5, 1.0]) if kind != "spread" else rng.choice([0.5, 1.0])
    if kind == "spread":
        delay = rng.uniform(0.05, 0.2) * gap
        pace = ratio * step_mib * MIB * late / (rng.uniform(0.4, 0.8) * gap)
    else:
        delay = rng.uniform(0.05, 0.9) * gap
        pace = rng.choice([0.05e9, 0.1e9, 0.2e9, 0.3e9])
    series = late_job(
        seed,
        ratio,
        steps=rng.randint(6, 14),
        step=step_mib * MIB,
        gap=gap,
        start=rng.choice([0.3, 1.0]),
        host_rate=pace,
        late=late,
        delay=delay,
        giving=rng.choice([0.0, 5.0, 10.0, 20.0, 40.0, 80.0]),
        since=rng.choice([0.0, 1.0]),
        bumps=rng.randint(0, 2),
        jitter=1.5 if kind == "spread" else rng.choice([0.0, 0.5, 1.5]),
    )
    return series, ratio


def main(argv: list[str] | None = None) -> int:
    """Print, per class, how many seeded jobs read right, inconclusive, wrong and wrong clean."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=60, help="jobs a class")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    args = parser.parse_args(argv)
    print(f"{'class':10s} {'jobs':>5s} {'right':>6s} {'inconcl.':>9s} {'wrong':>6s} {'clean':>6s}")
    for kind in CLASSES:
        tally: collections.Counter[str] = collections.Counter()
        for seed in range(args.seed, args.seed + args.jobs):
            series, ratio = job(kind, seed)
            verdict = summarize(series).verdict
            right = truth(ratio)
            tally["right" if verdict == right else verdict if verdict == "inconclusive" else "wrong"] += 1
            tally["clean"] += verdict == "clean"
        print(
            f"{kind:10s} {args.jobs:5d} {tally['right']:6d} {tally['inconclusive']:9d} "
            f"{tally['wrong']:6d} {tally['clean']:6d}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
