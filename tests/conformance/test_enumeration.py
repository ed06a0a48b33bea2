"""Enumeration on NEO without hardware: one and two root devices, PVC tiles flat and composite."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance import neo

INTEL = 0x8086
VALIDATION = pytest.mark.parametrize("layers", [{}, neo.VALIDATION], ids=["plain", "validation"])


def _devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    (driver,) = facts["drivers"]
    devices: list[dict[str, Any]] = driver["devices"]
    return devices


@pytest.mark.parametrize("validation", [False, True], ids=["plain", "validation"])
def test_one_root_device(validation: bool) -> None:
    facts = neo.probe("enumeration", neo.env("bmg", **(neo.VALIDATION if validation else {})))
    (dev,) = _devices(facts)
    assert dev["type"] == "GPU" and dev["vendor_id"] == INTEL
    assert not dev["subdevice"] and dev["sub_devices"] == []
    assert dev["total_memory"] > 0
    assert facts["flat"] == [dev["name"]]
    (driver,) = facts["drivers"]
    # zeInitDrivers is served by NEO behind loader 1.32: no fallback is needed.
    assert facts["init_path"] == "zeInitDrivers"
    assert tuple(driver["api_version"]) >= (1, 10)
    names = [name for name, _ in facts["loader"]]
    assert ("validation layer" in names) is validation


def _layered(facts: dict[str, Any], layers: dict[str, str]) -> None:
    """Fail unless the validation layer was loaded exactly when ``layers`` asked for it."""
    names = [name for name, _ in facts["loader"]]
    assert ("validation layer" in names) is bool(layers)


@VALIDATION
def test_two_root_devices_have_their_own_uuids_and_no_peer_access(layers: dict[str, str]) -> None:
    facts = neo.probe("enumeration", neo.env("bmg", CreateMultipleRootDevices="2", **layers))
    _layered(facts, layers)
    devs = _devices(facts)
    assert len(devs) == 2 and len(facts["flat"]) == 2
    assert devs[0]["uuid"] != devs[1]["uuid"]
    (driver,) = facts["drivers"]
    assert driver["peer"] == [[True, False], [False, True]]
    # NEO reports 0 in an unknown unit for such a pair: l0mem shows no figure.
    for row, other in ((0, 1), (1, 0)):
        p2p = driver["p2p"][row][other]
        assert p2p["access"] is False
        assert p2p["logical_bandwidth"] is None and p2p["bandwidth_unit"] is None


@VALIDATION
def test_pvc_tiles_flat_are_two_devices_with_peer_access(layers: dict[str, str]) -> None:
    environ = neo.env(
        "pvc", CreateMultipleSubDevices="2", ZE_FLAT_DEVICE_HIERARCHY="FLAT", **layers
    )
    facts = neo.probe("enumeration", environ)
    _layered(facts, layers)
    devs = _devices(facts)
    assert len(devs) == 2
    assert all(d["sub_devices"] == [] for d in devs)
    assert {d["subdevice_id"] for d in devs} == {0, 1}
    assert devs[0]["uuid"] != devs[1]["uuid"]
    assert facts["drivers"][0]["peer"] == [[True, True], [True, True]]
    assert facts["drivers"][0]["p2p"][0][1]["access"] is True


@VALIDATION
def test_pvc_tiles_composite_are_sub_devices_of_one_card(layers: dict[str, str]) -> None:
    environ = neo.env(
        "pvc", CreateMultipleSubDevices="2", ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE", **layers
    )
    facts = neo.probe("enumeration", environ)
    _layered(facts, layers)
    (card,) = _devices(facts)
    tiles = card["sub_devices"]
    assert len(tiles) == 2 and all(t["subdevice"] for t in tiles)
    assert [t["subdevice_id"] for t in tiles] == [0, 1]
    assert len({card["uuid"], *(t["uuid"] for t in tiles)}) == 3
    # The card's memory is its tiles' memory.
    assert card["total_memory"] == sum(t["total_memory"] for t in tiles)
    # l0mem's device indices count root devices only, as `l0mem info` lists them.
    assert facts["flat"] == [card["name"]]
