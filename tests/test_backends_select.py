"""l0mem.backends.select on the simulator: one device index everywhere, errors, auto selection.

A device index is a position in :func:`level_zero_devices` (every device of
every driver, drivers in loader order). ``l0mem info --json`` shows it as
``index``; ``select_devices``, ``open_backend``, ``p2p --device``, ``bench
kernels --device`` and the audit's device list must all mean the same
device by it, with one driver and with two. Each case runs in a fresh
interpreter: the loader reads ``ZE_ENABLE_ALT_DRIVERS`` once per process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support import sim
from tests.support.cli import no_driver_env, run_json

NEEDS_DPCTL = pytest.mark.skipif(
    importlib.util.find_spec("dpctl") is None, reason="needs dpctl (pip install 'l0mem[sycl]')"
)


def _run(code: str, env: Mapping[str, str]) -> Any:
    """Return the JSON that ``code`` prints on its last line, run in a fresh interpreter."""
    proc = sim.run_python_env(code, env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _info_devices(env: Mapping[str, str], tmp_path: Path) -> list[dict[str, Any]]:
    """Return the devices of ``l0mem info --json``, each with its driver's index added."""
    _, report = run_json("info", [], env, tmp_path / "info.json")
    return [{**dev, "driver": drv["index"]} for drv in report["drivers"] for dev in drv["devices"]]


def _two_drivers_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """Return an environment whose loader loads the simulator twice, as two drivers, and both paths.

    The second driver is a copy of the library under another name: the
    dynamic loader then maps it again, so each driver has its own devices
    and ground truth (the same path twice would be one library).
    """
    first = sim.build()
    second = tmp_path / "libze_sim_second.so"
    shutil.copyfile(first, second)
    env = sim.sim_env(devices=2)
    env["ZE_ENABLE_ALT_DRIVERS"] = f"{first},{second}"
    return env, first, second


SELECT = """
import json
from l0mem.audit import AuditOptions, discover, plan_audit
from l0mem.backends import level_zero_devices, open_backend, select_devices

def names(devices):
    return [d.name for d in devices]

out = {"inventory": names(level_zero_devices())}
out["one_by_one"] = [names(select_devices("l0", [i])[1]) for i in range(3)]
out["comma_list"] = names(select_devices("auto", ["2,0"])[1])
out["mixed"] = names(select_devices("l0", ["1", 2])[1])
with open_backend("l0", [2, 0]) as b:
    out["backend"] = [b.device_name(i) for i in range(b.device_count())]
options = AuditOptions(setups=("l0", "l0-multi"), devices=(2, 0))
inventory = discover(options)
out["audit_inventory"] = [[d["index"], d["name"]] for d in inventory.l0_devices]
out["audit_plans"] = [
    [[d["index"], d["name"]] for d in p.devices] + [list(p.l0_devices)]
    for p in plan_audit(options, inventory)
]
print(json.dumps(out))
"""


def test_one_index_in_info_select_backend_cli_and_audit(tmp_path: Path) -> None:
    env = sim.sim_env(devices=3, peers="0>1,1>0")
    info = _info_devices(env, tmp_path)
    assert [(d["index"], d["driver"], d["driver_index"]) for d in info] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
    ]
    name = [d["name"] for d in info]
    assert len(set(name)) == 3  # the simulator names each device by its index

    out = _run(SELECT, env)
    assert out["inventory"] == name
    assert out["one_by_one"] == [[n] for n in name]
    assert out["comma_list"] == [name[2], name[0]]
    assert out["mixed"] == [name[1], name[2]]
    assert out["backend"] == [name[2], name[0]]
    assert out["audit_inventory"] == [[i, n] for i, n in enumerate(name)]
    assert out["audit_plans"] == [
        [[2, name[2]], [2]],  # l0: the first device given owns the allocations
        [[2, name[2]], [0, name[0]], [2, 0]],  # l0-multi
    ]

    _, p2p = run_json(
        "p2p",
        ["--device", "2", "--device", "0", "--sizes", "4K", "--reps", "1", "--warmup", "0"],
        env,
        tmp_path / "p2p.json",
    )
    assert [d["name"] for d in p2p["devices"]] == [name[2], name[0]]
    _, bench = run_json(
        "bench",
        ["kernels", "--device", "1", "--elements", "4096", "--reps", "1", "--warmup", "0"],
        env,
        tmp_path / "bench.json",
    )
    assert bench["device"] == name[1] and bench["backend"] == "l0"


