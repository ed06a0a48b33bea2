"""Fixtures of the contract tests: one ``backend`` per set-up in :data:`cases.CASES`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from l0mem.backends import Backend
from tests.contracts import cases


@pytest.fixture(params=cases.params())
def case(request: pytest.FixtureRequest) -> cases.Case:
    """Return the set-up under test."""
    c: cases.Case = request.param
    return c


@pytest.fixture
def backend(case: cases.Case) -> Iterator[Backend]:
    """Yield the set-up's backend; afterwards close it and check (simulator) that memory came back."""
    yield from cases.opened(case)
    case.check_released()


@pytest.fixture
def twin(case: cases.Case, backend: Backend) -> Iterator[Backend]:
    """Yield a second backend of the same set-up, open alongside ``backend``."""
    yield from cases.opened(case)


@pytest.fixture
def stranger(case: cases.Case, backend: Backend) -> Iterator[Backend]:
    """Yield an open backend of another kind (SYCL for Level Zero and the other way round)."""
    other = cases.other_kind(case)
    yield from cases.opened(other)
    other.check_released()
