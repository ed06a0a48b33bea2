"""l0mem.allreduce on the simulated Level Zero driver: sums, bounds, bytes moved, scratch, errors.

Everything here runs on the simulator; its byte counters are the ground truth
for what crossed between devices.
"""

from __future__ import annotations

import numpy as np
import pytest

import l0mem.core as core
from l0mem.allreduce import AllReduce, allreduce, error_bound, roundings, scratch_bytes
from l0mem.backends.levelzero import LevelZeroBackend
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean


@pytest.fixture
def backend(clean):
    b = LevelZeroBackend(core.drivers()[0].devices(), context="multi")
    yield b
    b.close()
    assert [clean.device_used(i) for i in range(4)] == [0, 0, 0, 0]


def _inputs(n_dev: int, nelem: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(nelem).astype(np.float32) for _ in range(n_dev)]


def _load(backend, xs):
    bufs = [backend.allocate(d, max(4, 4 * len(x))) for d, x in enumerate(xs)]
    for buf, x in zip(bufs, xs, strict=True):
        backend.upload(buf, x).wait()
    return bufs


def _read(backend, bufs, nelem):
    outs = []
    for buf in bufs:
        out = np.empty(nelem, dtype=np.float32)
        backend.download(buf, out).wait()
        outs.append(out)
    return outs


def _errors(xs, out, path):
    stacked = np.stack(xs).astype(np.float64)
    err = np.abs(out.astype(np.float64) - stacked.sum(axis=0))
    bound = error_bound(path, len(xs)) * np.abs(stacked).sum(axis=0)
    return err, bound


@pytest.mark.parametrize("n_dev", [2, 3, 4])
@pytest.mark.parametrize("nelem", [1, 7, 63, 64, 1001])
def test_sums_on_both_sides_of_the_threshold(backend, clean, n_dev, nelem):
    xs = _inputs(n_dev, nelem, seed=nelem * 10 + n_dev)
    bufs = _load(backend, xs)
    clean.reset_counters()
    with AllReduce(backend, range(n_dev), threshold=64) as ar:
        stats = ar(bufs, nelem)
        stats.wait()
    path = "f32" if nelem < 64 else "bf16"
    assert stats.path == path
    assert stats.algorithm == ("pair" if n_dev == 2 else "ring")
    outs = _read(backend, bufs, nelem)
    for out in outs[1:]:
        assert np.array_equal(out.view(np.uint32), outs[0].view(np.uint32))
    err, bound = _errors(xs, outs[0], path)
    assert np.all(err <= bound)
    # What the library counted is what the simulator saw move between devices.
    for s in range(n_dev):
        for d in range(n_dev):
            if s != d:
                assert stats.bytes_crossed.get((s, d), 0) == clean.bytes_moved(s, d)
    width = 4 if path == "f32" else 2
    hops = 2 * (n_dev - 1) if n_dev > 2 else 2
    assert stats.total_bytes == hops * nelem * width
    for b in bufs:
        b.close()


@pytest.mark.parametrize("n_dev", [2, 3, 4])
def test_default_threshold_and_halved_bytes(backend, clean, n_dev):
    moved = {}
    errors = {}
    for nelem in (32767, 32768):
        xs = _inputs(n_dev, nelem, seed=n_dev)
        bufs = _load(backend, xs)
        clean.reset_counters()
        stats = allreduce(backend, bufs, nelem)
        sim_total = sum(
            clean.bytes_moved(s, d) for s in range(n_dev) for d in range(n_dev) if s != d
        )
        assert sim_total == stats.total_bytes > 0
        moved[stats.path] = sim_total / nelem
        err, bound = _errors(xs, _read(backend, bufs, nelem)[0], stats.path)
        assert np.all(err <= bound)
        errors[stats.path] = (float(err.max()), float(bound.max()))
        for b in bufs:
            b.close()
    assert set(moved) == {"f32", "bf16"}
    assert moved["bf16"] == pytest.approx(moved["f32"] / 2)
    # Compression really happened: the BF16 error is far beyond what FP32 rounding allows.
    assert errors["bf16"][0] > 10 * errors["f32"][0]
    assert errors["bf16"][0] > errors["f32"][1]


def test_forced_paths_match_the_bounds(backend):
    nelem = 513
    xs = _inputs(3, nelem, seed=3)
    result = {}
    with AllReduce(backend, [0, 1, 2]) as ar:
        for path in ("f32", "bf16"):
            bufs = _load(backend, xs)
            stats = ar(bufs, nelem, path=path)
            stats.wait()
            assert stats.path == path
            result[path] = _errors(xs, _read(backend, bufs, nelem)[0], path)
            for b in bufs:
                b.close()
    for err, bound in result.values():
        assert np.all(err <= bound)
    assert result["bf16"][0].max() > result["f32"][1].max()


def test_scratch_persists_grows_and_is_freed(backend, clean):
    devs = [0, 1, 2]
    ar = AllReduce(backend, devs, threshold=0)
    assert ar.scratch_bytes == 0
    small = _load(backend, _inputs(3, 100, seed=1))
    ar(small, 100).wait()
    first = ar.scratch_bytes
    assert first >= 400
    used = [clean.device_used(d) for d in devs]
    ar(small, 50).wait()
    assert ar.scratch_bytes == first
    assert [clean.device_used(d) for d in devs] == used
    big = _load(backend, _inputs(3, 5000, seed=2))
    ar(big, 5000).wait()
    assert ar.scratch_bytes >= 4 * 5000 > first
    ar.close()
    for b in (*small, *big):
        b.close()
    assert [clean.device_used(d) for d in devs] == [0, 0, 0]
    with pytest.raises(RuntimeError, match="closed"):
        ar(small, 1)


