"""A fake host clock and events timed by it, for tests of l0mem.bench's timing."""

from __future__ import annotations

import pytest


class FakeClock:
    """A host clock that moves only when told to (an event waited for, an enqueue)."""

    def __init__(self) -> None:
        self.ns = 0

    def now(self) -> int:
        """Return the current time in ns."""
        return self.ns

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
        """Make l0mem.bench.timing read this clock for the rest of the test; return it."""
        monkeypatch.setattr("l0mem.bench.timing.time.perf_counter_ns", self.now)
        return self


class FakeEvent:
    """An event whose wait takes ``wait_ns`` of host time and whose device time is ``device_ns``."""

    def __init__(self, clock: FakeClock, device_ns: int | None, wait_ns: int) -> None:
        self.clock, self.device_ns, self.wait_ns, self.done = clock, device_ns, wait_ns, False

    def wait(self, timeout: float | None = None) -> None:
        """Advance the clock by ``wait_ns`` the first time."""
        if not self.done:
            self.clock.ns += self.wait_ns
            self.done = True

    def elapsed_ns(self) -> int | None:
        """Return the device time; reading it before the wait is a bug in the caller."""
        assert self.done, "device time read before the event was waited for"
        return self.device_ns
