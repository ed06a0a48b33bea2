"""The allocation tracer in front of Intel's real driver (NEO without hardware) and loader 1.32.

The tracer is the loader's driver and NEO sits behind it. What is checked
here is what only the real stack can show: the loader accepts the tracer's
tables, NEO's answers reach the workload unchanged, the tracer's records
name NEO's device, and NEO's driver-DDI-handles extension (through which a
newer loader would call NEO directly, past the tracer) is hidden.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from l0mem.trace import TraceSession, library
from tests.conformance import neo

DDI_HANDLES = "ZE_extension_driver_ddi_handles"
DEVICE_BYTES = (1 << 20) + 3
HOST_BYTES = 4096
SHARED_BYTES = 64 << 10

WORKLOAD = f"""
import json
import l0mem.core as core
from l0mem._ze import ZeError

(drv,) = core.drivers()
(dev,) = drv.devices()
ctx = drv.create_context()
d = ctx.allocate_device(dev, {DEVICE_BYTES})
h = ctx.allocate_host({HOST_BYTES})
s = ctx.allocate_shared(dev, {SHARED_BYTES})
outcomes = {{}}
for name, call in (("resident", ctx.make_resident), ("evict", ctx.evict)):
    try:
        call(dev, d)
        outcomes[name] = "ok"
    except ZeError as e:
        outcomes[name] = type(e).__name__
print("RESULT " + json.dumps(dict(
    outcomes=outcomes,
    name=dev.properties.name,
    uuid=str(dev.properties.uuid),
    extensions=sorted(drv.extensions()),
)))
for a in (d, h, s):
    a.close()
ctx.close()
"""


def _run(environ: dict[str, str]) -> dict[str, Any]:
    proc = neo.run_code(WORKLOAD, environ)
    neo.no_traceback(proc)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(neo.RESULT)]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1][len(neo.RESULT) :])
    return result


@pytest.fixture(scope="module")
def tracer() -> Path:
    """The tracer library: prebuilt by .ci/conformance (the root has no compiler), or built here."""
    if os.environ.get("CI") == "true" and not os.environ.get("L0MEM_TRACE_LIBRARY"):
        pytest.fail("CI=true: .ci/conformance must hand the root a prebuilt tracer")
    return library()


@pytest.mark.parametrize("validation", [False, True], ids=["plain", "validation"])
def test_the_tracer_records_neo_allocations_and_hides_ddi_handles(
    tracer: Path, tmp_path: Path, validation: bool
) -> None:
    keys = neo.VALIDATION if validation else {}
    plain = _run(neo.env("bmg", **keys))
    with TraceSession(tmp_path) as session:
        traced = _run(session.environment(neo.env("bmg", **keys)))
        totals = session.poll()
    # NEO offers the extension; behind the tracer the loader must not see it.
    assert DDI_HANDLES in plain["extensions"], plain["extensions"]
    assert DDI_HANDLES not in traced["extensions"]
    assert set(traced["extensions"]) == set(plain["extensions"]) - {DDI_HANDLES}
    assert traced["name"] == plain["name"] and traced["uuid"] == plain["uuid"]
    # The tracer never changes an answer (NEO without hardware refuses residency
    # calls as uninitialized: the same with and without the tracer).
    assert traced["outcomes"] == plain["outcomes"]

    assert totals.processes == 1 and totals.lost_records == 0, totals
    entry = {"resident": "zeContextMakeMemoryResident", "evict": "zeContextEvictMemory"}
    failed = {entry[k]: 1 for k, v in traced["outcomes"].items() if v != "ok"}
    assert dict(totals.failed_calls) == failed, (totals.failed_calls, traced["outcomes"])
    (device,) = totals.devices
    assert device.name == plain["name"] and device.index == 0
    assert device.allocated_peak == DEVICE_BYTES and device.allocated == 0
    assert device.shared_allocated == 0  # freed; the peak of device memory is the device's
    assert totals.host_allocated_peak == HOST_BYTES and totals.host_allocated == 0
    # Residency on the owner itself is no peer residency: nothing to count.
    assert dict(device.resident_on_peak) == {}
    calls = dict(totals.calls)
    for name in ("zeMemAllocDevice", "zeMemAllocHost", "zeMemAllocShared"):
        assert calls.get(name) == 1, calls
    assert calls.get("zeContextMakeMemoryResident") == 1, calls
    assert calls.get("zeMemFree", 0) + calls.get("zeMemFreeExt", 0) == 3, calls

