"""Run the audit's SYCL set-ups on the simulated Level Zero driver (test support only).

The SYCL runtime pinned in the venv needs two workarounds to run on the
simulator under Debian's loader 1.8 (tests/simdriver/README.md, "The SYCL
runtime on the simulator"): a padded ``ZE_ENABLE_ALT_DRIVERS`` and
``zesim_guard_null_ddi_calls()`` before the runtime loads. The audit runs
every set-up in a child interpreter, so :func:`sycl_sim_env` puts
``child_site/`` on ``PYTHONPATH``: its ``sitecustomize`` applies both in
every child when ``L0MEM_TEST_SYCL_SIM`` names the simulator.

The ``sitecustomize`` also puts ``ZE_ENABLE_ALT_DRIVERS`` back in the SYCL
children, from which the audit removes it when every Level Zero device is
simulated (``Inventory.simulator_only``): without that no SYCL child would
see the simulator. ``host=`` adds the simulated mirror's ground truth to the
children's samples (tests/support/own_memory.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from l0mem.audit.model import SetupRun, SignalFit
from tests.support import own_memory, sim

MIB = 1 << 20
SIM_VAR = "L0MEM_TEST_SYCL_SIM"

# Loader 1.8 re-initializes once per loader layer of the runtime; absent paths
# make its driver list large enough never to be reallocated (README, workaround 1).
PADDING = ",".join(f"/nonexistent/l0mem-sim-pad-{i}.so" for i in range(4))

# Adapter settings only a remedy may set: inherited ones would change every run.
ADAPTER_KEYS = ("SYCL_UR_USE_LEVEL_ZERO_V2", "UR_L0_USM_RESIDENT")

RSS_SHMEM_SIGNAL = "proc.RssShmem"


def sycl_sim_env(
    driver_env: Mapping[str, str] | None = None, /, *, host: str | None = None, **config: object
) -> dict[str, str]:
    """Return os.environ set up so that audit children run the SYCL runtime on the simulator.

    ``host`` (``quiet`` or ``truth``): see :func:`tests.support.own_memory.host_env`.
    """
    env = sim.sim_env(driver_env, **config)
    drivers = f"{sim.build()},{PADDING}"
    env["ZE_ENABLE_ALT_DRIVERS"] = drivers
    env[SIM_VAR] = drivers
    # The conftest selects opencl:* for the rest of the suite.
    env["ONEAPI_DEVICE_SELECTOR"] = "level_zero:*"
    for key in ADAPTER_KEYS:
        env.pop(key, None)
    return own_memory.with_site(env) if host is None else own_memory.host_env(env, host)


@contextmanager
def sycl_sim_environ(
    driver_env: Mapping[str, str] | None = None, /, *, host: str | None = None, **config: object
) -> Iterator[dict[str, str]]:
    """Point this process's environment (inherited by audit children) at the simulator; restore it on exit."""
    env = sycl_sim_env(driver_env, host=host, **config)
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key not in env:
                mp.delenv(key)
        for key, value in env.items():
            if os.environ.get(key) != value:
                mp.setenv(key, value)
        yield env


def fit_of(run: SetupRun, signal: str) -> SignalFit:
    """Return the analysed fit of ``signal`` in ``run`` (fail the test when it has none)."""
    assert run.result is not None, f"{run.label}: not analysed ({run.status}: {run.reason})"
    fit = run.result.fit(signal)
    assert fit is not None and fit.slope is not None, f"{run.label}: no {signal} fit"
    return fit
