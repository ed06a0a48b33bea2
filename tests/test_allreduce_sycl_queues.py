"""Cross-device ordering of l0mem.allreduce on SYCL queues that really run at once.

The simulator executes every command when it is appended, and SYCL CPU
sub-devices always take the host-staged path, so neither shows whether the
all-reduce's events order the work of different queues. Here every backend
index is its own in-order queue on the root CPU device, all in the platform's
context: copies are direct, dependencies are device-side events, and the
queues run concurrently. Calls are issued back to back without waiting in
between (sizes on both sides of the threshold, odd sizes, both paths, the
same buffers reduced again, the scratch growing mid-stream); every result is
checked at the end. Leaving out a single ``wait_for`` in the all-reduce makes
these checks fail. Runs in a subprocess so that a deadlock fails the test
instead of stalling the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Literal

import numpy as np
import pytest

from l0mem.allreduce import error_bound

pytestmark = pytest.mark.sycl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 120

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from l0mem.backends import SyclBackend
    from l0mem.sycl import load_dpctl
    from l0mem.allreduce import AllReduce

    dpctl = load_dpctl()
    root = dpctl.get_devices(device_type="cpu")[0]
    meta, arrays = [], {}
    for n_dev in (2, 3, 4):
        backend = SyclBackend([root] * n_dev)
        same = all(backend.same_context(0, d) for d in range(n_dev))
        rng = np.random.default_rng(n_dev)
        issued = []
        with AllReduce(backend, range(n_dev), threshold=1000) as ar:
            routes = sorted(set(ar.routes.values()))
            # (elements, path asked, calls on the same buffers); 12001 grows the scratch.
            plan = [(6000, "auto", 1), (999, "auto", 1), (1001, "auto", 2), (37, "bf16", 1),
                    (4097, "f32", 2), (1, "auto", 1), (12001, "auto", 1), (6000, "bf16", 3),
                    (777, "f32", 1), (40000, "f32", 3), (40000, "bf16", 2)] * 2
            for nelem, asked, repeat in plan:
                xs = np.stack([rng.standard_normal(nelem).astype(np.float32)
                               for _ in range(n_dev)])
                bufs = [backend.allocate(d, 4 * nelem) for d in range(n_dev)]
                for b, x in zip(bufs, xs):
                    backend.upload(b, x)  # not waited for: in-order queues
                for _ in range(repeat):
                    stats = ar(bufs, nelem, path=asked)
                issued.append((nelem, asked, repeat, xs, bufs, stats))
            for nelem, asked, repeat, xs, bufs, stats in issued:
                stats.wait()
                outs = np.empty((n_dev, nelem), np.float32)
                for b, o in zip(bufs, outs):
                    backend.download(b, o).wait()
                key = f"{len(meta)}"
                arrays[key + "x"], arrays[key + "y"] = xs, outs
                meta.append({"key": key, "n": n_dev, "nelem": nelem, "asked": asked,
                             "repeat": repeat, "path": stats.path, "same_context": same,
                             "routes": routes, "copies": stats.copies,
                             "staged": stats.staged_copies})
                for b in bufs:
                    b.close()
        backend.close()
    np.savez(sys.argv[1], **arrays)
    json.dump(meta, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = tmp_path_factory.mktemp("queues") / "results.npz"
    env = dict(os.environ, PYTHONPATH=REPO)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(data)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"back-to-back all-reduces on concurrent SYCL queues hung ({TIMEOUT_S} s)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    arrays = np.load(data)
    return [
        {**m, "xs": arrays[m["key"] + "x"], "out": arrays[m["key"] + "y"]}
        for m in json.loads(proc.stdout)
    ]


def test_every_call_ran_over_direct_copies(runs):
    assert sorted({r["n"] for r in runs}) == [2, 3, 4]
    assert len(runs) == 3 * 22
    for r in runs:
        # One context, so dependencies are device-side events, not host waits.
        assert r["same_context"] and r["routes"] == ["direct"]
        assert r["copies"] > 0 and r["staged"] == 0
        auto = "f32" if r["nelem"] < 1000 else "bf16"
        assert r["path"] == (auto if r["asked"] == "auto" else r["asked"])


def _bound(path: Literal["f32", "bf16"], n: int, repeat: int, xs: np.ndarray) -> np.ndarray:
    """Return the element-wise bound of ``repeat`` chained all-reduces of ``xs``."""
    gamma = error_bound(path, n)
    scale = np.abs(xs).sum(axis=0)
    # r_1 = S + e_1 with |e_1| <= g scale; r_k = n r_(k-1) + e_k with |e_k| <= g n |r_(k-1)|.
    bound, size = gamma * scale, (1 + gamma) * scale
    for _ in range(repeat - 1):
        bound = n * bound + gamma * n * size
        size = n * size * (1 + gamma)
    return bound


def test_every_result_is_the_sum(runs):
    for r in runs:
        n, repeat, path = r["n"], r["repeat"], r["path"]
        xs = r["xs"].astype(np.float64)
        outs = r["out"]
        case = (n, r["nelem"], path, repeat)
        assert (outs.view(np.uint32) == outs[0].view(np.uint32)).all(), case
        exact = n ** (repeat - 1) * xs.sum(axis=0)
        err = np.abs(outs[0].astype(np.float64) - exact)
        assert np.all(err <= _bound(path, n, repeat, xs)), case
