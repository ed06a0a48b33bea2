"""Shared pytest configuration for l0mem."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``hardware`` unless a real Intel Level Zero GPU is present."""
    from tests.support.hardware import intel_gpu_present

    present, why = intel_gpu_present()
    if present:
        return
    skip = pytest.mark.skip(reason=f"needs a real Intel GPU: {why}")
    for item in items:
        if "hardware" in item.keywords:
            item.add_marker(skip)
