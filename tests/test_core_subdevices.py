"""Sub-devices (tiles) through l0mem's object layer, on the simulator's ``subdevices`` key.

Each case runs in a fresh interpreter: the loader reads the simulator's
configuration once per process. The numbers come from the simulator, not
from hardware.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.support.sim import run_python

MIB = 1 << 20

PRELUDE = """
import ctypes, json
import l0mem.core as core
from l0mem._ze.enums import ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE as FLAG_SUBDEVICE
from tests.support.sim import SimControl
sim = SimControl.from_env()
driver = core.drivers()[0]
roots = driver.devices()
def out(**kw):
    print("RESULT " + json.dumps(kw))
"""


def run(code: str, **config: object) -> dict[str, Any]:
    """Run `code` after PRELUDE under the simulator configured by `config`; return what it passed to out()."""
    proc = run_python(PRELUDE + textwrap.dedent(code), 60.0, **config)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no result:\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


@pytest.mark.parametrize("tiles", [0, 2, 4])
def test_sub_devices_match_the_configured_tiles(tiles: int) -> None:
    r = run(
        """
        out(counts=[len(d.sub_devices()) for d in roots],
            nested=[len(s.sub_devices()) for d in roots for s in d.sub_devices()],
            root_parents=[d.parent is None for d in roots])
        """,
        subdevices=tiles,
        devices=3,
    )
    assert r["counts"] == [tiles] * 3
    assert r["nested"] == [0] * (3 * tiles)  # tiles have no tiles of their own
    assert r["root_parents"] == [True] * 3


def test_sub_devices_carry_their_properties_and_parent() -> None:
    r = run(
        """
        first, again = roots[0].sub_devices(), roots[0].sub_devices()
        rows = []
        for root in roots:
            for s in root.sub_devices():
                p = s.properties
                rows.append({
                    "root": roots.index(root), "index": s.index, "parent_is_root": s.parent is root,
                    "id": p.subdevice_id, "flag": bool(p.flags & FLAG_SUBDEVICE), "name": s.name,
                    "uuid": s.uuid, "memory": s.total_memory, "maxalloc": p.max_mem_alloc_size,
                    "pci": s.pci_address, "driver_is": s.driver is driver,
                })
        t0, t1 = roots[0].sub_devices()
        u0, _ = roots[1].sub_devices()
        states = roots[0].sysman_memory()
        out(
            rows=rows,
            roots=[{"flag": bool(d.properties.flags & FLAG_SUBDEVICE), "name": d.name,
                    "uuid": d.uuid, "memory": d.total_memory, "pci": d.pci_address} for d in roots],
            same_objects=all(a is b for a, b in zip(first, again)),
            in_driver_list=[s in roots for s in first],
            peers=[t0.can_access_peer(t1), t1.can_access_peer(t0), t0.can_access_peer(u0),
                   t0.p2p_properties(t1).access, t0.p2p_properties(u0).access],
            sysman=[[s.on_subdevice, s.subdevice_id, s.size, s.physical_size] for s in states],
            sysman_via_tile=[[s.on_subdevice, s.subdevice_id] for s in t1.sysman_memory()],
        )
        """,
        subdevices=2,
        device_memory="1G",
        peers="none",
    )
    half = 512 * MIB
    assert [(row["root"], row["index"], row["id"]) for row in r["rows"]] == [
        (0, 0, 0),
        (0, 1, 1),
        (1, 0, 0),
        (1, 1, 1),
    ]
    for row in r["rows"]:
        root = r["roots"][row["root"]]
        assert row["parent_is_root"] and row["driver_is"] and row["flag"]
        assert row["memory"] == row["maxalloc"] == half
        assert row["name"] == root["name"] and row["pci"] == root["pci"]
    assert [root["flag"] for root in r["roots"]] == [False, False]
    assert [root["memory"] for root in r["roots"]] == [2 * half, 2 * half]
    uuids = [row["uuid"] for row in r["rows"]] + [root["uuid"] for root in r["roots"]]
    assert len(set(uuids)) == 6
    assert r["same_objects"]
    assert r["in_driver_list"] == [False, False]  # Driver.devices() lists root devices only
    # Tiles of one card reach each other whatever the peers matrix says; across cards it decides.
    assert r["peers"] == [True, True, False, True, False]
    assert r["sysman"] == [[True, 0, half, half], [True, 1, half, half]]
    assert r["sysman_via_tile"] == [[True, 0], [True, 1]]


def test_allocation_copy_and_kernel_on_sub_devices() -> None:
    r = run(
        """
        import numpy as np
        from l0mem.backends.kernels import spirv_bytes
        t0, t1 = roots[0].sub_devices()
        u0, _ = roots[1].sub_devices()
        ctx = driver.create_context([t0, t1, u0])
        steps = {"ctx_devices": [d is e for d, e in zip(ctx.devices, [t0, t1, u0])]}
        n = 1 << 16
        x = np.arange(n, dtype=np.float32)
        a = ctx.allocate_device(t0, x.nbytes)
        b = ctx.allocate_device(t1, x.nbytes)
        c = ctx.allocate_device(u0, x.nbytes)
        props = a.properties()
        steps["owner"] = [a.device is t0, props.type, props.device_handle == t0.handle,
                          b.properties().device_handle == t1.handle]
        steps["used"] = [sim.device_used(0), sim.subdevice_used(0, 0), sim.subdevice_used(0, 1),
                         sim.device_used(1), sim.subdevice_used(1, 0)]
        states = roots[0].sysman_memory()
        steps["sysman_used"] = [s.used for s in states]
        cl = ctx.immediate_command_list(t1)
        cl.copy_from_host(a, x)
        cl.copy(b, a)
        cl.copy(c, b)
        back = np.zeros(n, dtype=np.float32)
        cl.copy_to_host(c, back)
        steps["round_trip"] = bool(np.array_equal(back, x))
        steps["moved"] = [sim.bytes_moved(-1, 0), sim.bytes_moved(0, 0), sim.bytes_moved(0, 1),
                          sim.bytes_moved(1, -1)]
        cl.fill(b, bytes([0, 0, 0x80, 0x3F]))  # 1.0f everywhere
        module = ctx.create_module(t1, spirv_bytes())
        k = module.kernel("l0mem_f32_add")
        k.set_group_size(256)
        k.set_arg(0, a)
        k.set_arg(1, b)
        k.set_arg(2, ctypes.c_uint64(n))
        cl.launch(k, n // 256)
        cl.copy_to_host(b, back)
        steps["added"] = bool(np.array_equal(back, x + 1.0))
        steps["launches"] = sim.kernel_launches()
        queue = ctx.command_queue(t0)
        reg = ctx.command_list(t0)
        reg.copy(c, a)
        reg.end()
        queue.execute([reg])
        queue.synchronize()
        cl.copy_to_host(c, back)
        steps["regular"] = bool(np.array_equal(back, x))
        for alloc in (a, b, c):
            alloc.close()
        steps["freed"] = [sim.device_used(0), sim.subdevice_used(0, 0), sim.subdevice_used(0, 1),
                          sim.device_used(1)]
        ctx.close()
        out(**steps)
        """,
        subdevices=2,
        device_memory="256M",
    )
    nbytes = (1 << 16) * 4
    assert r["ctx_devices"] == [True, True, True]
    assert r["owner"] == [True, "device", True, True]
    # [card 0, tile 0.0, tile 0.1, card 1, tile 1.0]: a tile's bytes count on its card too.
    assert r["used"] == [2 * nbytes, nbytes, nbytes, nbytes, nbytes]
    assert r["sysman_used"] == [nbytes, nbytes]
    assert r["round_trip"]
    # Ground truth counts copies by card: tile 0.0 -> tile 0.1 stays on card 0.
    assert r["moved"] == [nbytes, nbytes, nbytes, nbytes]
    assert r["added"] and r["launches"] == 1
    assert r["regular"]
    assert r["freed"] == [0, 0, 0, 0]


def test_context_over_one_tile_is_limited_to_that_tile() -> None:
    r = run(
        """
        t0, t1 = roots[0].sub_devices()
        ctx = driver.create_context([t0])
        errors = []
        for dev in (t1, roots[0]):
            try:
                ctx.allocate_device(dev, 4096)
            except ValueError as e:
                errors.append(str(e))
        a = ctx.allocate_device(t0, 4096)
        out(errors=errors, used=[sim.subdevice_used(0, 0), sim.subdevice_used(0, 1)],
            device=a.device is t0)
        """,
        subdevices=2,
    )
    assert len(r["errors"]) == 2
    assert all("is not a device of this context" in e for e in r["errors"])
    assert r["used"] == [4096, 0]
    assert r["device"]


def test_context_over_root_devices_accepts_their_tiles() -> None:
    r = run(
        """
        t0, _ = roots[0].sub_devices()
        ctx = driver.create_context()
        try:
            a = ctx.allocate_device(t0, 4096)
            ctx.make_resident(t0, a)
            out(error=None, used=sim.subdevice_used(0, 0), device=a.device is t0)
        except ValueError as e:
            out(error=str(e))
        """,
        subdevices=2,
    )
    assert r == {"error": None, "used": 4096, "device": True}
