"""The host fingerprint, on this machine and against fake sysfs trees."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from l0mem.probe import fingerprint as fp

DATA = Path(__file__).parent / "data" / "probe"


def test_fingerprint_of_this_host_is_plausible_json():
    info = fp.host_fingerprint()
    assert json.loads(json.dumps(info)) == info
    uname = os.uname()
    assert info["kernel_release"] == uname.release
    assert info["machine"] == uname.machine
    assert info["mem_total_bytes"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/cpuinfo") as f:
        assert info["cpu_model"] and info["cpu_model"] in f.read()
    assert set(info["distribution"]) <= {"ID", "VERSION_ID", "PRETTY_NAME"}
    assert set(info["packages"]) <= {"dpkg", "rpm"}
    for manager, packages in info["packages"].items():
        assert set(packages) <= set(fp.GPU_PACKAGES), manager
        assert all(isinstance(v, str) and v for v in packages.values())
    assert set(info["gpu_modules"]) <= set(fp.GPU_MODULES)


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg on this host")
def test_installed_packages_match_dpkg_directly():
    # libze1 is the Level Zero loader this project runs against here
    status = os.popen("dpkg-query -W -f '${Version}' libze1 2>/dev/null").read()
    found = fp.installed_packages(("libze1", "surely-not-a-package-l0mem"))
    assert found["dpkg"] == ({"libze1": status} if status else {})


def test_missing_package_tools_give_an_empty_result(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert fp.installed_packages() == {}
    info = fp.host_fingerprint()
    assert info["packages"] == {}


def test_package_query_parsers():
    assert fp.parse_dpkg_query((DATA / "dpkg_query.txt").read_text()) == {
        "libze-intel-gpu1": "25.18.33578.6-1~24.04~ppa1",
        "libze1": "1.21.9.0-1~24.04~ppa1",
    }
    assert fp.parse_rpm_query((DATA / "rpm_query.txt").read_text()) == {
        "intel-compute-runtime": "25.18.33578.6-1.fc42",
        "oneapi-level-zero": "1.20.2-1.fc42",
    }


def test_os_release_and_cpuinfo_parsers():
    release = fp.parse_os_release((DATA / "os-release.txt").read_text())
    assert release["ID"] == "ubuntu"
    assert release["VERSION_ID"] == "24.04"
    assert release["PRETTY_NAME"] == "Ubuntu 24.04.2 LTS"
    assert release["UBUNTU_CODENAME"] == "noble"
    assert (
        fp.parse_cpu_model((DATA / "cpuinfo.txt").read_text())
        == "13th Gen Intel(R) Core(TM) i9-13900K"
    )
    assert fp.parse_cpu_model("processor\t: 0\n") is None


def fake_pci(sys_root: Path, bdf: str, driver: str | None) -> None:
    devices = sys_root / "bus" / "pci" / "devices"
    drivers = sys_root / "bus" / "pci" / "drivers"
    (devices / bdf).mkdir(parents=True)
    if driver:
        (drivers / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../bus/pci/drivers/{driver}", devices / bdf / "driver")


def test_pci_kernel_driver_on_a_fake_sysfs(tmp_path):
    fake_pci(tmp_path, "0000:03:00.0", "xe")
    fake_pci(tmp_path, "0000:00:02.0", "i915")
    fake_pci(tmp_path, "0000:04:00.0", None)
    assert fp.pci_kernel_driver("0000:03:00.0", str(tmp_path)) == "xe"
    assert fp.pci_kernel_driver("00:02.0", str(tmp_path)) == "i915"
    assert fp.pci_kernel_driver("0000:04:00.0", str(tmp_path)) is None
    assert fp.pci_kernel_driver("0000:05:00.0", str(tmp_path)) is None


def test_pci_kernel_driver_on_this_host():
    devices = "/sys/bus/pci/devices"
    bound = (
        [
            d
            for d in sorted(os.listdir(devices))
            if os.path.islink(os.path.join(devices, d, "driver"))
        ]
        if os.path.isdir(devices)
        else []
    )
    if not bound:
        pytest.skip("no PCI device with a bound driver is visible here")
    expected = os.path.basename(os.readlink(os.path.join(devices, bound[0], "driver")))
    assert fp.pci_kernel_driver(bound[0].upper()) == expected


@pytest.mark.parametrize(
    "bad", ["", "03:00", "0000:03:00.8", "xe", "0000:03:00.0/../..", "0000:3:00.0"]
)
def test_bad_pci_address_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="not a PCI address"):
        fp.pci_kernel_driver(bad)


def test_kernel_module_version_on_a_fake_sysfs(tmp_path):
    (tmp_path / "module" / "i915").mkdir(parents=True)
    (tmp_path / "module" / "i915" / "version").write_text("1.6.0\n")
    (tmp_path / "module" / "xe").mkdir(parents=True)
    (tmp_path / "module" / "xe" / "srcversion").write_text("A1B2C3D4E5F60718293A4B5\n")
    (tmp_path / "module" / "builtin").mkdir(parents=True)
    assert fp.kernel_module_version("i915", str(tmp_path)) == "1.6.0"
    assert fp.kernel_module_version("xe", str(tmp_path)) == "A1B2C3D4E5F60718293A4B5"
    assert fp.kernel_module_version("builtin", str(tmp_path)) is None
    assert fp.kernel_module_version("absent", str(tmp_path)) is None
    with pytest.raises(ValueError, match="not a kernel module name"):
        fp.kernel_module_version("../etc", str(tmp_path))
    info = fp.host_fingerprint(sys_root=str(tmp_path))
    assert info["gpu_modules"] == {"xe": "A1B2C3D4E5F60718293A4B5", "i915": "1.6.0"}


@pytest.mark.parametrize("raw", [b"\xff", b"0\xc3(", b"\xed\xa0\x80", b"ok\xc3\xa9\x80"], ids=repr)
def test_a_driver_setting_that_is_not_utf8_is_recorded_as_its_bytes(raw: bytes) -> None:
    # The audit's fingerprint, as run/watch record it: text that encodes, the byte as \xNN.
    name = os.fsdecode(b"ZE_X" + raw)
    env = {name: os.fsdecode(raw), "ZE_AFFINITY_MASK": "0"}
    shown = raw.decode("utf-8", "backslashreplace")
    recorded = fp.driver_environment(env)
    assert recorded == {"ZE_AFFINITY_MASK": "0", "ZE_X" + shown: shown}
    json.dumps(recorded, ensure_ascii=False).encode("utf-8")
