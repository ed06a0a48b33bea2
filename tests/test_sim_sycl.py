"""The SYCL runtime's Level Zero adapter (through dpctl) on the simulated driver.

Each scenario runs in a fresh interpreter with a hard timeout. Two workarounds
for the pinned runtime on Debian's loader 1.8 are applied there; the
simulator's README ("The SYCL runtime on the simulator") explains both.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import sim

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("dpctl") is None, reason="dpctl (the SYCL runtime) is not installed"
)

VENV_LIB = Path(__file__).resolve().parents[1] / ".venv" / "lib"
MIB = 1 << 20

# Loader 1.8 appends its driver list again each time the adapter's static
# loader layer initializes it; absent paths make its first reserve() large
# enough that the list is never reallocated under handles already given out.
PADDING = ",".join(f"/nonexistent/l0mem-sim-pad-{i}.so" for i in range(4))

PRELUDE = """
import ctypes, json, os
lib = ctypes.CDLL(os.environ["ZE_ENABLE_ALT_DRIVERS"].split(",")[0])
assert lib.zesim_guard_null_ddi_calls() == 0
lib.zesim_mirror_bytes.restype = ctypes.c_uint64
lib.zesim_device_used.restype = ctypes.c_uint64
import dpctl, dpctl.memory as dm
plat = dpctl.get_platforms()[0]
devs = plat.get_devices()
out = {"names": [d.name for d in devs], "backend": str(devs[0].backend)}
"""


def run_sycl(body: str, adapter_v2: bool = False, resident: str | None = None) -> dict[str, Any]:
    """Run PRELUDE + `body` under the simulator (2 devices, peer-resident mirror) and return its JSON."""
    env = sim.sim_env(devices=2, mirror="peer-resident")
    env["ZE_ENABLE_ALT_DRIVERS"] = f"{sim.build()},{PADDING}"
    env["ONEAPI_DEVICE_SELECTOR"] = "level_zero:*"
    env["OCL_ICD_FILENAMES"] = str(VENV_LIB / "libintelocl.so")
    env["SYCL_UR_USE_LEVEL_ZERO_V2"] = "1" if adapter_v2 else "0"
    env.pop("UR_L0_USM_RESIDENT", None)
    if resident is not None:
        env["UR_L0_USM_RESIDENT"] = resident
    code = PRELUDE + body + "\nprint('RESULT ' + json.dumps(out))\n"
    proc = sim.run_python_env(code, env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


ALLOC_DEFAULT_CONTEXT = f"""
q = dpctl.SyclQueue(devs[0])
out["ctx_devices"] = q.sycl_context.device_count
before = lib.zesim_mirror_bytes()
m = dm.MemoryUSMDevice({MIB}, queue=q)
out["mirror_delta"] = lib.zesim_mirror_bytes() - before
out["used0"] = lib.zesim_device_used(0)
"""


def test_lists_the_simulated_gpus_on_level_zero() -> None:
    out = run_sycl("")
    assert out["names"] == ["l0mem simulated GPU 0", "l0mem simulated GPU 1"]
    assert "level_zero" in str(out["backend"])


def test_usm_device_memory_round_trips_and_fills() -> None:
    body = f"""
q = dpctl.SyclQueue(devs[1])
m = dm.MemoryUSMDevice({MIB}, queue=q)
src = os.urandom({MIB})
m.copy_from_host(src)
back = bytearray({MIB})
m.copy_to_host(back)
out["roundtrip"] = bytes(back) == src
m.memset(0x5A)
m.copy_to_host(back)
out["filled"] = back == bytearray(b"\\x5a" * {MIB})
out["used1"] = lib.zesim_device_used(1)
"""
    out = run_sycl(body)
    assert out["roundtrip"] is True
    assert out["filled"] is True
    assert out["used1"] >= MIB


def test_default_context_allocation_gets_the_peer_residency_mirror() -> None:
    out = run_sycl(ALLOC_DEFAULT_CONTEXT)
    assert out["ctx_devices"] == 2
    assert out["used0"] >= MIB
    # The adapter itself made the allocation resident on the peer device.
    assert out["mirror_delta"] == MIB


def test_single_device_context_allocation_has_no_mirror() -> None:
    body = f"""
ctx = dpctl.SyclContext([devs[0]])
q = dpctl.SyclQueue(ctx, devs[0])
out["ctx_devices"] = q.sycl_context.device_count
before_used = lib.zesim_device_used(0)
m = dm.MemoryUSMDevice({MIB}, queue=q)
out["used_delta"] = lib.zesim_device_used(0) - before_used
out["mirror"] = lib.zesim_mirror_bytes()
"""
    out = run_sycl(body)
    assert out["ctx_devices"] == 1
    assert out["used_delta"] >= MIB
    assert out["mirror"] == 0


def test_resident_on_own_device_only_removes_the_mirror() -> None:
    out = run_sycl(ALLOC_DEFAULT_CONTEXT, resident="0x001")
    assert out["ctx_devices"] == 2
    assert out["used0"] >= MIB
    assert out["mirror_delta"] == 0


def test_v2_adapter_default_context_allocation_is_mirrored() -> None:
    out = run_sycl(ALLOC_DEFAULT_CONTEXT, adapter_v2=True)
    assert out["ctx_devices"] == 2
    assert out["mirror_delta"] == MIB
