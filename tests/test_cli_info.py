"""``l0mem info`` end to end in subprocesses: simulator, no driver, no loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from l0mem.cli._common import MIN_COLUMNS
from l0mem.files import write_json
from tests.support import sim as simsupport
from tests.support.cli import run_l0mem
from tests.support.widths import assert_whole_at


def base_env():
    """Return this process's environment without any simulator settings."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ZESIM_") and k not in ("ZE_ENABLE_ALT_DRIVERS", "ZES_ENABLE_SYSMAN")
    }


def run_info(args, env):
    return subprocess.run(
        [sys.executable, "-m", "l0mem", "info", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def sim_env():
    simsupport.build()
    env = base_env()
    env.update(
        simsupport.sim_env(
            devices=3, peers="0>1,1>0", driver_version=str((1 << 24) | (6 << 16) | 31294)
        )
    )
    env["COLUMNS"] = "200"
    return env


def test_text_output_lists_devices_and_peers(sim_env):
    proc = run_info([], sim_env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "1.6.31294" in out
    assert "ZE_ENABLE_ALT_DRIVERS" in out
    assert out.count("GPU") >= 3
    assert "peer access" in out
    assert "simulator" in out  # never presented as the installed runtime


def test_json_output(sim_env, tmp_path):
    path = tmp_path / "info.json"
    proc = run_info(["--json", str(path)], sim_env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(path.read_text())
    assert report["alt_drivers"]
    assert report["loader"]["path"]
    (drv,) = report["drivers"]
    assert drv["version"] == "1.6.31294"
    assert drv["driver_version"] == (1 << 24) | (6 << 16) | 31294
    assert len(drv["devices"]) == 3
    d0 = drv["devices"][0]
    assert set(d0) == {
        "index",
        "driver_index",
        "name",
        "type",
        "vendor_id",
        "device_id",
        "pci_address",
        "uuid",
        "memory_bytes",
        "kernel_driver",
        "sub_devices",
    }
    assert d0["memory_bytes"] > 0 and d0["vendor_id"].startswith("0x")
    assert drv["peer_access"] == [
        [True, True, False],
        [True, True, False],
        [False, False, True],
    ]
    assert not list(tmp_path.glob(".info.json.*"))  # no temporary left behind


def test_json_to_unwritable_path_is_one_line(sim_env, tmp_path):
    target = tmp_path / "missing" / "x.json"
    proc = run_info(["--json", str(target)], sim_env)
    assert proc.returncode == 4
    assert proc.stderr == f"l0mem info: {target}: cannot write (no such directory)\n"
    assert proc.stdout == "", "the path is checked before any driver is asked"


def test_unwritable_json_wins_over_a_missing_driver(tmp_path):
    # Checked first: no loader or driver is needed to learn that the path is bad.
    env = base_env()
    env["ZE_ENABLE_ALT_DRIVERS"] = "/nonexistent.so"
    (tmp_path / "plain").write_text("a file, not a directory")
    target = tmp_path / "plain" / "x.json"
    proc = run_info(["--json", str(target)], env)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr == f"l0mem info: {target}: cannot write (not a directory)\n"


@pytest.mark.parametrize(
    "override",
    [{"ZE_ENABLE_ALT_DRIVERS": "/nonexistent.so"}, {"L0MEM_ZE_LOADER": "/nonexistent"}],
)
def test_no_driver_or_loader_exits_3_with_one_line(override):
    env = base_env()
    env.update(override)
    proc = run_info([], env)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l0mem info:")
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_no_driver_prints_what_to_install_and_exits_3(tmp_path):
    # The loader is there but finds no driver: the one file it is told to load is not one.
    from l0mem.backends.select import INSTALL_HINT

    not_a_driver = tmp_path / "libze_none.so"
    not_a_driver.write_bytes(b"")
    env = base_env()
    env["ZE_ENABLE_ALT_DRIVERS"] = str(not_a_driver)
    for args in ([], ["--json", str(tmp_path / "info.json")]):
        proc = run_info(args, env)
        assert proc.returncode == 3, proc.stderr  # docs/guide/exit-codes.md: no driver
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("l0mem info: no Level Zero driver found"), line
        assert line.endswith(INSTALL_HINT), line
        assert "libze-intel-gpu1" in line and "l0mem demo" in line
        assert proc.stdout == "" and not (tmp_path / "info.json").exists()


def test_an_audit_with_no_driver_and_no_dpctl_says_both_whole(tmp_path):
    # The first command a new user runs, on a machine with neither: the line was cut at
    # its 400th character, in the middle of a Python class name, before dpctl's hint.
    from l0mem.backends.select import INSTALL_HINT
    from l0mem.sycl import INSTALL_HINT as SYCL_HINT

    not_a_driver = tmp_path / "libze_none.so"
    not_a_driver.write_bytes(b"")
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "dpctl.py").write_text("raise ImportError('No module named dpctl')\n")
    env = base_env()
    env.update(ZE_ENABLE_ALT_DRIVERS=str(not_a_driver), PYTHONPATH=str(stub))
    proc = run_l0mem("audit", ["-q"], env)
    assert proc.returncode == 3, proc.stderr  # docs/guide/exit-codes.md: no device
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("l0mem audit: error: no device to audit: Level Zero: "), line
    assert INSTALL_HINT in line and SYCL_HINT in line, line
    assert not line.endswith("...") and "Error:" not in line, line
    assert proc.stdout == ""


def test_zero_simulated_devices_exits_3():
    simsupport.build()
    env = base_env()
    env.update(simsupport.sim_env(devices=0))
    proc = run_info([], env)
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1


def test_driver_failure_exits_6_with_one_line():
    env = base_env()
    env.update(simsupport.sim_env(devices=2, device_lost_at=6))
    proc = run_info([], env)
    assert proc.returncode == 6
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "DEVICE_LOST" in lines[0]
    assert "Traceback" not in proc.stderr


def test_80_columns_show_whole_identifiers(sim_env, tmp_path):
    path = tmp_path / "info.json"
    env = dict(sim_env, COLUMNS="80")
    proc = run_info(["--json", str(path)], env)
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    (drv,) = json.loads(path.read_text())["drivers"]
    for dev in drv["devices"]:
        assert dev["pci_address"] in proc.stdout
        assert dev["uuid"] in proc.stdout
        assert f"{dev['vendor_id']}:{dev['device_id']}" in proc.stdout
        assert dev["name"] in proc.stdout


def test_json_report_is_shareable_and_synced(sim_env, tmp_path, monkeypatch):
    import stat


    path = tmp_path / "info.json"
    proc = run_info(["--json", str(path)], sim_env)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_json(tmp_path / "direct.json", {"x": 1})
    assert synced  # flushed to disk before the rename
    assert json.loads((tmp_path / "direct.json").read_text()) == {"x": 1}


def test_help_names_path_and_lists_exit_codes():
    proc = run_info(["--help"], base_env())
    assert proc.returncode == 0, proc.stderr
    assert "--json PATH" in proc.stdout and "FILE" not in proc.stdout
    assert "Exit codes:" in proc.stdout
    for code in ("0", "2", "3", "4", "6"):
        assert any(line.split()[:1] == [code] for line in proc.stdout.splitlines()), code


@pytest.mark.parametrize("offered", ["0", "1"], ids=["driver-without", "driver-with"])
def test_init_path_is_shown(tmp_path, offered):
    # The loader matrix: this loader (1.8 here, 1.32 in the sid root) before the
    # simulator offered with or without zeInitDrivers. Every combination works,
    # and info says which call initialized Level Zero.
    env = base_env()
    env.update(simsupport.sim_env(devices=1, init_drivers=offered))
    env["COLUMNS"] = "200"
    path = tmp_path / "info.json"
    proc = run_info(["--json", str(path)], env)
    assert proc.returncode == 0, proc.stderr
    want = "zeInitDrivers" if offered == "1" and simsupport.loader_has_init_drivers() else "zeInit"
    assert json.loads(path.read_text())["loader"]["init_path"] == want
    row = next(line for line in proc.stdout.splitlines() if "initialized by" in line)
    assert row.split("│")[2].strip() == want


@pytest.mark.parametrize("columns", ["5", "40", "80", "120"])
def test_every_path_version_and_identifier_is_whole_at(sim_env, tmp_path, columns):
    # Below MIN_COLUMNS l0mem lays out at MIN_COLUMNS; a terminal wraps the rest.
    path = tmp_path / "info.json"
    proc = run_info(["--json", str(path)], dict(sim_env, COLUMNS=columns))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(path.read_text())
    loader = report["loader"]
    values = [str(loader["path"]), *report["alt_drivers"]]
    values += [c["version"] for c in loader["components"]]
    for drv in report["drivers"]:
        values += [drv["version"], f"{drv['driver_version']:#010x}", str(drv["api_version"])]
        for dev in drv["devices"]:
            values += [dev["name"], dev["type"], dev["uuid"], dev["pci_address"] or "-"]
            values.append(f"{dev['vendor_id']}:{dev['device_id']}")
    # Every field's name too: at 5 columns they were cut to "vend…", "PCI …".
    values += ["vendor:device", "PCI address", "UUID", "kernel driver", "sub-devices"]
    assert_whole_at(proc.stdout, max(int(columns), MIN_COLUMNS), values)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_devices_are_followed_by_the_command_to_run_next(sim_env, tmp_path, columns):
    proc = run_info([], dict(sim_env, COLUMNS=columns))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines[-1].startswith("Next: l0mem audit"), lines[-1]  # after every device
    assert "host memory" in lines[-1] and "device memory" in lines[-1]  # what it answers
    assert sum("l0mem audit" in line for line in lines) == 1
    assert_whole_at(proc.stdout, int(columns), [lines[-1]])
    # Human output only: a report on standard output is JSON alone, the line on stderr.
    piped = run_info(["--json", "-"], dict(sim_env, COLUMNS=columns))
    assert piped.returncode == 0, piped.stderr
    assert "l0mem audit" not in piped.stdout and json.loads(piped.stdout)["drivers"]
    assert piped.stderr.rstrip().splitlines()[-1] == lines[-1]
