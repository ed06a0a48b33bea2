"""Properties, contexts, allocations and copies on NEO without hardware."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance import neo


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "validation"])
def memory(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The memory probe's facts, without and with the loader's validation layer."""
    return neo.probe("memory", neo.env("bmg", **(neo.VALIDATION if request.param else {})))


def test_properties_info_shows_agree_with_the_driver() -> None:
    facts = neo.probe("properties", neo.env("bmg"))
    (driver,) = facts["info"]["drivers"]
    (shown,) = driver["devices"]
    (dev,) = facts["devices"]
    props = dev["properties"]
    assert shown["name"] == props["name"] and shown["uuid"] == props["uuid"]
    assert shown["type"] == "GPU" and shown["vendor_id"] == "0x8086"
    assert int(shown["device_id"], 16) == props["device_id"]
    assert shown["memory_bytes"] == sum(m["total_size"] for m in dev["memory"]) > 0
    assert shown["sub_devices"] == 0 and driver["peer_access"] == [[True]]
    # No GPU, no PCI device and no kernel driver: shown as unknown, never invented.
    assert shown["pci_address"] is None and shown["kernel_driver"] is None
    assert facts["info"]["loader"]["init_path"] == "zeInitDrivers"
    assert props["max_mem_alloc_size"] > 0 and props["timer_resolution_ns"] > 0
    assert 1 <= props["kernel_timestamp_valid_bits"] <= 64
    assert dev["compute"]["max_total_group_size"] >= 1
    compute_ordinal, copy_ordinal = dev["ordinals"]
    assert compute_ordinal >= 0 and copy_ordinal >= 0
    assert isinstance(dev["dmabuf"], bool)


def test_contexts_over_every_device_and_a_list(memory: dict[str, Any]) -> None:
    assert memory["default_context_devices"] == 1
    # Closing the context released every handle made in it.
    assert memory["live_after"] == 0


@pytest.mark.parametrize("kind", ["device", "host", "shared"])
def test_every_allocation_kind_and_its_properties(memory: dict[str, Any], kind: str) -> None:
    for nbytes in (1, 4096, (1 << 20) + 3, 64 << 20):
        a = memory["allocations"][f"{kind}:{nbytes}"]
        assert "error" not in a, a
        assert a["type"] == kind and a["nbytes"] == nbytes and a["in_range"]
        assert a["page_size"] >= 4096
        # Host memory belongs to no device; device and shared memory to theirs.
        assert a["no_device"] is (kind == "host")
        assert a["on_device"] is (kind != "host")


@pytest.mark.parametrize("validation", [False, True], ids=["plain", "validation"])
def test_dmabuf_export_allocation_is_made_and_no_descriptor_is_asked(validation: bool) -> None:
    facts = neo.probe("dmabuf", neo.env("bmg", **(neo.VALIDATION if validation else {})))
    assert facts["allocation"] == "device"
    # The device lists no export type, so l0mem asks for no descriptor (and the
    # audit skips its l0-dmabuf set-up): a clean ZeError, the process's stdin kept.
    assert facts["supports"] is False
    refused = facts["l0mem_fd"]
    assert refused["error"] == "UnsupportedFeatureError", refused
    assert "cannot export allocations as dma-buf" in refused["message"]
    assert facts["stdin_open_after"] is facts["stdin_open_before"]


def test_fact_dmabuf_export_is_accepted_unlisted_and_answers_descriptor_0() -> None:
    # Why l0mem checks the export types first: the descriptor the driver hands
    # out is 0, the process's stdin, not a new dma-buf the allocation could own.
    facts = neo.probe("dmabuf", neo.env("bmg"))
    assert facts["export_types"] == 0
    assert facts["driver"] == {"rc": 0, "fd": 0}


def test_allocation_error_paths(memory: dict[str, Any]) -> None:
    assert memory["too_big"]["error"] == "UnsupportedSizeError"
    assert memory["zero"]["error"] == "ValueError"


def test_residency_is_refused_with_a_driver_error(memory: dict[str, Any]) -> None:
    # No residency without hardware: a clean ZeError, never a crash (hardware only).
    assert memory["resident"]["error"] == "UninitializedError"
    assert memory["evict"]["error"] in ("InvalidArgumentError", "UninitializedError")