def test_repeated_calls_keep_summing(backend):
    nelem = 200
    xs = _inputs(4, nelem, seed=5)
    bufs = _load(backend, xs)
    with AllReduce(backend, range(4), threshold=1 << 20) as ar:
        ar(bufs, nelem)
        stats = ar(bufs, nelem)
        stats.wait()
    # Two FP32 all-reduces of the same inputs: 4 * sum, up to FP32 rounding.
    out = _read(backend, bufs, nelem)[0]
    exact = 4 * np.stack(xs).astype(np.float64).sum(axis=0)
    assert np.allclose(out, exact, rtol=1e-5, atol=1e-5)
    for b in bufs:
        b.close()


def test_without_peer_access_copies_are_staged(backend, clean):
    clean.set("peers", "none")
    nelem = 300
    xs = _inputs(2, nelem, seed=9)
    bufs = _load(backend, xs)
    clean.reset_counters()
    with AllReduce(backend, [0, 1], threshold=0) as ar:
        assert set(ar.routes.values()) == {"staged"}
        stats = ar(bufs, nelem)
        stats.wait()
    assert stats.staged_copies == stats.copies == 2
    assert clean.bytes_moved(0, 1) == clean.bytes_moved(1, 0) == 0
    assert clean.bytes_moved(0, -1) >= 2 * nelem and clean.bytes_moved(-1, 1) >= 2 * nelem
    assert stats.bytes_crossed == {(0, 1): 2 * nelem, (1, 0): 2 * nelem}
    err, bound = _errors(xs, _read(backend, bufs, nelem)[0], "bf16")
    assert np.all(err <= bound)
    with pytest.raises(ValueError, match="no direct copy"):
        AllReduce(backend, [0, 1], transport="direct")
    for b in bufs:
        b.close()


def test_single_device_and_empty_calls_do_nothing(backend, clean):
    bufs = _load(backend, _inputs(2, 8, seed=1))
    clean.reset_counters()
    with AllReduce(backend, [0]) as ar:
        stats = ar(bufs[:1], 8)
    assert stats.algorithm == "single" and stats.copies == 0 and stats.kernel_launches == 0
    with AllReduce(backend, [0, 1]) as ar:
        stats = ar(bufs, 0)
    assert stats.total_bytes == 0 and clean.kernel_launches() == 0
    for b in bufs:
        b.close()


def test_bad_input_is_rejected(backend):
    bufs = _load(backend, _inputs(2, 16, seed=1))
    with pytest.raises(ValueError, match="distinct"):
        AllReduce(backend, [0, 0])
    with pytest.raises(ValueError, match="not a backend index"):
        AllReduce(backend, [0, 9])
    with pytest.raises(ValueError, match="threshold"):
        AllReduce(backend, [0, 1], threshold=-1)
    with AllReduce(backend, [0, 1]) as ar:
        with pytest.raises(ValueError, match="expected 2 buffers"):
            ar(bufs[:1], 16)
        with pytest.raises(ValueError, match="expected device 0"):
            ar([bufs[1], bufs[0]], 16)
        with pytest.raises(ValueError, match="need 68"):
            ar(bufs, 17)
        with pytest.raises(ValueError, match="nelem"):
            ar(bufs, -1)
        with pytest.raises(ValueError, match="path"):
            ar(bufs, 16, path="fp8")  # type: ignore[arg-type]
    for b in bufs:
        b.close()


def test_bound_counts_the_roundings():
    assert roundings("f32", 2) == (0, 1)
    assert roundings("bf16", 2) == (1, 1)
    assert roundings("bf16", 4) == (4, 3)
    assert error_bound("bf16", 2) > 2.0**-8 > error_bound("f32", 4) > error_bound("f32", 2) > 0
    assert error_bound("bf16", 3) < error_bound("bf16", 4)
    with pytest.raises(ValueError):
        roundings("fp16", 2)  # type: ignore[arg-type]


def test_a_failure_in_the_block_is_not_replaced_by_teardown(backend, monkeypatch):
    bufs = _load(backend, _inputs(2, 64, seed=4))
    ar = AllReduce(backend, [0, 1], threshold=0)

    def lost(device=None):
        raise RuntimeError("device lost while synchronizing")

    with pytest.raises(ValueError, match="boom"), ar:
        ar(bufs, 64)
        monkeypatch.setattr(backend, "synchronize", lost)
        raise ValueError("boom")
    monkeypatch.undo()
    # Teardown went on past the failing wait: the scratch is freed and the object closed.
    assert ar.scratch_bytes == 0
    with pytest.raises(RuntimeError, match="closed"):
        ar(bufs, 1)
    # Without a failure in the block, a teardown error is the error.
    ar2 = AllReduce(backend, [0, 1], threshold=0)
    ar2(bufs, 64)
    monkeypatch.setattr(backend, "synchronize", lost)
    with pytest.raises(RuntimeError, match="device lost"), ar2:
        pass
    monkeypatch.undo()
    backend.synchronize()
    for b in bufs:
        b.close()


@pytest.mark.parametrize("n_dev", [2, 3, 4])
def test_scratch_bytes_for_is_what_a_call_allocates(backend, n_dev):
    bufs = _load(backend, _inputs(n_dev, 1001, seed=n_dev))
    for path in ("f32", "bf16"):
        with AllReduce(backend, range(n_dev)) as ar:
            need = ar.scratch_bytes_for(1001, path)
            assert need == scratch_bytes(n_dev, 1001, path)
            ar(bufs, 1001, path=path).wait()
            assert ar.scratch_bytes == need >= 4 * 1001
            assert ar.scratch_bytes_for(1001) >= need
    with AllReduce(backend, [0]) as single:
        assert single.scratch_bytes_for(1001) == 0
    for b in bufs:
        b.close()
