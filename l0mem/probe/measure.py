"""What a block of one's own code cost the host: a snapshot before it and one after.

For example::

    from l0mem.probe import host_cost

    with host_cost() as cost:
        buf = ctx.allocate_device(dev0, 1 << 30)
        ctx.make_resident(dev1, buf)
    print(cost.host, cost["meminfo.Shmem"], cost.per_gib(1 << 30))

The sign is the same for every signal: a positive cost is memory taken from
the host (``host.available`` fell, Shmem rose), a negative one memory given
back; for a device signal (``sysman.*``, DRM VRAM) it is more device memory in
use. ``host`` is the cost in ``host.available`` (MemAvailable plus the
per-CPU free lists: every page anyone took), or in MemAvailable where the
per-CPU lists cannot be read.

One block is one step window: every other process's memory that moved while
it ran is in it too. On a busy machine run the block several times, undoing
it in between, and take the median of the costs
(:func:`l0mem.estimate.median_interval` gives it with a distribution-free
interval); ``l0mem audit`` does exactly that for the allocation paths it
knows.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from l0mem.probe import signals
from l0mem.probe.snapshot import Snapshot, take_snapshot

_MIB, _GIB = 1 << 20, 1 << 30


@dataclasses.dataclass
class HostCost:
    """The host memory a block cost, per signal, in bytes: positive is memory taken from the host."""

    before: Snapshot
    after: Snapshot | None = None  # None while the block runs

    @property
    def bytes(self) -> dict[str, int]:
        """Return every signal's cost in bytes (host and device signals read before and after)."""
        if self.after is None:
            raise RuntimeError("the block has not ended yet: read the cost after the with block")
        before, out = self.before.values, {}
        for name, now in self.after.values.items():
            if name not in before:
                continue
            try:
                out[name] = signals.host_cost(name, before[name], now)
            except ValueError:
                continue  # a value that is no memory signal (a test's own key)
        return out

    def __getitem__(self, signal: str) -> int:
        """Return the cost in ``signal`` in bytes; KeyError when it was not read both times."""
        return self.bytes[signal]

    @property
    def host(self) -> int | None:
        """Return the cost in the host's available memory in bytes, or None where none was read."""
        return signals.host_value(self.bytes)

    @property
    def seconds(self) -> float | None:
        """Return how long the block took, or None while it runs."""
        return None if self.after is None else self.after.t - self.before.t

    def per_gib(self, device_bytes: int, signal: str | None = None) -> float | None:
        """Return the cost in MiB per GiB of ``device_bytes`` (1024 is a 1:1 mirror), or None."""
        if device_bytes <= 0:
            raise ValueError(f"device_bytes must be > 0, got {device_bytes}")
        cost = self.host if signal is None else self.bytes.get(signal)
        return None if cost is None else (cost / _MIB) / (device_bytes / _GIB)


@contextlib.contextmanager
def host_cost() -> Iterator[HostCost]:
    """Measure the host memory the ``with`` block costs (a snapshot before and after it).

    The snapshot after is taken however the block ends, so a block that
    raised still has its cost.
    """
    cost = HostCost(take_snapshot())
    try:
        yield cost
    finally:
        cost.after = take_snapshot()


__all__ = ["HostCost", "host_cost"]
