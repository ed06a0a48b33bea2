"""Wait for system-wide host memory to hold still before a measurement is retaken.

Host memory signals are system-wide: other processes allocating or freeing move
them, so a disturbed measurement is retaken after a quiet window.
"""

from __future__ import annotations

import time

MIB = 1 << 20
QUIET_MIB = 2.0  # host memory moving less than this over the window counts as quiet
QUIET_WINDOW_S = 0.5
QUIET_WAIT_S = 15.0  # longest wait for a quiet window before retaking anyway


def host_available() -> int:
    """Return the host memory available now (host.available, else MemAvailable), in bytes."""
    return host_value("host.available")


def host_value(signal: str) -> int:
    """Return ``signal`` now, in bytes (``host.available`` falls back to MemAvailable)."""
    from l0mem.probe import take_snapshot

    values = take_snapshot().values
    if signal == "host.available":
        return values.get(signal, values["meminfo.MemAvailable"])
    return values[signal]


def wait_for_quiet(
    signal: str = "host.available",
    *,
    window_s: float = QUIET_WINDOW_S,
    wait_s: float = QUIET_WAIT_S,
) -> bool:
    """Wait until ``signal`` holds still for ``window_s``, at most ``wait_s``; False on giving up."""
    # Retaking at once would most likely fall into the same burst of other processes.
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        seen = []
        end = time.monotonic() + window_s
        while time.monotonic() < end:
            seen.append(host_value(signal))
            time.sleep(0.02)
        if max(seen) - min(seen) <= QUIET_MIB * MIB:
            return True
    return False
