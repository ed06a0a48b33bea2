"""l0mem.bench.copies (p2p) on the simulated Level Zero driver: peer matrix, copy routes, copy timing, size parsing."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import l0mem.core as core
from l0mem.backends import (
    DeviceMemory,
    HostMemory,
    PeerAccess,
    RouteKind,
    is_simulator_name,
)
from l0mem.backends.levelzero import LevelZeroBackend
from l0mem.backends.staging import Stager
from l0mem.bench.copies import measure_copies, peer_matrix
from l0mem.bench.p2p import run_p2p
from l0mem.bench.timing import FALLBACK_NOTE
from l0mem.units import parse_size, parse_sizes
from tests.support import core_fixtures
from tests.support.fake_events import FakeClock, FakeEvent

sim = core_fixtures.sim
clean = core_fixtures.clean


backend = core_fixtures.backend3


def test_parse_sizes():
    assert parse_size("4096") == 4096
    assert parse_size("64K") == 64 << 10
    assert parse_size("16m") == 16 << 20
    assert parse_size("1GiB") == 1 << 30
    assert parse_sizes("1M, 4K,1M") == [1 << 20, 4 << 10]
    assert parse_size("1.5M") == 3 << 19
    for bad in ("", "0", "-4K", "0.3", "12X", "M", "9" * 300):
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


def _documented_keys(section: str) -> list[str]:
    """Return the keys the table under ``## `SECTION` `` of docs/p2p-json.md lists, in order."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "p2p-json.md").read_text()
    body = text.split(f"## `{section}`", 1)[1].split("\n## ", 1)[0]
    cells = [line.split("|")[1] for line in body.splitlines() if line.startswith("| `")]
    return [key for cell in cells for key in re.findall(r"`(\w+)`", cell)]


def test_peer_info_is_the_backends_peer_access_plus_the_route(backend, clean):
    clean.set("peers", "0>1")
    p = next(p for p in peer_matrix(backend) if (p.src, p.dst) == (0, 1))
    assert isinstance(p, PeerAccess)
    assert dataclasses.astuple(backend.peer_access(0, 1)) == dataclasses.astuple(p)[:-2]
    assert (p.route, p.route_reason) == backend.copy_route(0, 1)
    data = p.to_dict()
    assert list(data) == _documented_keys("peers[]")
    assert data["can_access"] is p.access is True


def test_separate_contexts_are_staged(clean):
    b = LevelZeroBackend(core.drivers()[0].devices()[:2], context="single")
    try:
        assert b.copy_route(0, 1) == ("staged", "separate contexts")
        assert b.copy_route(1, 1)[0] == "direct"
    finally:
        b.close()


def test_staged_copy_goes_through_the_host(backend, clean):
    src, dst = backend.allocate(0, 4096), backend.allocate(2, 4096)
    data = bytes(range(256)) * 16
    backend.upload(src, data).wait()
    clean.reset_counters()
    down, up = backend.staged_copy(dst, src, 1000)
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
            assert ("download", s, s, n) in keys and ("upload", s, s, n) in keys
            for d in range(3):
                if s != d:
                    assert ("direct", s, d, n) in keys and ("staged", s, d, n) in keys
                    assert ("legs", s, d, n) in keys
    for t in timings:
        if t.kind == "direct" and {t.src, t.dst} != {0, 1}:
            assert t.skipped == "no peer access" and t.measured is None
            row = t.to_dict()
            assert row["samples_ns"] == [] and row["gbps"] is None and row["median_ns"] is None
            continue
        m = t.measured
        assert t.skipped is None and m is not None and len(m.samples_ns) == 3
        assert m.bytes_moved == t.nbytes
        assert m.timing == ("device" if t.kind in ("same_device", "direct") else "host")
        assert m.gbps_min <= m.gbps <= m.gbps_max
        assert m.spread >= 0
    # 4 direct-copy rounds (1 warm-up + 3) per size and direction between 0 and 1 only.
    assert clean.bytes_moved(0, 1) == clean.bytes_moved(1, 0) == 4 * sum(sizes)
    assert clean.bytes_moved(0, 2) == clean.bytes_moved(2, 1) == 0


def test_host_timing_is_used_when_asked(backend):
    timings = measure_copies(backend, [0], sizes=[1024], reps=2, warmup=0, timing="host")
    assert [t.kind for t in timings] == ["same_device", "download", "upload"]
    m = timings[0].measured
    assert m is not None and m.timing == "host" and all(ns > 0 for ns in m.samples_ns)


