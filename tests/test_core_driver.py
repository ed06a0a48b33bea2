"""Drivers and devices of l0mem.core through the real loader and the simulator."""

from __future__ import annotations

import os

import pytest

import l0mem.core as core
from l0mem._ze.errors import MissingFunctionError, UnsupportedFeatureError
from tests.support import core_fixtures, ze_session

sim = core_fixtures.sim
clean = core_fixtures.clean
driver = core_fixtures.driver


def test_decode_driver_version_matches_compute_runtime_packing():
    raw = (1 << 24) | (6 << 16) | 30508
    assert core.decode_driver_version(raw) == "1.6.30508"
    assert core.decode_driver_version(0xFFFFFFFF) == "255.255.65535"
    with pytest.raises(ValueError, match="32-bit"):
        core.decode_driver_version(1 << 32)


def test_drivers_is_cached_and_thread_safe(sim):
    import threading

    results: list[list[core.Driver]] = []
    threads = [threading.Thread(target=lambda: results.append(core.drivers())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    firsts = {id(r[0]) for r in results}
    assert len(firsts) == 1
    assert results[0][0] is core.drivers()[0]


def test_driver_properties_and_extensions(driver):
    props = driver.properties
    assert isinstance(props, core.DriverProperties)
    assert props.version == core.decode_driver_version(props.driver_version)
    assert len(props.uuid) == 36 and props.uuid.count("-") == 4
    assert props.api_version[0] == 1
    ext = driver.extensions()
    assert isinstance(ext, dict)
    assert all(isinstance(k, str) and k and isinstance(v, int) for k, v in ext.items())


def test_devices_are_stable_objects_with_properties(driver):
    devices = driver.devices()
    assert len(devices) == ze_session.DEFAULT_CONFIG["devices"]
    assert devices == driver.devices()
    assert [d.index for d in devices] == list(range(len(devices)))
    uuids = {d.uuid for d in devices}
    assert len(uuids) == len(devices)
    for d in devices:
        p = d.properties
        assert p.name == d.name and d.name
        assert d.type == "GPU"
        assert d.vendor_id == p.vendor_id and d.device_id == p.device_id
        assert p.timer_resolution_ns > 0
        assert d.driver is driver


def test_memory_and_compute_properties(driver):
    d = driver.devices()[0]
    mems = d.memory_properties()
    assert mems and all(isinstance(m, core.MemoryProperties) for m in mems)
    assert d.total_memory == sum(m.total_size for m in mems) == 2**30
    cp = d.compute_properties
    assert cp.max_total_group_size >= 1
    assert all(x >= 1 for x in cp.max_group_size)
    assert len(cp.subgroup_sizes) <= 8


def test_pci_address_format_and_uniqueness(driver):
    addrs = [d.pci_address for d in driver.devices()]
    assert all(a is not None for a in addrs)
    import re

    assert all(re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", a or "") for a in addrs)
    assert len(set(addrs)) == len(addrs)


def _fake_pci(root, bdf, driver, vendor, device):
    (root / "drivers" / driver).mkdir(parents=True, exist_ok=True)
    entry = root / "devices" / bdf
    entry.mkdir(parents=True)
    (entry / "vendor").write_text(f"0x{vendor:04x}\n")
    (entry / "device").write_text(f"0x{device:04x}\n")
    os.symlink(root / "drivers" / driver, entry / "driver")


def test_kernel_driver_reads_sysfs_symlink(tmp_path):
    bdf = "0000:03:00.0"
    _fake_pci(tmp_path, bdf, "xe", 0x8086, 0xE20B)
    devices = str(tmp_path / "devices")
    assert core.kernel_driver_of(bdf, devices) == "xe"
    assert core.kernel_driver_of(bdf, devices, vendor_id=0x8086, device_id=0xE20B) == "xe"
    assert core.kernel_driver_of(bdf, devices, vendor_id=0x10DE) is None  # another card
    assert core.kernel_driver_of(bdf, devices, vendor_id=0x8086, device_id=0x1234) is None
    assert core.kernel_driver_of("0000:04:00.0", devices) is None
    assert core.kernel_driver_of(None) is None


def test_kernel_driver_follows_the_device_pci_address(driver, tmp_path, monkeypatch):
    import l0mem.core.device as device_mod

    d0, d1, d2 = driver.devices()[:3]
    _fake_pci(tmp_path, str(d0.pci_address), "i915", d0.vendor_id, d0.device_id)
    _fake_pci(tmp_path, str(d2.pci_address), "nvme", 0x144D, 0xA808)  # someone else's slot
    monkeypatch.setattr(device_mod, "SYSFS_PCI", str(tmp_path / "devices"))
    assert d0.kernel_driver == "i915"
    assert d1.kernel_driver is None
    assert d2.kernel_driver is None


@pytest.mark.hardware
def test_kernel_driver_on_real_intel_gpu():
    devs = [d for drv in core.drivers() for d in drv.devices()]
    assert devs
    assert {d.kernel_driver for d in devs} <= {"xe", "i915"}


def test_sub_devices_are_devices(driver):
    for d in driver.devices():
        subs = d.sub_devices()
        assert subs == d.sub_devices()
        for s in subs:
            assert s.parent is d and isinstance(s.name, str)


def test_peer_access_follows_configuration(clean, driver):
    a, b, c = driver.devices()[:3]
    assert a.can_access_peer(b)
    p = a.p2p_properties(b)
    assert p.access and p.atomics
    # The simulator lists the bandwidth extension, so the chained struct is filled in.
    assert p.bandwidth_unit == "bytes/ns" and p.logical_bandwidth and p.logical_bandwidth > 0
    clean.set("peers", "0>1")
    assert a.can_access_peer(b)
    assert not b.can_access_peer(a)
    assert not a.can_access_peer(c)
    denied = b.p2p_properties(a)
    assert not denied.access and not denied.atomics and denied.logical_bandwidth == 0
    clean.set("peers", "none")
    assert not a.can_access_peer(b)


def test_external_memory_export_types(clean, driver):
    d = driver.devices()[0]
    assert d.supports_dmabuf_export
    clean.set("dmabuf", "0")
    try:
        assert not d.supports_dmabuf_export
    finally:
        clean.set("dmabuf", "1")


def test_sysman_memory_reports_use(clean, driver):
    d = driver.devices()[1]
    before = d.sysman_memory()
    assert before is not None and before
    dev_mem = [m for m in before if m.location == "device"]
    assert dev_mem and dev_mem[0].size == 2**30
    with driver.create_context([d]) as ctx:
        alloc = ctx.allocate_device(d, 3 << 20)
        after = [m for m in d.sysman_memory() or [] if m.location == "device"]
        assert after[0].used - dev_mem[0].used == 3 << 20
        assert after[0].free == after[0].size - after[0].used
        alloc.close()


def test_sysman_unavailable_gives_none(sim):
    from tests.support.sim import run_python

    code = (
        "import l0mem.core as c\n"
        "d = c.drivers()[0].devices()[0]\n"
        "print('STATE', d.sysman_memory())\n"
    )
    proc = run_python(code, devices=1, sysman=0)
    assert proc.returncode == 0, proc.stderr
    assert "STATE None" in proc.stdout


def test_driver_version_from_simulator_config(sim):
    from tests.support.sim import run_python

    raw = (1 << 24) | (3 << 16) | 29735
    code = "import l0mem.core as c\nprint('V', c.drivers()[0].properties.version)\n"
    proc = run_python(code, devices=1, driver_version=str(raw))
    assert proc.returncode == 0, proc.stderr
    assert "V 1.3.29735" in proc.stdout


def test_optional_queries_do_not_hide_a_lost_device(clean, driver):
    from l0mem._ze.errors import DeviceLostError

    d = driver.devices()[0]
    clean.set("device_lost_at", "1")
    with pytest.raises(DeviceLostError):
        d.sysman_memory()
    with pytest.raises(DeviceLostError):
        _ = d.pci_address
    clean.set("device_lost_at", "0")
    assert d.pci_address is not None


def test_sysman_is_enabled_for_library_users(sim):
    from tests.support.sim import run_python_env, sim_env

    code = (
        "import os\n"
        "import l0mem.core as c\n"
        "d = c.drivers()[0].devices()[0]\n"
        "state = d.sysman_memory()\n"
        "print('ENV', os.environ.get('ZES_ENABLE_SYSMAN'))\n"
        "print('STATE', state is not None and len(state) > 0, d.sysman_unavailable)\n"
    )
    env = sim_env(devices=1)
    del env["ZES_ENABLE_SYSMAN"]  # a library user who never heard of it
    proc = run_python_env(code, env)
    assert proc.returncode == 0, proc.stderr
    assert "ENV 1" in proc.stdout
    assert "STATE True None" in proc.stdout
    env["ZES_ENABLE_SYSMAN"] = "0"  # an explicit choice is kept, and the reason is given
    proc = run_python_env(code, env)
    assert proc.returncode == 0, proc.stderr
    assert "ENV 0" in proc.stdout
    assert "STATE False" in proc.stdout and "ZES_ENABLE_SYSMAN was '0'" in proc.stdout


@pytest.mark.parametrize(
    "failure",
    [
        lambda name: UnsupportedFeatureError(None, name),  # a driver without the extension
        lambda name: MissingFunctionError(f"{name} is not exported"),  # an old loader
    ],
)
def test_pci_address_falls_back_to_sysman(driver, monkeypatch, failure):
    from l0mem.core import _raw

    d = driver.devices()[2]
    expected = d.pci_address
    assert expected is not None
    real_call = _raw.call
    asked = []

    def without_extension(function, *args):
        asked.append(function.__name__)
        if function.__name__ == "zeDevicePciGetPropertiesExt":
            raise failure(function.__name__)
        return real_call(function, *args)

    monkeypatch.setattr(_raw, "call", without_extension)
    assert d.pci_address == expected
    assert asked == ["zeDevicePciGetPropertiesExt", "zesDevicePciGetProperties"]


def test_pci_address_is_none_without_extension_and_sysman(driver, monkeypatch):
    from l0mem._ze import errors
    from l0mem.core import _raw

    def nothing(function, *args):
        raise errors.UninitializedError(None, function.__name__)

    monkeypatch.setattr(_raw, "call", nothing)
    assert driver.devices()[0].pci_address is None


def test_device_properties_integrated_flag(driver):
    for d in driver.devices():
        assert d.properties.integrated is False  # the simulated GPUs are discrete
    flags = core.DeviceProperties(**{**vars(driver.devices()[0].properties), "flags": 1})
    assert flags.integrated is True


def test_p2p_figures_in_an_unknown_unit_are_left_out():
    # Intel's driver reports 0 "unknown" for a pair without peer access: no figure at all.
    from l0mem._ze import structs as S
    from l0mem._ze.enums import ze_bandwidth_unit_t, ze_latency_unit_t
    from l0mem.core.device_props import P2PProperties

    bw = S.ze_device_p2p_bandwidth_exp_properties_t(
        logicalBandwidth=0,
        physicalBandwidth=0,
        bandwidthUnit=ze_bandwidth_unit_t.ZE_BANDWIDTH_UNIT_UNKNOWN,
        logicalLatency=7,
        physicalLatency=7,
        latencyUnit=ze_latency_unit_t.ZE_LATENCY_UNIT_NANOSEC,
    )
    p = P2PProperties.from_c(S.ze_device_p2p_properties_t(flags=0), bw)
    assert p.logical_bandwidth is None and p.physical_bandwidth is None
    assert p.bandwidth_unit is None
    assert (p.logical_latency, p.latency_unit) == (7, "ns")
