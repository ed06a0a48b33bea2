"""One simulated Level Zero driver per test process, for in-process core tests.

The loader reads ``ZE_ENABLE_ALT_DRIVERS`` at the first ``zeInit`` of the
process, so :func:`simulator` builds the simulator and sets the environment
before anything initializes Level Zero. The default configuration has four
devices with peer access between all of them. Everything measured through it
is a simulator's number, never a hardware result.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

DEFAULT_CONFIG: dict[str, Any] = {"devices": 4, "device_memory": "1G", "peers": "all"}

_lock = threading.Lock()
_control: Any = None


def simulator() -> Any:
    """Return the SimControl of this process's simulator, setting it up on first use."""
    global _control
    with _lock:
        if _control is None:
            from tests.support import sim

            path: Path = sim.build()
            for key, value in sim.sim_env(**DEFAULT_CONFIG).items():
                if key.startswith("ZESIM_") or key in ("ZE_ENABLE_ALT_DRIVERS", "ZES_ENABLE_SYSMAN"):
                    os.environ[key] = value
            import l0mem.core

            l0mem.core.drivers()  # the first zeInit, now bound to the simulator
            _control = sim.SimControl(path)
        return _control


def reset(control: Any) -> None:
    """Restore the default run-time configuration and clear fault injection."""
    control.set("fail_oom_after", "off")
    control.set("fail_alloc_at", "0")
    control.set("device_lost_at", "0")
    control.set("mirror", "none")
    control.set("peers", "all")
    control.set("timestamp_not_ready", "0")
    control.set("fill_noop", "0")
    control.set("link_gbps", "0")
    for key in ("corrupt_offsets", "corrupt_rate", "hang_copy_at"):
        control.set(key, "off")
    control.reset_counters()
