"""Kernel timestamps to durations: the valid bits, wraps, and ends before their starts (issue 9)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from l0mem.core.events import timestamp_ticks
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean
driver = core_fixtures.driver
ctx = core_fixtures.ctx

TOP32 = 1 << 32


def _device(bits: int, resolution_ns: int = 1) -> SimpleNamespace:
    """Return a stand-in device whose properties report ``bits`` valid timestamp bits."""
    props = SimpleNamespace(kernel_timestamp_valid_bits=bits, timer_resolution_ns=resolution_ns)
    return SimpleNamespace(properties=props)


@pytest.mark.parametrize(
    ("start", "end", "bits", "ticks"),
    [
        (5, 12, 32, 7),
        (TOP32 - 10, 5, 32, 15),  # a wrap within the valid bits
        ((7 << 40) | (TOP32 - 10), (3 << 40) | 5, 32, 15),  # bits above the valid ones ignored
        (5, 12, 0, 7),  # 0 valid bits reported: read as 64
        (12, 5, 64, None),  # a 64-bit counter does not wrap
        (12, 5, 0, None),
        (12, 5, 32, None),  # one tick back is no wrap: 2**32 - 7 ticks is implausible
        (1 << 31, 0, 32, 1 << 31),  # half the range: still a wrap
        ((1 << 31) - 1, 0, 32, None),
    ],
)
def test_timestamp_ticks(start: int, end: int, bits: int, ticks: int | None) -> None:
    assert timestamp_ticks(start, end, bits) == ticks


@pytest.mark.parametrize(
    ("start", "end", "bits", "ns"),
    [
        (TOP32 - 10, 5, 32, 15 * 52),
        (100, 40, 64, None),
        (100, 40, 32, None),
        (40, 100, 64, 60 * 52),
    ],
)
def test_duration_ns_of_an_event(
    ctx, monkeypatch: pytest.MonkeyPatch, start: int, end: int, bits: int, ns: int | None
) -> None:
    ev = ctx.event_pool(1, timestamps=True).event(0)
    monkeypatch.setattr(ev, "kernel_timestamp", lambda: (start, end))
    assert ev.duration_ns(_device(bits, 52)) == ns
