"""The allocation tracer in front of the simulated driver: its counts against what workloads did.

Each workload runs in a child interpreter behind Debian's loader 1.8 with the
tracer as the loader's driver and the simulator behind it. The workload prints
what it allocated and made resident, and the simulator's ground truth (live
device bytes, mirror bytes); the trace must agree exactly.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from l0mem.trace import TraceSession, TraceTotals
from tests.support import sim, sycl_sim

REPO = Path(__file__).resolve().parents[1]

# Stages are printed as JSON lines; the workload waits for a line on stdin after each,
# so that the test reads the trace while the process (and its memory) is still alive.
L0_WORKLOAD = """
import hashlib, json, sys
import l0mem.core as core
from tests.support import sim

ctl = sim.SimControl(sim.build())
drv = core.drivers()[0]
d0, d1 = drv.devices()[:2]
ctx = drv.create_context()

def stage(name, **data):
    data.update(stage=name, mirror=ctl.mirror_bytes(), used=[ctl.device_used(i) for i in (0, 1)])
    print(json.dumps(data), flush=True)
    sys.stdin.readline()

sizes0 = [1 << 20, 3 << 20, 5000]
sizes1 = [2 << 20]
a0 = [ctx.allocate_device(d0, n) for n in sizes0]
a1 = [ctx.allocate_device(d1, n) for n in sizes1]
host = ctx.allocate_host(8192)
shared = ctx.allocate_shared(d1, 12288)
peer = [a0[0], a0[1], a1[0]]
ctx.make_resident(d1, a0[0])
ctx.make_resident(d1, a0[1])
ctx.make_resident(d0, a1[0])
ctx.make_resident(d0, a0[2])  # on its own device: no peer residency
cl = ctx.immediate_command_list(d1)
pattern = bytes(range(256)) * 4096
cl.copy_from_host(a0[0], pattern)
cl.copy(a1[0], a0[0], 1 << 20)
back = bytearray(1 << 20)
cl.copy_to_host(a1[0], back)
cl.synchronize()
stage(
    "allocated",
    device=[sum(sizes0), sum(sizes1)], host=8192, shared=[0, 12288],
    resident={"0": {"1": (1 << 20) + (3 << 20)}, "1": {"0": 2 << 20}},
    skipped_calls=len(peer), skipped_bytes=sum(a.nbytes for a in peer),
    digest=hashlib.sha256(back).hexdigest(),
)
ctx.evict(d1, a0[1])
a0[0].close()
host.close()
stage("released", resident={"1": {"0": 2 << 20}})
cl.close()
ctx.close()
stage("closed")
"""

FAIL_WORKLOAD = """
import json
import l0mem.core as core
from l0mem._ze import errors
drv = core.drivers()[0]
d0 = drv.devices()[0]
ctx = drv.create_context()
first = ctx.allocate_device(d0, 4096)
try:
    ctx.allocate_device(d0, 8192)
    code = 0
except errors.ZeError as exc:
    code = exc.code
