"""Test-only start-up hook for the audit's child processes (and any process given this directory).

Python imports this at start-up when this directory is on PYTHONPATH
(tests/support/sycl_sim.py and tests/support/own_memory.py put it there). It
does nothing unless one of these is set:

- ``L0MEM_TEST_SYCL_SIM``: the padded driver list whose first entry is the
  simulated driver; applies the SYCL runtime's workarounds for it (see
  tests/simdriver/README.md, "The SYCL runtime on the simulator").
- ``L0MEM_TEST_HOST`` (``truth`` or ``quiet``): adds the simulated mirror's
  ground truth to every memory snapshot and, for ``quiet``, models the
  system-wide signals as a host moved by this process alone (host_model.py).
"""

from __future__ import annotations

import ctypes
import os


def _sycl_sim() -> None:
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


def _host() -> None:
    mode = os.environ.get("L0MEM_TEST_HOST", "")
    if mode:
        import host_model  # this directory is on sys.path: that is how this file was found

        host_model.install(mode)


_sycl_sim()
_host()
