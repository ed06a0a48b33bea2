"""Shared pytest configuration for l0mem."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.hardware import intel_gpu_present

_GPU_PRESENT, _GPU_WHY = intel_gpu_present()

if not _GPU_PRESENT:
    # Without an Intel GPU the tests point the Level Zero loader at the simulated
    # driver; the SYCL runtime's Level Zero adapter would load it too and cannot
    # run on it, so SYCL tests use the OpenCL CPU device only.
    os.environ.setdefault("ONEAPI_DEVICE_SELECTOR", "opencl:*")


def pytest_configure(config: pytest.Config) -> None:
    """Give the stop signals the handling a job started from a terminal has."""
    # A suite started under nohup or as a background job of a script inherits
    # SIGHUP or SIGINT ignored, and so would every l0mem process the tests
    # start; l0mem rightly keeps an inherited ignore, so the signal tests would
    # test nohup instead. tests/test_cli_signals.py tests nohup on purpose.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(number) is signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``hardware`` unless a real Intel Level Zero GPU is present."""
    if _GPU_PRESENT:
        return
    skip = pytest.mark.skip(reason=f"needs a real Intel GPU: {_GPU_WHY}")
    for item in items:
        if "hardware" in item.keywords:
            item.add_marker(skip)
