"""l0mem.allreduce over SYCL CPU sub-devices (dpctl), run in a subprocess with a hard timeout.

SyclBackend gives every sub-device a context of its own, so every copy
between them is host-staged ("separate contexts"); a regression that made
them direct could hang (see l0mem.backends.sycl) and must fail here instead of stalling
the test run. tests/test_p2p_sycl_shared.py covers sub-devices sharing one
context, and tests/test_allreduce_sycl_queues.py direct copies between
concurrently running queues.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from l0mem.allreduce import error_bound

pytestmark = pytest.mark.sycl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sub-devices are reused round-robin when N exceeds what the CPU can be split
# into; every backend index still has its own in-order queue and context.
_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from l0mem.backends import SyclBackend
    from l0mem.sycl import load_dpctl
    from l0mem.allreduce import AllReduce

    dpctl = load_dpctl()
    root = dpctl.get_devices(device_type="cpu")[0]
    units = int(root.max_compute_units)
    k = min(units, 4)
    subs = root.create_sub_devices(partition=[units // k] * k)
    out = []
    for n_dev in (2, 3, 4):
        backend = SyclBackend([subs[i % len(subs)] for i in range(n_dev)])
        with AllReduce(backend, range(n_dev), threshold=256) as ar:
            routes = sorted(set(ar.routes.values()))
            for nelem in (5, 255, 256, 777):
                rng = np.random.default_rng(nelem + n_dev)
                xs = [rng.standard_normal(nelem).astype(np.float32) for _ in range(n_dev)]
                for path in ("auto", "f32", "bf16"):
                    bufs = [backend.allocate(d, 4 * nelem) for d in range(n_dev)]
                    for b, x in zip(bufs, xs):
                        backend.upload(b, x).wait()
                    stats = ar(bufs, nelem, path=path)
                    stats.wait()
                    res = []
                    for b in bufs:
                        o = np.empty(nelem, np.float32)
                        backend.download(b, o).wait()
                        res.append(o.tolist())
                    out.append({"n": n_dev, "nelem": nelem, "asked": path, "stats": stats.to_dict(),
                                "routes": routes, "xs": [x.tolist() for x in xs], "out": res})
                    for b in bufs:
                        b.close()
        backend.close()
    json.dump(out, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def runs():
    env = dict(os.environ, PYTHONPATH=REPO)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the SYCL all-reduce over CPU sub-devices hung (killed after 180 s)")
    if proc.returncode != 0 and "Sub-devices were not created" in proc.stderr:
        pytest.skip("this CPU cannot be partitioned into sub-devices")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_every_case_ran(runs):
    assert {(r["n"], r["nelem"], r["asked"]) for r in runs} == {
        (n, e, p) for n in (2, 3, 4) for e in (5, 255, 256, 777) for p in ("auto", "f32", "bf16")
    }


def test_sub_devices_never_copy_directly(runs):
    for r in runs:
        assert r["routes"] == ["staged"]
        assert r["stats"]["staged_copies"] == r["stats"]["copies"] > 0


def test_sums_are_within_bound_and_identical(runs):
    for r in runs:
        path = r["stats"]["path"]
        if r["asked"] == "auto":
            assert path == ("f32" if r["nelem"] < 256 else "bf16")
        else:
            assert path == r["asked"]
        xs = np.array(r["xs"], dtype=np.float32).astype(np.float64)
        outs = np.array(r["out"], dtype=np.float32)
        assert (outs == outs[0]).all(), (r["n"], r["nelem"], path)
        err = np.abs(outs[0].astype(np.float64) - xs.sum(axis=0))
        assert np.all(err <= error_bound(path, r["n"]) * np.abs(xs).sum(axis=0))


def test_bf16_moves_half_and_errs_more(runs):
    by_case = {(r["n"], r["nelem"], r["stats"]["path"]): r for r in runs if r["asked"] != "auto"}
    for n in (2, 3, 4):
        for nelem in (5, 255, 256, 777):
            f32, bf16 = by_case[(n, nelem, "f32")], by_case[(n, nelem, "bf16")]
            assert bf16["stats"]["total_bytes"] * 2 == f32["stats"]["total_bytes"]
            hops = 2 if n == 2 else 2 * (n - 1)
            assert f32["stats"]["total_bytes"] == hops * 4 * nelem
            xs = np.array(f32["xs"], dtype=np.float64).sum(axis=0)
            e32 = np.abs(np.array(f32["out"][0], dtype=np.float64) - xs).max()
            e16 = np.abs(np.array(bf16["out"][0], dtype=np.float64) - xs).max()
            assert e16 > e32
