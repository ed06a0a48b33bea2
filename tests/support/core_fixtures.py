"""Pytest fixtures for in-process tests of l0mem.core on the simulator.

A test module takes the ones it uses by name, e.g. ``sim = core_fixtures.sim``;
pytest then scopes them to that module as if they were defined there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import l0mem.core as core
from tests.support import ze_session


@pytest.fixture(scope="module")
def sim() -> Any:
    """Return the SimControl of this process's simulator."""
    return ze_session.simulator()


@pytest.fixture
def clean(sim: Any) -> Iterator[Any]:
    """Yield the simulator with its default run-time configuration, restored afterwards."""
    ze_session.reset(sim)
    yield sim
    ze_session.reset(sim)


@pytest.fixture(scope="module")
def driver(sim: Any) -> core.Driver:
    """Return the simulator's Level Zero driver."""
    return core.drivers()[0]


@pytest.fixture
def ctx(clean: Any, driver: core.Driver) -> Iterator[core.Context]:
    """Yield a context over every simulated device, closed afterwards."""
    c = driver.create_context()
    yield c
    c.close()


@pytest.fixture
def backend3(clean: Any) -> Iterator[Any]:
    """Yield a Level Zero backend over three simulated devices in one context; no memory left after."""
    from l0mem.backends.levelzero import LevelZeroBackend

    b = LevelZeroBackend(core.drivers()[0].devices()[:3], context="multi")
    yield b
    b.close()
    assert [clean.device_used(i) for i in range(3)] == [0, 0, 0]
