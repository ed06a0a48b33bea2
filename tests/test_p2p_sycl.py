"""l0mem.bench.copies (p2p) on SYCL CPU sub-devices: peer matrix and copy routes (no direct copies are made)."""

from __future__ import annotations

from typing import Any

import pytest

from l0mem.backends import SyclBackend
from l0mem.backends.sycl import direct_copy_hazard as sycl_direct_copy_hazard
from l0mem.bench.copies import peer_matrix
from l0mem.sycl import load_dpctl

pytestmark = pytest.mark.sycl


@pytest.fixture(scope="module")
def subs() -> list[Any]:
    dpctl = load_dpctl()
    root = dpctl.get_devices(device_type="cpu")[0]
    units = int(root.max_compute_units)
    if units < 2:
        pytest.skip("a one-core CPU cannot be partitioned")
    return [root, *root.create_sub_devices(partition=[units // 2] * 2)]


def test_hazard_is_cpu_sub_devices_only(subs):
    root, a, b = subs
    assert sycl_direct_copy_hazard(a, b)
    assert sycl_direct_copy_hazard(b, a)
    assert not sycl_direct_copy_hazard(root, root)
    assert not sycl_direct_copy_hazard(a, a)


def test_sub_devices_are_staged(subs):
    _, a, b = subs
    with SyclBackend([a, b]) as backend:
        assert backend.copy_route(0, 1)[0] == "staged"
        peers = peer_matrix(backend)
        assert [(p.src, p.dst) for p in peers] == [(0, 1), (1, 0)]
        for p in peers:
            assert isinstance(p.can_access, bool) and isinstance(p.atomics, bool)
            assert p.route == "staged" and p.bandwidth is None


def test_two_queues_on_one_root_device_copy_directly(subs):
    root = subs[0]
    with SyclBackend([root, root]) as backend:
        assert backend.same_context(0, 1)
        assert backend.copy_route(0, 1) == ("direct", "one context")
        peers = peer_matrix(backend)
        assert all(p.can_access and p.route == "direct" for p in peers)
