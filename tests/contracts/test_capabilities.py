"""Contract: the protocol's shape and its capability queries (types, consistency, device indices)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from l0mem.backends import (
    Backend,
    DeviceBuffer,
    DeviceMemory,
    Event,
    PeerAccess,
    ResidencyUnsupported,
    is_simulator_name,
)
from tests.contracts.cases import Case


def _optional_int(value: object, *, positive: bool = False) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return value > 0 if positive else value >= 0


def test_satisfies_the_protocol(case: Case, backend: Backend) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == case.kind
    buf = backend.allocate(0, 16)
    ev = backend.fill(buf, b"\0")
    assert isinstance(buf, DeviceBuffer)
    assert isinstance(buf.view(0, 8), DeviceBuffer)
    assert isinstance(ev, Event)
    ev.wait()
    assert backend.closed is False
    with backend as entered:
        assert entered is backend
    assert backend.closed is True, "leaving the with block closes the backend"


def test_devices_and_names(case: Case, backend: Backend) -> None:
    count = backend.device_count()
    assert type(count) is int and count == case.device_count
    for i in range(count):
        name = backend.device_name(i)
        assert isinstance(name, str) and name.strip(), f"device {i} has no name"


def test_simulated_is_a_bool_true_exactly_on_the_simulator(case: Case, backend: Backend) -> None:
    assert type(backend.simulated) is bool
    assert backend.simulated is case.simulated
    names = [backend.device_name(i) for i in range(backend.device_count())]
    if case.kind == "l0":
        # Level Zero names are the driver's own, which is how `simulated` decides.
        assert backend.simulated is any(is_simulator_name(n) for n in names)
    else:
        assert not any(is_simulator_name(n) for n in names)


def test_memory_records(case: Case, backend: Backend) -> None:
    for i in range(backend.device_count()):
        mem = backend.memory(i)
        assert isinstance(mem, DeviceMemory)
        assert _optional_int(mem.total, positive=True), mem
        assert _optional_int(mem.max_alloc, positive=True), mem
        assert _optional_int(mem.free), mem
        if mem.total is not None and mem.max_alloc is not None:
            assert mem.max_alloc <= mem.total, mem
        if mem.total is not None and mem.free is not None:
            assert mem.free <= mem.total, mem
        assert type(mem.host_backed) is bool
        assert mem.host_backed is case.host_backed


def test_peer_access_records(backend: Backend) -> None:
    n = backend.device_count()
    for s in range(n):
        for d in range(n):
            p = backend.peer_access(s, d)
            assert isinstance(p, PeerAccess)
            assert (p.src, p.dst) == (s, d)
            for flag in (p.access, p.atomics):
                assert flag is None or type(flag) is bool, p
            for number in (p.bandwidth, p.latency):
                assert _optional_int(number), p
            for unit in (p.bandwidth_unit, p.latency_unit):
                assert unit is None or isinstance(unit, str), p
        assert backend.peer_access(s, s).access is True, "a device reaches its own memory"


def test_same_context_is_an_equivalence_matching_the_layout(case: Case, backend: Backend) -> None:
    n = backend.device_count()
    same = [[backend.same_context(a, b) for b in range(n)] for a in range(n)]
    for a in range(n):
        assert same[a][a] is True
        for b in range(n):
            assert type(same[a][b]) is bool
            assert same[a][b] == same[b][a], "symmetric"
            assert same[a][b] == (case.contexts[a] == case.contexts[b])
            for c in range(n):
                if same[a][b] and same[b][c]:
                    assert same[a][c], "transitive"


def test_copy_routes(case: Case, backend: Backend) -> None:
    n = backend.device_count()
    for s in range(n):
        assert backend.copy_route(s, s) == ("direct", "same device")
        for d in range(n):
            kind, why = backend.copy_route(s, d)
            assert kind in ("direct", "staged")
            assert isinstance(why, str) and why
            if s == d:
                continue
            assert kind == ("direct" if (s, d) in case.direct else "staged"), (s, d, why)
            if kind == "direct":
                assert backend.same_context(s, d), "a direct copy needs one context"
                assert backend.peer_access(s, d).access is not False, "nor a denied peer"
            if not backend.same_context(s, d):
                assert kind == "staged"


def _index_calls(backend: Backend) -> list[tuple[str, Callable[[Any], object]]]:
    buf = backend.allocate(0, 64)
    return [
        ("device_name", backend.device_name),
        ("memory", backend.memory),
        ("peer_access src", lambda i: backend.peer_access(i, 0)),
        ("peer_access dst", lambda i: backend.peer_access(0, i)),
        ("same_context", lambda i: backend.same_context(0, i)),
        ("copy_route", lambda i: backend.copy_route(i, 0)),
        ("allocate", lambda i: backend.allocate(i, 16)),
        (
            "copy queue_device",
            lambda i: backend.copy(buf.view(32, 32), buf.view(0, 32), queue_device=i),
        ),
        ("launch", lambda i: backend.launch("l0mem_f32_add", i, [buf, buf, 1], 1)),
        ("make_resident", lambda i: backend.make_resident(buf, i)),
        ("synchronize", backend.synchronize),
    ]


@pytest.mark.parametrize("bad", [-1, "count", 10**9])
def test_out_of_range_device_index_is_an_index_error(backend: Backend, bad: object) -> None:
    index = backend.device_count() if bad == "count" else bad
    for what, call in _index_calls(backend):
        with pytest.raises(IndexError):
            call(index)
            pytest.fail(f"{what}({index!r}) did not raise")


@pytest.mark.parametrize("bad", ["0", 0.0, None, True, 1.0 + 0j])
def test_device_index_of_the_wrong_type_is_a_type_error(backend: Backend, bad: object) -> None:
    for what, call in _index_calls(backend):
        if bad is None and what in ("copy queue_device", "synchronize"):
            continue  # None is their default: the source's device, every device
        with pytest.raises(TypeError):
            call(bad)
            pytest.fail(f"{what}({bad!r}) did not raise")


def test_make_resident_is_the_residency_call_or_says_there_is_none(
    case: Case, backend: Backend
) -> None:
    # The one step that mirrors on affected stacks, through the backend's own API.
    buf = backend.allocate(0, 1 << 16)
    with pytest.raises(TypeError):
        backend.make_resident(object(), 0)  # type: ignore[arg-type]
    for peer in range(backend.device_count()):
        if case.kind == "sycl":
            with pytest.raises(ResidencyUnsupported, match="open_backend"):
                backend.make_resident(buf, peer)
        elif backend.same_context(0, peer):
            backend.make_resident(buf, peer)
        else:
            with pytest.raises(ValueError, match="context"):
                backend.make_resident(buf, peer)
    buf.close()
    with pytest.raises(ValueError):
        backend.make_resident(buf, 0)  # a closed buffer is misuse, on every backend
