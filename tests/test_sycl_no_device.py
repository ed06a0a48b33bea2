"""dpctl listing no SYCL device: the line says which setting hid them and what to do."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support import sim
from tests.support.cli import one_line, run_l0mem

SELECTOR, ICD, ALT = "ONEAPI_DEVICE_SELECTOR", "OCL_ICD_FILENAMES", "ZE_ENABLE_ALT_DRIVERS"


def _without(env: dict[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in keys}


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({SELECTOR: "level_zero:*"}, ["ONEAPI_DEVICE_SELECTOR='level_zero:*' hides", "opencl:cpu"]),
        ({ICD: "/nonexistent/libintelocl.so"}, ["OCL_ICD_FILENAMES names", "libintelocl.so"]),
        ({ICD: ""}, ["OCL_ICD_FILENAMES names ''"]),
        ({ALT: "/x/libze_sim.so", ICD: "/y"}, ["'libze_sim.so' in place", "=opencl:cpu lists"]),
        ({}, ["no OpenCL CPU runtime", "intel-opencl-rt"]),
    ],
    ids=["selector", "icd-missing", "icd-empty", "alt-drivers", "nothing-set"],
)
def test_every_setting_that_hides_devices_is_named_with_what_to_do(
    environ: dict[str, str], said: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from l0mem.sycl import INSTALL_HINT, no_device_found

    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # an environment without libintelocl.so
    line = no_device_found(environ)
    assert line.startswith("no SYCL device found: ") and "\n" not in line
    for words in said:
        assert words in line, (words, line)
    assert INSTALL_HINT in line and "Level Zero driver" in line
    # A setting that is not there is not blamed.
    blamed = {SELECTOR: f"{SELECTOR}='", ICD: f"{ICD} names", ALT: f"{ALT} puts"}
    for key in set(blamed) - set(environ):
        assert blamed[key] not in line, (key, line)


def test_a_working_opencl_runtime_is_not_sent_to_be_installed(tmp_path: Path) -> None:
    from l0mem.sycl import no_device_found

    (tmp_path / "libintelocl.so").write_bytes(b"")
    line = no_device_found({ICD: str(tmp_path / "libintelocl.so")})
    assert "OCL_ICD_FILENAMES" not in line and "intel-opencl-rt" not in line


def test_on_the_simulator_the_line_says_how_to_reach_the_cpu_device_and_that_works() -> None:
    # Under the simulator dpctl lists nothing, the CPU device included.
    env = _without(sim.sim_env(devices=2), SELECTOR)
    proc = run_l0mem("bench", ["kernels", "--backend", "sycl", "--reps", "1", "-q"], env)
    assert proc.returncode == 3, proc.stderr
    line = one_line(proc, "bench kernels")
    assert "no SYCL device found: ZE_ENABLE_ALT_DRIVERS puts 'libze_sim.so'" in line, line
    assert "ONEAPI_DEVICE_SELECTOR=opencl:cpu lists the CPU device" in line, line
    if not os.path.isfile(os.path.join(sys.prefix, "lib", "libintelocl.so")):
        pytest.skip("no OpenCL CPU runtime in this environment to follow the advice with")
    args = ["kernels", "--device", "opencl:cpu", "--elements", "1024", "--reps", "1", "-q"]
    done = run_l0mem("bench", args, {**env, SELECTOR: "opencl:cpu"})
    assert done.returncode == 0, done.stderr


def test_the_audit_says_it_for_its_sycl_set_ups() -> None:
    env = {**sim.sim_env(devices=2), ICD: "/nonexistent/libintelocl.so", SELECTOR: "opencl:*"}
    proc = run_l0mem("audit", ["-q", "--setups", "sycl,sycl-single", "--size", "64M"], env)
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "every set-up was skipped: sycl: no SYCL device found: " in line, line
    assert "OCL_ICD_FILENAMES names '/nonexistent/libintelocl.so'" in line, line
    assert "Default device is unavailable" not in line
