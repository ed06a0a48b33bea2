"""Test-only start-up hook: the SYCL runtime's workarounds for the simulator, in every child.

Python imports this at start-up when this directory is on PYTHONPATH
(tests/support/sycl_sim.py puts it there). It acts only when
L0MEM_TEST_SYCL_SIM holds the padded driver list whose first entry is the
simulated driver; see tests/simdriver/README.md, "The SYCL runtime on the
simulator".
"""

from __future__ import annotations

import ctypes
import os


def _apply() -> None:
    drivers = os.environ.get("L0MEM_TEST_SYCL_SIM", "")
    if not drivers:
        return
    # The audit removes ZE_ENABLE_ALT_DRIVERS from its SYCL children when every
    # Level Zero device is simulated; these tests want the SYCL runtime on it.
    os.environ["ZE_ENABLE_ALT_DRIVERS"] = drivers
    # Must happen before the SYCL runtime loads: its adapter jumps through empty
    # dispatch slots of loader 1.8 on the second call of a newer function.
    if ctypes.CDLL(drivers.split(",")[0]).zesim_guard_null_ddi_calls() != 0:
        raise RuntimeError("zesim_guard_null_ddi_calls failed (it works on x86-64 only)")


_apply()
