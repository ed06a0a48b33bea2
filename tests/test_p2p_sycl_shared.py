"""Two CPU sub-devices in ONE SYCL context: the set-up where a direct copy hangs.

With the pinned CPU runtime a device-to-device ``memcpy`` between allocations
of two CPU sub-devices that share a context never returns in most runs.
:class:`l0mem.backends.SyclBackend` gives every sub-device a context of its own,
so it never meets the case; a backend whose queues share one context does,
and l0mem must detect it (:func:`l0mem.backends.sycl.direct_copy_hazard`) and
stage those copies. Both tests run in subprocesses with hard timeouts:

- l0mem's own copy paths (route, copy measurements, the all-reduce) over a
  SyclBackend whose two queues share one context must finish correctly;
- the raw ``memcpy`` itself either still hangs (killed by the timeout) or was
  fixed in this runtime; it must never return wrong data.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from l0mem.allreduce import error_bound

pytestmark = pytest.mark.sycl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_TIMEOUT_S = 120
SETUP_TIMEOUT_S = 60
COPY_TIMEOUT_S = 5

_SETUP = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from l0mem.backends import SyclBackend
    from l0mem.sycl import load_dpctl

    dpctl = load_dpctl()
    root = dpctl.get_devices(device_type="cpu")[0]
    units = int(root.max_compute_units)
    if units < 2:
        print(json.dumps({"skip": "a one-core CPU cannot be partitioned"}))
        sys.exit(0)
    s0, s1 = root.create_sub_devices(partition=[units // 2] * 2)
    shared = dpctl.SyclContext([s0, s1])
    """
)

_L0MEM_PATHS = _SETUP + textwrap.dedent(
    """
    from l0mem.allreduce import AllReduce
    from l0mem.backends.sycl import direct_copy_hazard as sycl_direct_copy_hazard
    from l0mem.bench.copies import measure_copies


    class SharedContextBackend(SyclBackend):
        # SyclBackend has no mode for this set-up: swap in queues of one context.
        def __init__(self, devices):
            super().__init__(devices)
            assert hasattr(self, "_contexts") and hasattr(self, "_queues"), "SyclBackend changed"
            self._contexts = [shared] * len(devices)
            self._queues = [dpctl.SyclQueue(shared, d, property=["in_order"]) for d in devices]


    backend = SharedContextBackend([s0, s1])
    report = {
        "same_context": backend.same_context(0, 1),
        "hazard": [sycl_direct_copy_hazard(s0, s1), sycl_direct_copy_hazard(s1, s0)],
        "routes": [list(backend.copy_route(0, 1)), list(backend.copy_route(1, 0))],
    }
    timings = measure_copies(backend, sizes=[4096], reps=2, warmup=1)
    report["copies"] = {
        f"{t.kind} {t.src}>{t.dst}": t.skipped or t.measured.timing for t in timings
    }
    results = []
    with AllReduce(backend, [0, 1], threshold=512) as ar:
        report["ar_routes"] = sorted(set(ar.routes.values()))
        for nelem in (31, 512, 4099):
            rng = np.random.default_rng(nelem)
            xs = [rng.standard_normal(nelem).astype(np.float32) for _ in range(2)]
            bufs = [backend.allocate(d, 4 * nelem) for d in range(2)]
            for b, x in zip(bufs, xs):
                backend.upload(b, x)
            stats = ar(bufs, nelem)
            stats.wait()
            outs = []
            for b in bufs:
                o = np.empty(nelem, np.float32)
                backend.download(b, o).wait()
                outs.append(o.tolist())
            results.append({"path": stats.path, "staged": stats.staged_copies,
                            "copies": stats.copies, "xs": [x.tolist() for x in xs],
                            "out": outs})
            for b in bufs:
                b.close()
    backend.close()
    report["results"] = results
    print(json.dumps(report))
    """
)

_RAW_COPY = _SETUP + textwrap.dedent(
    """
    q0 = dpctl.SyclQueue(shared, s0, property="in_order")
    q1 = dpctl.SyclQueue(shared, s1, property="in_order")
    n = 4096
    a = dpctl.memory.MemoryUSMDevice(n, queue=q0)
    b = dpctl.memory.MemoryUSMDevice(n, queue=q1)
    data = (np.arange(n) % 251).astype(np.uint8)
    q0.memcpy(a, data, n)
    print("ready", flush=True)
    q0.memcpy(b, a, n)  # device to device across the sub-devices: the copy that hangs
    out = np.zeros(n, np.uint8)
    q1.memcpy(out, b, n)
    print("correct" if (out == data).all() else "wrong", flush=True)
    """
)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=REPO)


def test_l0mem_stages_copies_in_a_shared_context():
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _L0MEM_PATHS],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=PATH_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"l0mem's copies between sub-devices of one context hung ({PATH_TIMEOUT_S} s)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    if "skip" in report:
        pytest.skip(report["skip"])
    assert report["same_context"] is True
    assert report["hazard"] == [True, True]
    hang = ["staged", "CPU sub-devices: direct copies hang"]
    assert report["routes"] == [hang, hang]
    copies = report["copies"]
    assert copies["direct 0>1"] == copies["direct 1>0"] == hang[1]
    assert copies["staged 0>1"] == copies["staged 1>0"] == "host"
    assert report["ar_routes"] == ["staged"]
    assert [r["path"] for r in report["results"]] == ["f32", "bf16", "bf16"]
    for r in report["results"]:
        assert r["staged"] == r["copies"] == 2
        xs = np.array(r["xs"], dtype=np.float64)
        outs = np.array(r["out"], dtype=np.float32)
        assert (outs.view(np.uint32) == outs[0].view(np.uint32)).all()
        err = np.abs(outs[0].astype(np.float64) - xs.sum(axis=0))
        assert np.all(err <= error_bound(r["path"], 2) * np.abs(xs).sum(axis=0))


def test_raw_shared_context_copy_hangs_or_is_right(record_property, tmp_path):
    # stderr to a file: a full pipe would block the child and look like a hang.
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", _RAW_COPY], env=_env(), stdout=subprocess.PIPE, stderr=err_file
        )
    try:
        try:
            # The set-up gets its own, generous limit; only the copy is timed strictly.
            first = _read_line(proc, SETUP_TIMEOUT_S)
        except TimeoutError:
            pytest.fail(f"setting up the raw copy took over {SETUP_TIMEOUT_S} s")
        if first.startswith("{"):
            pytest.skip(json.loads(first)["skip"])
        assert first == "ready", (first, errors.read_text()[-2000:])
        try:
            last = _read_line(proc, COPY_TIMEOUT_S)
        except TimeoutError:
            outcome = "still hangs"
        else:
            assert last != "wrong", "the raw copy returned wrong data"
            assert last == "correct", (last, errors.read_text()[-2000:])
            outcome = "fixed in this runtime"
    finally:
        proc.kill()
        proc.wait()
    record_property("raw_shared_context_copy", outcome)
    print(f"raw device-to-device copy between CPU sub-devices of one context: {outcome}")


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """Return the child's next stdout line, or raise TimeoutError after ``timeout`` seconds."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    # Byte by byte from the descriptor: a buffered reader could hold the next line
    # while select() reports nothing left to read.
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return line.decode().strip()