TWO_DRIVERS = """
import json, sys
from l0mem.audit import AuditOptions, discover, plan_audit
from l0mem.backends import level_zero_devices, open_backend, select_devices
from tests.support.sim import SimControl

first, second = SimControl(sys.argv[1]), SimControl(sys.argv[2])
out = {"flat": [[d.driver.index, d.index] for d in level_zero_devices()]}
out["selected"] = [[d.driver.index, d.index] for d in select_devices("l0", [2, 3, 0])[1]]
used = {}
for index in range(4):
    with open_backend("l0", [index]) as b:
        buf = b.allocate(0, 1 << 20)
        used[index] = [first.device_used(i) for i in (0, 1)] + [second.device_used(i) for i in (0, 1)]
        buf.close()
out["used"] = used
options = AuditOptions(setups=("l0-multi",), devices=(2, 3))
inventory = discover(options)
out["audit_inventory"] = [[d["index"], d["driver"]] for d in inventory.l0_devices]
(plan,) = plan_audit(options, inventory)
out["audit_devices"] = list(plan.l0_devices)
across = AuditOptions(setups=("l0-multi",), devices=(1, 2))
(plan,) = plan_audit(across, inventory)
out["audit_across"] = plan.skip_reason
print(json.dumps(out))
"""


def test_flat_index_spans_two_drivers(tmp_path: Path) -> None:
    env, first, second = _two_drivers_env(tmp_path)
    info = _info_devices(env, tmp_path)
    assert [(d["index"], d["driver"], d["driver_index"]) for d in info] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
    ]

    code = f"import sys; sys.argv[1:] = [{str(first)!r}, {str(second)!r}]\n" + TWO_DRIVERS
    out = _run(code, env)
    assert out["flat"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert out["selected"] == [[1, 0], [1, 1], [0, 0]]
    # The allocation lands on the device of the library the index names, nowhere else.
    mib = 1 << 20
    assert out["used"] == {
        "0": [mib, 0, 0, 0],
        "1": [0, mib, 0, 0],
        "2": [0, 0, mib, 0],
        "3": [0, 0, 0, mib],
    }
    assert out["audit_inventory"] == [[0, 0], [1, 0], [2, 1], [3, 1]]
    assert out["audit_devices"] == [2, 3]
    # A context holds the devices of one driver: the audit keeps the owner's.
    assert "needs at least 2 Level Zero devices of one driver" in out["audit_across"]

    # p2p over a device of each driver: two contexts, so copies go through the host.
    _, p2p = run_json(
        "p2p",
        ["--device", "1", "--device", "2", "--sizes", "4K", "--reps", "1", "--warmup", "0"],
        env,
        tmp_path / "p2p.json",
    )
    assert [d["name"] for d in p2p["devices"]] == [info[1]["name"], info[2]["name"]]
    routes = {(p["src"], p["dst"]): (p["route"], p["route_reason"]) for p in p2p["peers"]}
    assert routes == {
        (0, 1): ("staged", "separate contexts"),
        (1, 0): ("staged", "separate contexts"),
    }


ERRORS = """
import json
from l0mem.backends import DeviceSelectionError, NoDeviceError, open_backend, select_devices

def outcome(call):
    try:
        call()
    except (DeviceSelectionError, NoDeviceError) as err:
        return [type(err).__name__, isinstance(err, ValueError), isinstance(err, LookupError), str(err)]
    return ["no error"]

cases = {
    "letters": lambda: select_devices("l0", ["x"]),
    "filter for l0": lambda: select_devices("l0", ["opencl:cpu"]),
    "negative": lambda: select_devices("l0", [-1]),
    "negative text": lambda: select_devices("l0", ["-1"]),
    "bool": lambda: select_devices("l0", [True]),
    "float": lambda: select_devices("l0", [0.5]),
    "twice in a list": lambda: select_devices("l0", ["0,0"]),
    "twice as int and text": lambda: select_devices("l0", [0, "0"]),
    "empty": lambda: select_devices("l0", [""]),
    "only commas": lambda: select_devices("auto", [","]),
    "unknown backend": lambda: select_devices("cuda"),
    "sub-devices on l0": lambda: select_devices("l0", sub_devices=2),
    "bad context": lambda: open_backend("l0", context="multi"),
    "out of range": lambda: select_devices("l0", [2]),
    "out of range, text": lambda: select_devices("auto", ["0", "7"]),
    "out of range, backend": lambda: open_backend("l0", [5]),
}
print(json.dumps({name: outcome(call) for name, call in cases.items()}))
"""

BAD_SPEC = ["DeviceSelectionError", True, False]
ABSENT = ["NoDeviceError", False, True]


def test_bad_specs_are_value_errors_absent_devices_lookup_errors() -> None:
    out = _run(ERRORS, sim.sim_env(devices=2))
    assert {name: result[:3] for name, result in out.items()} == {
        "letters": BAD_SPEC,
        "filter for l0": BAD_SPEC,
        "negative": BAD_SPEC,
        "negative text": BAD_SPEC,
        "bool": BAD_SPEC,
        "float": BAD_SPEC,
        "twice in a list": BAD_SPEC,
        "twice as int and text": BAD_SPEC,
        "empty": BAD_SPEC,
        "only commas": BAD_SPEC,
        "unknown backend": BAD_SPEC,
        "sub-devices on l0": BAD_SPEC,
        "bad context": BAD_SPEC,
        "out of range": ABSENT,
        "out of range, text": ABSENT,
        "out of range, backend": ABSENT,
    }
    assert out["out of range"][3] == "no Level Zero device 2: this machine has 2 (0..1)"
    assert "given twice" in out["twice in a list"][3]
    assert "unknown backend 'cuda'" in out["unknown backend"][3]


NO_DEVICE = """
import json
from l0mem.backends import NoDeviceError, level_zero_devices, resolve_kind, select_devices

out = {"auto": resolve_kind("auto")}
for name, call in {
    "inventory": level_zero_devices,
    "select": lambda: select_devices("l0"),
    "select index": lambda: select_devices("l0", [0]),
}.items():
    try:
        call()
        out[name] = "no error"
    except NoDeviceError as err:
        out[name] = str(err)
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    ("devices", "message"),
    [(None, "no Level Zero driver found"), (0, "no Level Zero device found")],
    ids=["no driver", "driver without devices"],
)
def test_without_level_zero_devices_auto_means_sycl(devices: int | None, message: str) -> None:
    env = no_driver_env() if devices is None else sim.sim_env(devices=devices)
    out = _run(NO_DEVICE, env)
    assert out["auto"] == "sycl"
    for name in ("inventory", "select", "select index"):
        assert out[name].startswith(message), out
        if devices is None:
            # The loader was pointed at a driver that is not there: the line names the variable.
            assert "ZE_ENABLE_ALT_DRIVERS names /nonexistent" in out[name], out
            assert "fix or unset it" in out[name], out


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, None),
        ("EXISTS", None),
        ("EXISTS,/nonexistent/a.so", "names /nonexistent/a.so,"),
        (", ", "names no library,"),
    ],
)
def test_no_driver_names_the_variable_only_where_it_names_nothing_loadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None, said: str | None
) -> None:
    from l0mem.backends import select

    real = tmp_path / "libze_real.so"
    real.write_bytes(b"")
    if value is None:
        monkeypatch.delenv("ZE_ENABLE_ALT_DRIVERS", raising=False)
    else:
        monkeypatch.setenv("ZE_ENABLE_ALT_DRIVERS", value.replace("EXISTS", str(real)))
    found = select._alt_drivers_problem()
    if said is None:
        # No such variable, or every driver it names is there: the line says what to install.
        assert found is None
        assert "libze-intel-gpu1" in select.INSTALL_HINT and "simulated driver" in select.INSTALL_HINT
    else:
        assert found is not None and said in found and found.endswith("fix or unset it")


SAME_CLASS = """
import json, sys
from l0mem.backends import open_backend, resolve_kind, select_devices
from l0mem.cli._common import open_backend as cli_open_backend

specs = sys.argv[1:]
kind, _ = select_devices("auto", specs)
with cli_open_backend("auto", specs) as from_cli:
    library = open_backend("auto", specs)
    out = {"kind": kind, "cli": type(from_cli).__name__, "library": type(library).__name__}
    out["same"] = type(from_cli) is type(library)
    library.close()
print(json.dumps(out))
"""


def test_auto_picks_level_zero_under_the_simulator_in_library_and_cli() -> None:
    out = _run(SAME_CLASS, sim.sim_env(devices=2))
    assert out == {
        "kind": "l0",
        "cli": "LevelZeroBackend",
        "library": "LevelZeroBackend",
        "same": True,
    }


@pytest.mark.sycl
@NEEDS_DPCTL
def test_auto_picks_sycl_for_a_filter_string_even_under_the_simulator() -> None:
    env = sim.sim_env(devices=2)
    # With the simulator in the loader's list, Debian's loader 1.8 under the SYCL
    # runtime lists no device (tests/simdriver/README.md): keep SYCL to OpenCL.
    env["ONEAPI_DEVICE_SELECTOR"] = "opencl:*"
    code = "import sys; sys.argv[1:] = ['opencl:cpu']\n" + SAME_CLASS
    out = _run(code, env)
    assert out == {"kind": "sycl", "cli": "SyclBackend", "library": "SyclBackend", "same": True}


@pytest.mark.parametrize("spec", ["-1", "bogus", "level_zero:gpu:x", "a:b:c:d"])
def test_a_malformed_filter_is_the_command_lines_error_before_any_device_is_looked_for(
    monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    from l0mem.backends import select

    def none_found() -> list[object]:
        raise select.NoDeviceError("no SYCL device found")

    # A machine without a SYCL device: a typo is still a typo (exit 2), not "no device" (exit 3).
    monkeypatch.setattr(select, "sycl_devices", none_found)
    with pytest.raises(select.DeviceSelectionError, match="bad SYCL device filter"):
        select.select_devices("auto", [spec])


@pytest.mark.parametrize("command", ["p2p", "allreduce", "bench kernels"])
def test_auto_with_neither_a_driver_nor_dpctl_says_both(tmp_path: Path, command: str) -> None:
    # Told only "SYCL support needs dpctl", a user without a GPU driver installed dpctl and
    # still had nothing: with --backend auto (the default) the line names both.
    from l0mem.backends.select import INSTALL_HINT
    from l0mem.sycl import INSTALL_HINT as SYCL_HINT
    from tests.support.cli import run_l0mem

    not_a_driver = tmp_path / "libze_none.so"
    not_a_driver.write_bytes(b"")
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "dpctl.py").write_text("raise ImportError('No module named dpctl')\n")
    env = {**os.environ, "ZE_ENABLE_ALT_DRIVERS": str(not_a_driver), "PYTHONPATH": str(stub)}
    name, *rest = command.split()
    proc = run_l0mem(name, rest, env)
    assert proc.returncode == 3, proc.stderr  # docs/guide/exit-codes.md: no device
    (line,) = proc.stderr.strip().splitlines()
    assert "no Level Zero driver found" in line and INSTALL_HINT in line, line
    assert f"SYCL: SYCL support needs dpctl: {SYCL_HINT}" in line, line
