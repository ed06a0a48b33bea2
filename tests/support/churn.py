"""Another process that churns memory beside a synthetic watched job: bursts, jumps and give-backs."""

from __future__ import annotations

import random

MIB = 1 << 20


def churned(rng: random.Random, held: float, burst: float, dt: float, *, give_back: bool = False) -> float:
    """Return what the churning process holds (bytes) ``dt`` seconds after holding ``held``.

    On most reads it takes up to three times ``burst`` bytes a second, on a
    third it jumps by up to 60 MiB either way, and with ``give_back`` now and
    then gives back 256-512 MiB of what it holds past 512 MiB.
    """
    if rng.random() < 0.7:
        held += burst * dt * rng.uniform(0.0, 3.0)
    if rng.random() < 0.33:
        held += rng.uniform(-60.0, 60.0) * MIB
    if give_back and rng.random() < 0.004 and held > 512 * MIB:
        held -= rng.uniform(256.0, 512.0) * MIB
    return held