@pytest.mark.parametrize("validation", [False, True], ids=["plain", "validation"])
def test_cpu_copies_move_bytes_byte_for_byte(validation: bool) -> None:
    facts = neo.probe(
        "copies", neo.env("bmg", **neo.CPU_COPIES, **(neo.VALIDATION if validation else {}))
    )
    for n in ("1", "4097", str(1 << 20)):
        legs = facts[n]
        assert "error" not in legs, legs
        for leg in ("host_to_device", "device_to_device", "device_to_shared", "shared_to_host"):
            assert legs[leg], (n, leg)
    # Fills never execute without hardware, even with CPU copies.
    assert facts["fill_wrote"] is False


def test_without_cpu_copies_nothing_moves() -> None:
    facts = neo.probe("copies", neo.env("bmg"))
    assert not any(facts["1"][leg] for leg in ("host_to_device", "device_to_device"))
    assert facts["fill_wrote"] is False


def test_backend_stages_copies_between_root_devices() -> None:
    # A direct CPU copy between two root devices crashes the driver (below): the
    # backend never makes one without peer access, and the staged bytes arrive,
    # through its pinned ring (zeMemAllocHost), in several chunks, within one
    # context and between two.
    code = """
from l0mem.backends import LevelZeroBackend, level_zero_devices
from l0mem.backends.staging import CHUNK_BYTES
data = bytes(range(251)) * (2 * CHUNK_BYTES // 251 + 7)
for mode, why in (("multi", "no peer access"), ("single", "separate contexts")):
    with LevelZeroBackend(level_zero_devices(), context=mode) as b:
        assert b.copy_route(0, 1) == ("staged", why)
        src, dst = b.allocate(0, len(data)), b.allocate(1, len(data))
        b.upload(src, data).wait()
        b.copy(dst, src).wait()
        out = bytearray(len(data))
        b.download(dst, out).wait()
        print(mode, "SAME", bytes(out) == data)
"""
    environ = neo.env("bmg", CreateMultipleRootDevices="2", **neo.CPU_COPIES)
    proc = neo.run_code(code, environ)
    neo.no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "multi SAME True" in proc.stdout and "single SAME True" in proc.stdout, proc.stdout


def test_fact_a_direct_cpu_copy_between_root_devices_kills_the_process() -> None:
    code = """
import l0mem.core as core
drv = core.drivers()[0]
d0, d1 = drv.devices()[:2]
ctx = drv.create_context([d0, d1])
a, b = ctx.allocate_device(d0, 4096), ctx.allocate_device(d1, 4096)
ctx.immediate_command_list(d0).copy(b, a, 4096)
print("RETURNED")
"""
    environ = neo.env("bmg", CreateMultipleRootDevices="2", **neo.CPU_COPIES)
    proc = neo.run_code(code, environ)
    assert proc.returncode < 0 and "RETURNED" not in proc.stdout, (proc.returncode, proc.stderr)


def test_fact_a_copy_into_another_contexts_host_allocation_kills_the_process() -> None:
    # Why the staging ring between contexts has a ring in each: the source's
    # list writing the destination context's pinned memory crashes the driver.
    code = """
import l0mem.core as core
drv = core.drivers()[0]
d0, d1 = drv.devices()[:2]
mine, theirs = drv.create_context([d0]), drv.create_context([d1])
a = mine.allocate_device(d0, 4096)
mine.immediate_command_list(d0).copy(mine.allocate_host(4096), a, 4096)
print("OWN CONTEXT", flush=True)
mine.immediate_command_list(d0).copy(theirs.allocate_host(4096), a, 4096)
print("RETURNED")
"""
    environ = neo.env("bmg", CreateMultipleRootDevices="2", **neo.CPU_COPIES)
    proc = neo.run_code(code, environ)
    assert "OWN CONTEXT" in proc.stdout, proc.stderr
    assert proc.returncode < 0 and "RETURNED" not in proc.stdout, (proc.returncode, proc.stderr)