print(json.dumps({"code": code}), flush=True)
"""


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    out = dict(env)
    out["PYTHONPATH"] = str(REPO)
    return out


class Workload:
    """A staged workload in a child process; each stage's JSON is read before the next."""

    def __init__(self, code: str, env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=child_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stage(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=60)
            assert self.proc.stderr is not None
            pytest.fail(f"workload ended early: {self.proc.stderr.read()[-2000:]}")
        data: dict[str, Any] = json.loads(line)
        return data

    def go_on(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        self.go_on()
        assert self.proc.wait(timeout=60) == 0


def device(totals: TraceTotals, index: int) -> Any:
    found = [d for d in totals.devices if d.index == index]
    assert len(found) == 1, totals
    return found[0]


def resident_of(totals: TraceTotals) -> dict[str, dict[str, int]]:
    return {
        str(d.index): {str(k): v for k, v in d.resident_on.items() if v}
        for d in totals.devices
        if any(d.resident_on.values())
    }


@pytest.fixture
def session(tmp_path: Path) -> Any:
    with TraceSession(tmp_path) as s:
        yield s


@pytest.mark.parametrize(
    "layer", [None, "ZE_ENABLE_LOADER_INTERCEPT", "ZE_ENABLE_VALIDATION_LAYER"]
)
def test_trace_counts_what_an_l0_workload_allocated_and_made_resident(
    session: TraceSession, layer: str | None
) -> None:
    base = sim.sim_env(devices=2, mirror="peer-resident")
    if layer:
        base[layer] = "1"
    work = Workload(L0_WORKLOAD, session.environment(base))
    try:
        done = work.stage()
        totals = session.poll()
        for i in (0, 1):
            assert device(totals, i).allocated == done["device"][i] == done["used"][i]
            assert device(totals, i).shared_allocated == done["shared"][i]
            assert device(totals, i).name == f"l0mem simulated GPU {i}"
        assert totals.host_allocated == done["host"]
        assert resident_of(totals) == done["resident"]
        # The simulator mirrors each device allocation made resident on a peer once.
        assert sum(sum(r.values()) for r in done["resident"].values()) == done["mirror"]
        assert totals.failed_calls == {} and totals.skipped_calls == 0
        assert totals.processes == 1 and totals.lost_records == 0
        work.go_on()

        released = work.stage()
        totals = session.poll()
        assert [device(totals, i).allocated for i in (0, 1)] == released["used"]
        assert resident_of(totals) == released["resident"]
        assert totals.host_allocated == 0 and totals.host_allocated_peak == done["host"]
        assert device(totals, 0).allocated_peak == done["device"][0]
        assert device(totals, 0).resident_on_peak == {1: done["resident"]["0"]["1"]}
        work.go_on()

        work.stage()
        totals = session.poll()
        assert [device(totals, i).allocated for i in (0, 1)] == [0, 0]
        assert resident_of(totals) == {}
        assert totals.calls["zeContextDestroy"] == 1
    finally:
        work.finish()


def test_a_traced_run_inside_a_traced_run_changes_neither(tmp_path: Path) -> None:
    # l0mem run --trace under l0mem run --trace: the inner session traces the driver
    # the outer one does, and each sees every record of the workload.
    base = sim.sim_env(devices=2, mirror="peer-resident")
    with TraceSession(tmp_path / "outer") as outer, TraceSession(tmp_path / "inner") as inner:
        env = inner.environment(outer.environment(base))
        assert env["L0MEM_TRACE_DRIVERS"] == base["ZE_ENABLE_ALT_DRIVERS"]
        work = Workload(L0_WORKLOAD, env)
        try:
            done = work.stage()
            for totals in (outer.poll(), inner.poll()):
                for i in (0, 1):
                    assert device(totals, i).allocated == done["device"][i]
                assert resident_of(totals) == done["resident"]
                assert totals.processes == 1 and totals.lost_records == 0
                assert totals.failed_calls == {}
            for _ in range(2):  # released, then closed
                work.go_on()
                work.stage()
            for totals in (outer.poll(), inner.poll()):
                assert [device(totals, i).allocated for i in (0, 1)] == [0, 0]
                assert totals.calls["zeContextDestroy"] == 1
        finally:
            work.finish()


def test_an_inner_traced_run_keeps_the_outer_runs_memory_off_peers(tmp_path: Path) -> None:
    base = sim.sim_env(devices=2, mirror="peer-resident")
    with (
        TraceSession(tmp_path / "outer", no_peer_residency=True) as outer,
        TraceSession(tmp_path / "inner") as inner,
    ):
        env = inner.environment(outer.environment(base))
    assert env["L0MEM_TRACE_NO_PEER_RESIDENCY"] == "1"
    assert env["L0MEM_TRACE_DIR"].split(":") == [str(inner.directory), str(outer.directory)]


def test_an_inner_traced_run_keeps_the_other_drivers_of_the_loaders_list(tmp_path: Path) -> None:
    # A second driver library beside the traced one stays in the inner run's list
    # (it was taken for the driver to trace, then dropped).
    base = sim.sim_env(devices=2)
    extra = tmp_path / "other-driver.so"
    extra.write_bytes(b"")
    base["ZE_ENABLE_ALT_DRIVERS"] += f",{extra}"
    with TraceSession(tmp_path / "outer") as outer, TraceSession(tmp_path / "inner") as inner:
        first = outer.environment(base)
        env = inner.environment(first)
    assert first["ZE_ENABLE_ALT_DRIVERS"].split(",") == [str(outer.library), str(extra)]
    assert env["ZE_ENABLE_ALT_DRIVERS"].split(",") == [str(inner.library), str(extra)]
    assert env["L0MEM_TRACE_DRIVERS"] == first["L0MEM_TRACE_DRIVERS"]


def test_a_trace_directory_with_a_colon_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot contain ':'"):
        TraceSession(tmp_path / "a:b")


def test_a_failed_allocation_is_counted_and_the_workload_sees_the_same_error(
    session: TraceSession,
) -> None:
    base = sim.sim_env(devices=2, fail_alloc_at=2)
    plain = sim.run_python_env(FAIL_WORKLOAD, base)
    traced = sim.run_python_env(FAIL_WORKLOAD, session.environment(base))
    assert plain.returncode == 0 and traced.returncode == 0, plain.stderr + traced.stderr
    code = json.loads(plain.stdout)["code"]
    assert code != 0 and json.loads(traced.stdout)["code"] == code
    totals = session.poll()
    assert totals.failed_calls == {"zeMemAllocDevice": 1}
    assert device(totals, 0).allocated_peak == 4096


def test_no_peer_residency_removes_the_mirror_and_keeps_the_results(tmp_path: Path) -> None:
    runs = {}
    for skip in (False, True):
        with TraceSession(tmp_path / str(skip), no_peer_residency=skip) as s:
            work = Workload(
                L0_WORKLOAD, s.environment(sim.sim_env(devices=2, mirror="peer-resident"))
            )
            try:
                runs[skip] = (work.stage(), s.poll())
            finally:
                work.go_on()
                work.stage()
                work.go_on()
                work.stage()
                work.finish()
    (with_peer, traced), (without_peer, skipped) = runs[False], runs[True]
    assert with_peer["mirror"] > 0
    assert without_peer["mirror"] == 0
    assert without_peer["digest"] == with_peer["digest"]
    assert skipped.skipped_calls == without_peer["skipped_calls"] == 3
    assert skipped.skipped_bytes == without_peer["skipped_bytes"]
    assert resident_of(skipped) == {} and skipped.failed_calls == {}
    assert traced.skipped_calls == 0 and resident_of(traced) == with_peer["resident"]
    # The owner's own residency call is not a peer's: it still reaches the driver.
    assert skipped.calls["zeContextMakeMemoryResident"] == 4


def test_children_write_their_own_files_and_exited_processes_hold_nothing(
    session: TraceSession,
) -> None:
    code = """
import os, sys
import l0mem.core as core
drv = core.drivers()[0]
ctx = drv.create_context()
kept = ctx.allocate_device(drv.devices()[0], 1 << 20)
pid = os.fork()
if pid == 0:
    extra = ctx.allocate_device(drv.devices()[1], 2 << 20)
    os._exit(0)
os.waitpid(pid, 0)
print("ok", flush=True)
sys.stdin.readline()
"""
    work = Workload(code, session.environment(sim.sim_env(devices=2)))
    try:
        assert work.proc.stdout is not None and work.proc.stdout.readline().strip() == "ok"
        totals = session.poll()
        assert totals.processes == 2
        # The child's allocation ended with it; the parent's is still live.
        assert device(totals, 1).allocated_peak == 2 << 20 and device(totals, 1).allocated == 0
        assert device(totals, 0).allocated == 1 << 20
    finally:
        work.go_on()
        assert work.proc.wait(timeout=60) == 0


def test_environment_keeps_other_drivers_and_padding(session: TraceSession) -> None:
    real = str(sim.build())
    env = session.environment(
        {"ZE_ENABLE_ALT_DRIVERS": f"/nonexistent/a.so,{real},/nonexistent/b.so"}
    )
    assert env["ZE_ENABLE_ALT_DRIVERS"] == f"{session.library},/nonexistent/a.so,/nonexistent/b.so"
    assert env["L0MEM_TRACE_DRIVERS"] == real
    assert "L0MEM_TRACE_NO_PEER_RESIDENCY" not in env
    default = session.environment({})
    assert default["L0MEM_TRACE_DRIVERS"] == "libze_intel_gpu.so.1"
    assert default["ZE_ENABLE_ALT_DRIVERS"] == str(session.library)


SYCL_WORKLOAD = """
import ctypes, json, os
from tests.support import sim
lib = ctypes.CDLL(str(sim.build()))  # the simulator behind the tracer: the loader's instance
assert lib.zesim_guard_null_ddi_calls() == 0
lib.zesim_mirror_bytes.restype = ctypes.c_uint64
lib.zesim_device_used.restype = ctypes.c_uint64
import dpctl, dpctl.memory as dm
devs = dpctl.get_platforms()[0].get_devices()
q = dpctl.SyclQueue(devs[0])
m = dm.MemoryUSMDevice(1 << 20, queue=q)
print(json.dumps({"devices": q.sycl_context.device_count, "mirror": lib.zesim_mirror_bytes(),
                  "used": [lib.zesim_device_used(i) for i in (0, 1)]}), flush=True)
"""


@pytest.mark.skipif(importlib.util.find_spec("dpctl") is None, reason="dpctl is not installed")
@pytest.mark.parametrize("adapter_v2", ["0", "1"])
def test_trace_sees_the_sycl_runtimes_own_residency_call(
    session: TraceSession, adapter_v2: str
) -> None:
    # As tests/test_sim_sycl.py sets the runtime up (the simulator's README explains the padding).
    base = sim.sim_env(devices=2, mirror="peer-resident")
    base["ZE_ENABLE_ALT_DRIVERS"] = f"{sim.build()},{sycl_sim.PADDING}"
    base["ONEAPI_DEVICE_SELECTOR"] = "level_zero:*"
    base["SYCL_UR_USE_LEVEL_ZERO_V2"] = adapter_v2
    base.pop("UR_L0_USM_RESIDENT", None)
    proc = sim.run_python_env(SYCL_WORKLOAD, session.environment(base), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2 and out["mirror"] > 0
    totals = session.poll()
    # The adapter pools device memory: compare with the simulator's live bytes, not 1 MiB.
    assert device(totals, 0).allocated_peak == out["used"][0] >= 1 << 20
    assert device(totals, 0).resident_on_peak == {1: out["mirror"]}
    assert totals.calls["zeContextMakeMemoryResident"] >= 1


@pytest.mark.parametrize(
    ("alt", "traced", "plain"),
    [
        # The tracer in front of the simulator: the simulator takes its place.
        ("/c/libl0mem_trace.so,/x/pad.so", "/s/libze_sim.so", "/s/libze_sim.so,/x/pad.so"),
        # In front of the installed driver (no alternative driver named).
        ("/c/libl0mem_trace.so", "libze_intel_gpu.so.1", "libze_intel_gpu.so.1"),
        # No tracer in front: the list stays as it is.
        ("/s/libze_sim.so", "", "/s/libze_sim.so"),
    ],
)
def test_untraced_puts_the_traced_driver_back_in_the_tracers_place(
    alt: str, traced: str, plain: str
) -> None:
    from l0mem.trace.environment import TRACE_VARS, untraced

    env = {"ZE_ENABLE_ALT_DRIVERS": alt, "L0MEM_TRACE_DIR": "/t", "HOME": "/h"}
    if traced:
        env["L0MEM_TRACE_DRIVERS"] = traced
    out = untraced(env)
    assert out["ZE_ENABLE_ALT_DRIVERS"] == plain
    assert out["HOME"] == "/h" and not set(TRACE_VARS) & set(out)
