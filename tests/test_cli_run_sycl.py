"""``l0mem run`` over a SYCL program on the simulated driver: the runtime's own residency call.

The program (dpctl) allocates device memory in the platform's default context
over two simulated GPUs; the SYCL runtime's Level Zero adapter then makes
every allocation resident on both devices, which mirrors under
``mirror=peer-resident``. Nothing in the program asks for that: the trace
must find the call, the verdict and slope must match the simulator's ground
truth, and skipping peer residency must remove the mirror and leave the
program's results unchanged. The runtime set-up on the simulator is that of
tests/test_sim_sycl.py (padding, guarded null DDI slots).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import sim, sycl_sim
from tests.support.cli import REPO_ROOT, run_l0mem
from tests.support.own_memory import host_env

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("dpctl") is None, reason="dpctl is not installed"
)

MIB = 1 << 20
STEPS = 6
STEP = 64 * MIB

PROGRAM = r"""
import ctypes, hashlib, json, os, sys, time
# Under --trace the loader loads the tracer, which forwards to the simulator.
lib = ctypes.CDLL(os.environ.get("L0MEM_TRACE_DRIVERS") or os.environ["ZE_ENABLE_ALT_DRIVERS"].split(",")[0])
assert lib.zesim_guard_null_ddi_calls() == 0
lib.zesim_mirror_bytes.restype = ctypes.c_uint64
lib.zesim_device_used.restype = ctypes.c_uint64
import dpctl, dpctl.memory as dm

out, steps, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
devices = dpctl.get_platforms()[0].get_devices()
queue = dpctl.SyclQueue(devices[0])  # the platform's default context: both devices
truth, digest, held = [], hashlib.sha256(), []
# The runtime's first memset and copies build its kernels and command lists:
# host memory of its own, before the steps (the fit is over the steps only).
back = dm.MemoryUSMHost(64 << 10, queue=queue)
warm = dm.MemoryUSMDevice(1 << 20, queue=queue)
warm.memset(0)
warm.copy_from_host(bytes(64 << 10))
queue.memcpy(back, warm, 64 << 10)
bytes(back.copy_to_host())
del warm
time.sleep(0.5)  # samples before any device memory
for i in range(steps):
    buf = dm.MemoryUSMDevice(step, queue=queue)
    # Simulated device memory is host memory: only a little non-zero data, so
    # that the host cost is the mirror (a zero fill takes no pages).
    buf.memset(0)
    buf.copy_from_host(bytes([i + 1]) * (64 << 10))
    # Read back only what was written: a whole step in host memory would be noise.
    queue.memcpy(back, buf, 64 << 10)
    digest.update(bytes(back.copy_to_host()))
    held.append(buf)
    truth.append({"mirror": lib.zesim_mirror_bytes(), "device": lib.zesim_device_used(0)})
    time.sleep(0.3)
with open(out, "w") as f:
    json.dump({"truth": truth, "devices": queue.sycl_context.device_count,
               "digest": digest.hexdigest()}, f)
"""


def _run(tmp_path: Path, *options: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Run the program under ``l0mem run OPTIONS``; return its output, the report and stderr."""
    program, result, report = tmp_path / "program.py", tmp_path / "out.json", tmp_path / "run.json"
    program.write_text(PROGRAM)
    env = sim.sim_env(devices=2, mirror="peer-resident")
    env["ZE_ENABLE_ALT_DRIVERS"] = f"{sim.build()},{sycl_sim.PADDING}"
    env["ONEAPI_DEVICE_SELECTOR"] = "level_zero:*"
    for key in sycl_sim.ADAPTER_KEYS:
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    # Not -q: the summary after the answer says what --no-peer-residency skipped.
    args = [*options, "--interval", "0.04", "--json", str(report)]
    args += ["--", sys.executable, str(program), str(result), str(STEPS), str(STEP)]
    proc = run_l0mem("run", args, host_env(env, "watch"), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(result.read_text()), json.loads(report.read_text()), proc.stderr


def test_the_sycl_runtimes_residency_is_traced_and_judged_by_the_ground_truth(
    tmp_path: Path,
) -> None:
    from l0mem.estimate import DEFAULT_CONFIG, classify

    out, data, _ = _run(tmp_path, "--trace")
    assert out["devices"] == 2
    truth = out["truth"]
    ratio = truth[-1]["mirror"] / truth[-1]["device"]
    assert ratio == 1.0  # the simulator mirrored every byte the runtime made resident
    summary = data["summary"]
    assert summary["device_source"] == "trace"
    assert summary["verdict"] == classify(ratio, DEFAULT_CONFIG) == "mirror", summary["reason"]
    slope, err = summary["slope_mib_per_gib"], summary["uncertainty_mib_per_gib"]
    assert abs(slope - 1024 * ratio) <= max(err, 16), summary["reason"]
    traced = {d["index"]: d for d in data["trace"]["devices"]}
    # The adapter pools device memory: its allocations are what the simulator holds.
    assert traced[0]["allocated_peak"] == truth[-1]["device"] >= STEPS * STEP
    # The program never asked for residency: the runtime did, on the peer.
    assert traced[0]["resident_on_peak"] == {"1": truth[-1]["mirror"]}
    assert data["trace"]["calls"]["zeContextMakeMemoryResident"] >= 1


def test_skipping_peer_residency_removes_the_mirror_and_keeps_the_results(
    tmp_path: Path,
) -> None:
    (tmp_path / "default").mkdir()
    (tmp_path / "skipped").mkdir()
    default, _, _ = _run(tmp_path / "default", "--trace")
    skipped, data, stderr = _run(tmp_path / "skipped", "--no-peer-residency")
    assert max(t["mirror"] for t in default["truth"]) > 0
    assert max(t["mirror"] for t in skipped["truth"]) == 0
    assert skipped["digest"] == default["digest"]  # byte-identical results
    assert data["trace"]["skipped_calls"] >= 1
    # Every device allocation's peer residency was skipped (the runtime also makes
    # a few bytes of its own resident).
    assert data["trace"]["skipped_bytes"] >= skipped["truth"][-1]["device"] >= STEPS * STEP
    assert data["summary"]["verdict"] == "clean", data["summary"]["reason"]
    assert "skipped" in stderr and "zeContextMakeMemoryResident" in stderr

