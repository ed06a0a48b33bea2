"""The driver environment: what a report records, and when NEO runs without hardware."""

from __future__ import annotations

import pytest

from l0mem.driverenv import (
    MAX_VALUE_CHARS,
    is_neo_key,
    no_hardware_reason,
    recorded_environment,
)

AUB = {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "1", "ProductFamilyOverride": "bmg"}


def test_recorded_environment_takes_driver_variables_only() -> None:
    env = {
        "ZE_AFFINITY_MASK": "0",
        "ZES_ENABLE_SYSMAN": "1",
        "ZET_ENABLE_METRICS": "1",
        "ZEL_ENABLE_LOADER_LOGGING": "1",
        "UR_L0_USM_RESIDENT": "0x001",
        "SYCL_UR_USE_LEVEL_ZERO_V2": "0",
        "ONEAPI_DEVICE_SELECTOR": "level_zero:*",
        "NEO_CACHE_PERSISTENT": "0",
        "IGC_ShaderDumpEnable": "1",
        "ZESIM_DEVICES": "2",
        "OCL_ICD_FILENAMES": "/x/libintelocl.so",
        "L0MEM_ZE_LOADER": "/x/libze_loader.so.1",
        # Not the driver's business: never recorded, whatever the value.
        "PATH": "/usr/bin",
        "HOME": "/home/someone",
        "AWS_SECRET_ACCESS_KEY": "hunter2",
        "ZEROCONF": "1",
        "EnableDeferBacking": "0",  # a NEO key while NEO does not read its keys
    }
    got = recorded_environment(env)
    unrelated = {"PATH", "HOME", "AWS_SECRET_ACCESS_KEY", "ZEROCONF", "EnableDeferBacking"}
    assert set(got) == set(env) - unrelated
    assert "hunter2" not in got.values() and "EnableDeferBacking" not in got
    assert list(got) == sorted(got)


def test_neo_keys_are_recorded_while_neo_reads_them() -> None:
    env = {**AUB, "EnableDeferBacking": "0", "SHELL": "/bin/sh", "Path": "C:\\x", "LANG": "C"}
    got = recorded_environment(env)
    assert got == {**AUB, "EnableDeferBacking": "0", "Path": "C:\\x"}
    assert recorded_environment({**env, "NEOReadDebugKeys": "0"}) == {"NEOReadDebugKeys": "0"}


@pytest.mark.parametrize(
    ("name", "neo"),
    [
        ("SetCommandStreamReceiver", True),
        ("ForceZeDeviceCanAccessPerReturnValue", True),
        ("UseAubStream", True),
        ("PATH", False),
        ("ZE_AFFINITY_MASK", False),
        ("Set_Command", False),
        ("lowercase", False),
        ("X", False),
    ],
)
def test_neo_key_shape(name: str, neo: bool) -> None:
    assert is_neo_key(name) is neo


def test_long_values_are_cut() -> None:
    got = recorded_environment({"ZE_ENABLE_ALT_DRIVERS": "x" * 5000})
    assert len(got["ZE_ENABLE_ALT_DRIVERS"]) == MAX_VALUE_CHARS


@pytest.mark.parametrize("csr", ["1", "2", "4", "5", " 1 ", "0x1", "7"])
def test_no_hardware_modes(csr: str) -> None:
    reason = no_hardware_reason({**AUB, "SetCommandStreamReceiver": csr})
    assert reason is not None and "\n" not in reason
    assert f"SetCommandStreamReceiver={csr.strip()}" in reason
    assert "ProductFamilyOverride=bmg" in reason and "no GPU executes" in reason


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SetCommandStreamReceiver": "1"},  # NEO does not read its keys
        {"NEOReadDebugKeys": "0", "SetCommandStreamReceiver": "1"},
        {"NEOReadDebugKeys": "x", "SetCommandStreamReceiver": "1"},
        {"NEOReadDebugKeys": "1"},
        {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "0"},  # the hardware
        {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "3"},  # hardware with a capture
        {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "-1"},  # the default
        {"NEOReadDebugKeys": "1", "SetCommandStreamReceiver": "aub"},  # NEO reads 0
    ],
)
def test_hardware_modes(env: dict[str, str]) -> None:
    assert no_hardware_reason(env) is None


def test_keys_release_builds_read_are_recorded_without_debug_keys_on() -> None:
    env = {"MakeAllBuffersResident": "1", "EnableDeferBacking": "0", "HomeDir": "/x"}
    assert recorded_environment(env) == {"MakeAllBuffersResident": "1"}