def test_run_p2p_labels_the_simulator(backend):
    assert backend.simulated
    result = run_p2p(backend, sizes=[2048], reps=2, warmup=0)
    assert result.simulated and any("simulator" in n for n in result.notes)
    d = result.to_dict()
    assert d["schema"] == "l0mem.p2p/1.1" and d["simulated"] is True
    assert len(d["peers"]) == 6 and len(d["devices"]) == 3
    kinds = {"same_device", "direct", "staged", "download", "upload", "legs"}
    assert {c["kind"] for c in d["copies"]} == kinds
    assert result.timing("staged", 0, 2, 2048) is not None
    assert result.timing("staged", 0, 2, 4096) is None


def test_staged_copies_are_held_against_their_legs_of_the_same_run(backend):
    result = run_p2p(backend, sizes=[4096, 65536], reps=2, warmup=0, verify=False)
    ratios = {(r.src, r.dst, r.nbytes): r for r in result.staging}
    staged = [c for c in result.copies if c.kind == "staged"]
    assert len(staged) == 12 and set(ratios) == {(c.src, c.dst, c.nbytes) for c in staged}
    for c in staged:
        r = ratios[(c.src, c.dst, c.nbytes)]
        down = result.timing("download", c.src, c.src, c.nbytes)
        up = result.timing("upload", c.dst, c.dst, c.nbytes)
        assert down and up and down.measured and up.measured and c.measured
        assert (r.gbps, r.download_gbps, r.upload_gbps) == (
            c.measured.gbps,
            down.measured.gbps,
            up.measured.gbps,
        )
        assert r.leg_gbps == min(down.measured.gbps, up.measured.gbps)
        legs = result.timing("legs", c.src, c.dst, c.nbytes)
        assert legs and legs.measured and r.together_gbps == legs.measured.gbps
        assert r.ratio == pytest.approx(c.measured.gbps / r.leg_gbps)
    rows = result.to_dict()["staging"]
    assert [row["ratio"] for row in rows] == [r.ratio for r in result.staging]
    assert list(rows[0]) == _documented_keys("staging[]")


def test_timestamp_not_ready_after_the_wait_falls_back_to_host_timing(backend, clean):
    # Issue 9: a real driver answered NOT_READY for the timestamp of a completed copy.
    clean.set("timestamp_not_ready", "1")
    result = run_p2p(backend, sizes=[2048], reps=2, warmup=0)
    measured = [
        c.measured for c in result.copies if c.measured and c.kind in ("same_device", "direct")
    ]
    assert measured and all(m.timing == "host" and m.note == FALLBACK_NOTE for m in measured)
    assert all(ns > 0 for m in measured for ns in m.samples_ns)
    assert FALLBACK_NOTE in result.notes
    assert FALLBACK_NOTE in result.to_dict()["notes"]


def test_bad_arguments(backend):
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[], reps=1)
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[16], reps=0)
    with pytest.raises(ValueError):
        measure_copies(backend, sizes=[16], kinds=["sideways"])  # type: ignore[list-item]


def test_staged_copy_time_includes_the_host_wait(monkeypatch):
    # Device time of each leg is 7 ns; every host wait advances the clock by 1000 ns.
    clock = FakeClock().install(monkeypatch)
    backend = FakeCopyBackend(clock, leg_ns=7, wait_ns=1000)
    timings = measure_copies(backend, sizes=[64], reps=2, warmup=0)
    by_kind = {(t.kind, t.src, t.dst): t for t in timings}
    staged = by_kind[("staged", 0, 1)].measured
    assert staged is not None and staged.timing == "host"
    # The upload waits for the download on the host, then the upload is waited for.
    assert staged.samples_ns == (2000, 2000)
    direct = by_kind[("direct", 0, 1)].measured
    assert direct is not None and direct.timing == "device" and direct.samples_ns == (7, 7)
    same = by_kind[("same_device", 1, 1)].measured
    assert same is not None and same.samples_ns == (7, 7)


def test_teardown_error_does_not_replace_the_failure(monkeypatch):
    clock = FakeClock()
    backend = FakeCopyBackend(clock, leg_ns=7, wait_ns=1, fail_copy="copy failed")
    with pytest.raises(RuntimeError, match="copy failed"):
        measure_copies(backend, sizes=[64], reps=1, warmup=0)
    # Teardown still ran every step although each of them failed.
    assert backend.close_calls == 4 and backend.failed_syncs == 1


