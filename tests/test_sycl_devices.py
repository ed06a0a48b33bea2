"""SYCL device listing, filter strings, and life without dpctl (in subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from l0mem.sycl import INSTALL_HINT, DeviceFilter, devices, parse_filter

ROOT = Path(__file__).resolve().parent.parent

# Makes `import dpctl` fail the way it does when the package is not installed.
BLOCK_DPCTL = "import sys; sys.modules['dpctl'] = None\n"


def _clean_env(**overrides: str) -> dict[str, str]:
    # The SYCL runtime's Level Zero adapter cannot run on the simulated driver,
    # which other tests of this session may have pointed the loader at.
    env = {k: v for k, v in os.environ.items() if k != "ZE_ENABLE_ALT_DRIVERS"}
    env.update(overrides)
    return env


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_clean_env() if env is None else env,
    )


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("level_zero:gpu", DeviceFilter("level_zero", "gpu", None)),
        ("opencl:cpu:0", DeviceFilter("opencl", "cpu", 0)),
        ("OpenCL:CPU", DeviceFilter("opencl", "cpu", None)),
        ("gpu", DeviceFilter(None, "gpu", None)),
        ("level_zero", DeviceFilter("level_zero", None, None)),
        ("*:gpu:1", DeviceFilter(None, "gpu", 1)),
    ],
)
def test_parse_filter(text: str, want: DeviceFilter) -> None:
    assert parse_filter(text) == want


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vulkan:gpu", "unknown backend 'vulkan'"),
        ("opencl:tpu", "unknown device type 'tpu'"),
        ("opencl:cpu:x", "index 'x' is not a number"),
        ("a:b:c:d", "expected backend"),
    ],
)
def test_parse_filter_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_filter(text)


@pytest.mark.sycl
def test_devices_lists_the_cpu_device() -> None:
    cpus = devices("opencl:cpu")
    assert len(cpus) >= 1
    info = cpus[0]
    assert (info.backend, info.device_type) == ("opencl", "cpu")
    assert info.filter_string == "opencl:cpu:0"
    assert info.global_mem_size > 0 and info.max_work_group_size > 0
    everything = devices()
    assert info in everything
    assert devices("opencl:cpu:0") == [info]
    assert devices("opencl:cpu:99") == []
    assert all(d.device_type == "cpu" for d in devices("cpu"))


def test_without_dpctl_importing_works_and_sycl_calls_fail_in_one_line() -> None:
    code = BLOCK_DPCTL + (
        "import l0mem, l0mem.backends, l0mem.backends.kernels, l0mem.sycl\n"
        "assert len(l0mem.backends.kernels.spirv_bytes()) > 0\n"
        "try:\n"
        "    l0mem.sycl.devices()\n"
        "except l0mem.sycl.SyclUnavailableError as exc:\n"
        "    print(exc)\n"
        "try:\n"
        "    l0mem.backends.SyclBackend()\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("SYCL support needs dpctl: ")
        assert INSTALL_HINT in line


def test_kernels_module_needs_neither_dpctl_nor_numpy() -> None:
    code = BLOCK_DPCTL + "sys.modules['numpy'] = None\nimport l0mem.backends.kernels\nprint(len(l0mem.backends.kernels.KERNELS))"
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"


@pytest.mark.sycl
def test_icd_variable_is_set_from_the_environment_prefix() -> None:
    runtime = Path(sys.prefix) / "lib" / "libintelocl.so"
    assert runtime.exists(), "the sycl extra installs the OpenCL CPU runtime into the venv"
    env = _clean_env()
    env.pop("OCL_ICD_FILENAMES", None)
    code = (
        "import os, l0mem.sycl as s\n"
        "assert 'OCL_ICD_FILENAMES' not in os.environ\n"
        "count = len(s.devices('opencl:cpu'))\n"
        "print(os.environ.get('OCL_ICD_FILENAMES'), count)\n"
    )
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr
    icd, count = proc.stdout.split()
    assert Path(icd) == runtime
    assert int(count) >= 1


@pytest.mark.sycl
def test_icd_variable_set_by_the_user_is_kept() -> None:
    env = _clean_env(OCL_ICD_FILENAMES="/nonexistent/libOpenCL-custom.so")
    code = "import os, l0mem.sycl as s\ns.load_dpctl()\nprint(os.environ['OCL_ICD_FILENAMES'])"
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "/nonexistent/libOpenCL-custom.so"
