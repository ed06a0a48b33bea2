"""Which reads of a watch its series keeps: those that tell about a change of device memory, and one per interval.

``run`` and ``watch`` read the tree far more often than they keep: a read
is kept when it is the first, when an interval has passed since the last
one kept, when a traced call was under way during it, when device memory
(any traced, DRM or Sysman value) moved within two reads of it, or when,
within :data:`~l0mem.watch.windows.SETTLE_HORIZON` of such a change, the
host's available memory moved since the last read kept or to the next read. The last
keeps the reads the step windows move their edges over (a mirror made
inside an allocation call, before device memory is seen to move), so a read
is judged only once that much time has passed after it.
"""

from __future__ import annotations

from collections.abc import Mapping

from l0mem.probe.signals import host_value
from l0mem.watch.series import IN_FLIGHT, WatchSample
from l0mem.watch.windows import SETTLE_HORIZON, SETTLE_MIN

# Half the windows' own test of stillness: a read is dropped near a change only
# when it lies within this of the last read kept and of the read after it, so
# that the host moves by at most the test between any two reads kept, or
# between two reads of those dropped: the windows over the reads kept are
# those over every read.
MOVED = SETTLE_MIN // 2


def device_key(values: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Return every device memory value of a read (traced, DRM, Sysman), to see whether any moved."""
    return tuple(
        (k, v)
        for k, v in sorted(values.items())
        if k.startswith(("trace.", "drm.", "sysman.")) and k != IN_FLIGHT
    )


def _moved(a: WatchSample, b: WatchSample) -> bool:
    ha, hb = host_value(a.values), host_value(b.values)
    return ha is not None and hb is not None and abs(hb - ha) > MOVED


class Retention:
    """The reads a watch keeps, judged :data:`SETTLE_HORIZON` seconds (and two reads) after each."""

    def __init__(self, interval: float, look: float, horizon: float = SETTLE_HORIZON) -> None:
        """Keep one read per ``interval`` between changes; reads come every ``look`` seconds."""
        self.interval = interval
        self.keep_all = look >= interval
        self.horizon = horizon
        self._kept: list[WatchSample] = []
        self._recent: list[WatchSample] = []  # every read still needed to judge one
        self._keys: list[tuple[tuple[str, int], ...]] = []  # device_key of each recent read
        self._next = 0  # index into _recent of the first read not yet judged

    @property
    def samples(self) -> tuple[WatchSample, ...]:
        """Return the reads kept so far, with those not yet judged."""
        return (*self._kept, *self._recent[self._next :])

    def add(self, sample: WatchSample) -> None:
        """Add the newest read; judge every earlier one that can be judged now."""
        if self.keep_all:
            self._kept.append(sample)
            return
        self._recent.append(sample)
        self._keys.append(device_key(sample.values))
        while self._next + 2 < len(self._recent) and (
            sample.t - self._recent[self._next].t > self.horizon
        ):
            if self._tells(self._next):
                self._kept.append(self._recent[self._next])
            self._next += 1
        self._trim()

    def _tells(self, i: int) -> bool:
        """Return whether the read at ``i`` (of _recent) tells something the series needs."""
        m = self._recent[i]
        if not self._kept or m.values.get(IN_FLIGHT) or m.t - self._kept[-1].t >= self.interval:
            return True
        if len(set(self._keys[max(0, i - 2) : i + 3])) > 1:
            return True
        # A change within the horizon: a read there whose device memory differs from
        # the read before it (which may lie just outside).
        near = any(
            abs(self._recent[j].t - m.t) <= self.horizon and self._keys[j] != self._keys[j - 1]
            for j in range(1, len(self._recent))
        )
        return near and (_moved(self._kept[-1], m) or _moved(m, self._recent[i + 1]))

    def _trim(self) -> None:
        """Forget reads no judgement needs: more than a horizon, one read and two reads back."""
        if not self._next:
            return
        oldest = self._recent[self._next].t - self.horizon
        drop = 0
        # The last read before the horizon stays: a change is told from the read before it.
        while drop < self._next - 2 and self._recent[drop + 1].t < oldest:
            drop += 1
        if drop:
            del self._recent[:drop], self._keys[:drop]
            self._next -= drop


__all__ = ["MOVED", "Retention", "device_key"]