class FakeBuffer:
    def __init__(self, owner: FakeCopyBackend, device: int, nbytes: int) -> None:
        self.owner, self.device, self.nbytes, self.address = owner, device, nbytes, 0

    def view(self, offset: int, nbytes: int) -> FakeBuffer:
        return FakeBuffer(self.owner, self.device, nbytes)

    def close(self) -> None:
        self.owner.close_calls += 1
        if self.owner.broken:
            raise RuntimeError("device lost (close)")


class FakePinned:
    closed = False

    def memoryview(self) -> memoryview:
        raise AssertionError("the stager never reads its ring on the host")

    def close(self) -> None:
        self.closed = True


class FakeCopyBackend:
    """Two devices in one context; every operation is an event timed by the fake clock."""

    name = "fake"

    def __init__(
        self, clock: FakeClock, *, leg_ns: int, wait_ns: int, fail_copy: str | None = None
    ) -> None:
        self.clock, self.leg_ns, self.wait_ns, self.fail_copy = clock, leg_ns, wait_ns, fail_copy
        self.broken = False
        self.close_calls = self.failed_syncs = 0
        self._stager = Stager(self)

    simulated = False
    no_hardware = None
    closed = False

    @property
    def staging_ring_bytes(self) -> int:
        return self._stager.ring_bytes

    def same_context(self, a: int, b: int) -> bool:
        return True

    def copy_route(self, src: int, dst: int) -> tuple[RouteKind, str]:
        return "direct", "same device" if src == dst else "one context"

    def memory(self, device: int) -> DeviceMemory:
        return DeviceMemory(total=None, max_alloc=None, free=None, host_backed=False)

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        return PeerAccess(src, dst, True, False)

    def device_count(self) -> int:
        return 2

    def __enter__(self) -> FakeCopyBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def device_name(self, index: int) -> str:
        return f"fake {index}"

    def _event(self, wait_for=()) -> FakeEvent:
        for ev in wait_for:
            ev.wait()  # as a backend does for events it cannot wait on in-queue
        return FakeEvent(self.clock, self.leg_ns, self.wait_ns)

    def allocate(self, device: int, nbytes: int) -> FakeBuffer:
        return FakeBuffer(self, device, nbytes)

    def fill(self, dst, pattern, nbytes=None, *, wait_for=()) -> FakeEvent:
        return self._event(wait_for)

    def upload(self, dst, data, *, wait_for=()) -> FakeEvent:
        return self._event(wait_for)

    def download(self, src, out, *, wait_for=()) -> FakeEvent:
        return self._event(wait_for)

    def allocate_host(self, device: int, nbytes: int) -> HostMemory:
        return HostMemory(self, device, FakePinned(), 0, nbytes)

    def make_resident(self, buf, device: int) -> None:
        raise AssertionError("the copies never make memory resident")

    def staged_copy(
        self, dst, src, nbytes, *, wait_for=(), watchdog=10.0
    ) -> tuple[FakeEvent, FakeEvent]:
        return self._stager.copy(dst, src, nbytes, wait_for, watchdog)  # type: ignore[return-value]

    def copy(self, dst, src, nbytes=None, *, queue_device=None, wait_for=()) -> FakeEvent:
        if self.fail_copy:
            self.broken = True
            raise RuntimeError(self.fail_copy)
        return self._event(wait_for)

    def launch(self, kernel, device, args, global_size, *, wait_for=()) -> FakeEvent:
        raise NotImplementedError("copies only")

    def synchronize(self, device: int | None = None) -> None:
        if self.broken:
            self.failed_syncs += 1
            raise RuntimeError("device lost (synchronize)")

    def close(self) -> None:
        pass


def test_simulator_is_known_by_the_device_names(monkeypatch):
    # A real driver named through ZE_ENABLE_ALT_DRIVERS is still hardware.
    monkeypatch.setenv("ZE_ENABLE_ALT_DRIVERS", "/opt/intel/libze_intel_gpu.so.1")
    assert not is_simulator_name("Intel(R) Arc(TM) Pro B70")
    assert is_simulator_name("l0mem simulated GPU 0")
    monkeypatch.delenv("ZE_ENABLE_ALT_DRIVERS")
    assert is_simulator_name("l0mem simulated GPU 1")
    assert not is_simulator_name("simulated annealing accelerator")
