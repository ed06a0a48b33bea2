"""l0mem.p2p on the simulated Level Zero driver: peer matrix, copy routes, copy timing, size parsing."""

from __future__ import annotations

import pytest

import l0mem.core as core
from l0mem.core.backend import LevelZeroBackend
from l0mem.p2p import (
    copy_route,
    is_simulated,
    measure_copies,
    parse_size,
    parse_sizes,
    peer_matrix,
    run_p2p,
    staged_copy,
)
from tests.support import ze_session


@pytest.fixture(scope="module")
def sim():
    return ze_session.simulator()


@pytest.fixture
def clean(sim):
    ze_session.reset(sim)
    yield sim
    ze_session.reset(sim)


@pytest.fixture
def backend(clean):
    b = LevelZeroBackend(core.drivers()[0].devices()[:3], context="multi")
    yield b
    b.close()
    assert [clean.device_used(i) for i in range(3)] == [0, 0, 0]


def test_parse_sizes():
    assert parse_size("4096") == 4096
    assert parse_size("64K") == 64 << 10
    assert parse_size("16m") == 16 << 20
    assert parse_size("1GiB") == 1 << 30
    assert parse_sizes("1M, 4K,1M") == [1 << 20, 4 << 10]
    for bad in ("", "0", "-4K", "1.5M", "12X", "M"):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_peer_matrix_follows_the_driver(backend, clean):
    clean.set("peers", "0>1,1>0,2>0")
    peers = {(p.src, p.dst): p for p in peer_matrix(backend)}
    assert set(peers) == {(s, d) for s in range(3) for d in range(3) if s != d}
    for (s, d), p in peers.items():
        expect = (s, d) in {(0, 1), (1, 0), (2, 0)}
        assert p.can_access is expect and p.atomics is expect
        assert p.route == ("direct" if expect else "staged")
        if expect:
            assert p.bandwidth is not None and p.bandwidth > 0 and p.bandwidth_unit
    assert peers[(1, 2)].route_reason == "no peer access"


def test_separate_contexts_are_staged(clean):
    b = LevelZeroBackend(core.drivers()[0].devices()[:2], context="single")
    try:
        assert copy_route(b, 0, 1) == ("staged", "separate contexts")
        assert copy_route(b, 1, 1)[0] == "direct"
    finally:
        b.close()


def test_staged_copy_goes_through_the_host(backend, clean):
    src, dst = backend.allocate(0, 4096), backend.allocate(2, 4096)
    data = bytes(range(256)) * 16
    backend.upload(src, data).wait()
    clean.reset_counters()
    down, up = staged_copy(backend, dst, src, 1000)
    up.wait()
    down.wait()
    assert clean.bytes_moved(0, 2) == 0
    assert clean.bytes_moved(0, -1) == clean.bytes_moved(-1, 2) == 1000
    out = bytearray(1000)
    backend.download(dst, out).wait()
    assert bytes(out) == data[:1000]
    src.close()
    dst.close()


def test_measure_copies_covers_every_pair_and_kind(backend, clean):
    clean.set("peers", "0>1,1>0")
    clean.reset_counters()
    sizes = [4096, 65536]
    timings = measure_copies(backend, sizes=sizes, reps=3, warmup=1)
    keys = {(t.kind, t.src, t.dst, t.nbytes) for t in timings}
    for n in sizes:
        for s in range(3):
            assert ("same_device", s, s, n) in keys
            for d in range(3):
                if s != d:
                    assert ("direct", s, d, n) in keys and ("staged", s, d, n) in keys
    for t in timings:
        if t.kind == "direct" and {t.src, t.dst} != {0, 1}:
            assert t.skipped == "no peer access" and t.samples_ns == () and t.gbps is None
            continue
        assert t.skipped is None and len(t.samples_ns) == 3 and t.timing == "device"
        assert t.gbps_min is not None and t.gbps_max is not None and t.gbps is not None
        assert t.gbps_min <= t.gbps <= t.gbps_max
        assert t.spread is not None and t.spread >= 0
    # 4 direct-copy rounds (1 warm-up + 3) per size and direction between 0 and 1 only.
    assert clean.bytes_moved(0, 1) == clean.bytes_moved(1, 0) == 4 * sum(sizes)
    assert clean.bytes_moved(0, 2) == clean.bytes_moved(2, 1) == 0


def test_host_timing_is_used_when_asked(backend):
    timings = measure_copies(backend, [0], sizes=[1024], reps=2, warmup=0, timing="host")
    assert [t.kind for t in timings] == ["same_device"]
    assert timings[0].timing == "host" and all(ns > 0 for ns in timings[0].samples_ns)


def test_run_p2p_labels_the_simulator(backend):
    assert is_simulated(backend)
    result = run_p2p(backend, sizes=[2048], reps=2, warmup=0)
    assert result.simulated and any("simulator" in n for n in result.notes)
    d = result.to_dict()
    assert d["schema"] == "l0mem.p2p/1" and d["simulated"] is True
    assert len(d["peers"]) == 6 and len(d["devices"]) == 3
    assert {c["kind"] for c in d["copies"]} == {"same_device", "direct", "staged"}
    assert result.timing("staged", 0, 2, 2048) is not None
    assert result.timing("staged", 0, 2, 4096) is None


def test_bad_arguments(backend):
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[], reps=1)
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[16], reps=0)
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[16], kinds=["sideways"])  # type: ignore[list-item]
