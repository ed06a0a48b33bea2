"""The conformance suite runs only where Intel's Level Zero GPU driver (NEO) is installed.

The README's test command runs it inside a Debian sid root (.ci/sidroot) after
the main suite; the main suite leaves this directory out (pyproject's
``--ignore``). Elsewhere, given explicitly, every test is skipped with the
reason.
"""

from __future__ import annotations

import pytest

from tests.conformance import neo


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the suite's tests when NEO's driver library is absent."""
    if neo.driver_present():
        return
    skip = pytest.mark.skip(reason=f"Intel's Level Zero GPU driver ({neo.DRIVER}) is not installed")
    for item in items:
        if "conformance" in item.nodeid.split("/"):
            item.add_marker(skip)
