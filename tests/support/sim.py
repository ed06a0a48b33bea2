"""Build and drive the simulated Level Zero driver in ``tests/simdriver`` (test support only)."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO_ROOT / "tests" / "simdriver"
BUILD_DIR = REPO_ROOT / "build" / "simdriver"
LIBRARY_NAME = "libze_sim.so"
HEADER_DIRS = (Path("/usr/include/level_zero"), Path("/usr/local/include/level_zero"))
CFLAGS = (
    "-shared",
    "-fPIC",
    "-O2",
    "-Wall",
    "-Werror",
    "-fvisibility=hidden",
    "-Wl,-Bsymbolic",
)

# Keys the simulator reads as ZESIM_<KEY>; see tests/simdriver/README.md.
CONFIG_KEYS = frozenset(
    {
        "devices",
        "device_memory",
        "peers",
        "mirror",
        "mirror_ratio",
        "mirror_release",
        "sysman",
        "dmabuf",
        "driver_version",
        "fail_oom_after",
        "fail_alloc_at",
        "device_lost_at",
        "device_lost_on",
        "defer_backing_mirror",
        "subdevices",
        "timestamp_not_ready",
        "fill_noop",
        "init_drivers",
        "free_delay_ms",
        "shared_state",
        "corrupt_offsets",
        "corrupt_rate",
        "corrupt_seed",
        "hang_copy_at",
        "hang_in",
        "abort_in",
        "link_gbps",
        "mirror_kind",
        "config",
    }
)

# Simulator keys that an outer run may set for a whole test session (the loader
# matrix offers zeInitDrivers or not): sim_env keeps an inherited value of these.
SESSION_KEYS = frozenset({"init_drivers"})

# A prebuilt simulator to use instead of building one: where the Level Zero headers
# are not the 1.4 ones it must be compiled against (a root with a newer loader).
LIBRARY_ENV = "L0MEM_SIM_LIBRARY"

# Variables a real driver reads at zeInit that the simulator honours too (see
# tests/simdriver/README.md). sim_env drops inherited ones so that only what a
# test passes in `extra_env` reaches the simulator.
DRIVER_ENV_KEYS = frozenset(
    {
        "ZE_AFFINITY_MASK",
        "NEOReadDebugKeys",
        "ForceZeDeviceCanAccessPerReturnValue",
        "EnableDeferBacking",
    }
)


class SimBuildError(RuntimeError):
    """The simulated driver could not be built (missing gcc, headers, or a compile error)."""


def _header_dir() -> Path:
    for d in HEADER_DIRS:
        if (d / "ze_api.h").is_file() and (d / "ze_ddi.h").is_file():
            return d
    raise SimBuildError(
        "Level Zero headers not found in /usr/include/level_zero: install libze-dev"
    )


def _sources() -> list[Path]:
    files = sorted(p for p in SOURCE_DIR.iterdir() if p.suffix in (".c", ".h"))
    if not any(p.suffix == ".c" for p in files):
        raise SimBuildError(f"no C sources in {SOURCE_DIR}")
    return files


def _digest(sources: list[Path], header_dir: Path) -> str:
    h = hashlib.sha256()
    h.update(" ".join(CFLAGS).encode())
    h.update(str(header_dir).encode())
    h.update((header_dir / "ze_api.h").read_bytes())
    for p in sources:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def build() -> Path:
    """Return the path of libze_sim.so, compiling it first unless this source hash is built.

    ``$L0MEM_SIM_LIBRARY`` names a prebuilt library to use instead.
    """
    prebuilt = os.environ.get(LIBRARY_ENV)
    if prebuilt:
        if not Path(prebuilt).is_file():
            raise SimBuildError(f"{LIBRARY_ENV}={prebuilt}: no such file")
        return Path(prebuilt)
    _gcc()
    header_dir = _header_dir()
    target = BUILD_DIR / _digest(_sources(), header_dir) / LIBRARY_NAME
    if not target.is_file():
        build_into(target)
    return target


def _gcc() -> str:
    """Return gcc's path; raise SimBuildError where there is none."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise SimBuildError("gcc not found on PATH: install gcc and libc6-dev")
    return gcc


def build_into(target: Path) -> None:
    """Compile the simulated driver into ``target``, atomically (setup.py builds the wheel's this way)."""
    gcc = _gcc()
    header_dir = _header_dir()
    sources = _sources()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent builds each write a private file; the rename makes one of them win whole.
    fd, tmp_name = tempfile.mkstemp(prefix=".libze_sim.", suffix=".so", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [
        gcc,
        *CFLAGS,
        f"-I{header_dir}",
        "-o",
        str(tmp),
        *(str(p) for p in sources if p.suffix == ".c"),
        "-lpthread",
        "-lm",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            first = next((ln for ln in lines if "error" in ln), lines[0])
            raise SimBuildError(f"building the simulated driver failed: {first.strip()}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def sim_env(driver_env: Mapping[str, str] | None = None, /, **config: object) -> dict[str, str]:
    """Return os.environ (minus inherited ZESIM_* and DRIVER_ENV_KEYS) set up for the simulator with `config`, plus `driver_env`.

    An inherited key of SESSION_KEYS (``ZESIM_INIT_DRIVERS``) is kept unless
    ``config`` sets it.

    `driver_env` holds variables a real driver reads, such as ZE_AFFINITY_MASK
    or NEOReadDebugKeys; it is positional-only so that ``sim_env(**config)``
    with a dict of simulator keys never binds it.
    """
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"unknown simulator key(s) {', '.join(unknown)}; known: {sorted(CONFIG_KEYS)}"
        )
    extra = dict(driver_env or {})
    bad = sorted(k for k, v in extra.items() if k.startswith("ZESIM_") or not isinstance(v, str))
    if bad:
        raise ValueError(
            f"driver_env: {', '.join(bad)}: give simulator keys as keywords and values as strings"
        )
    session = {f"ZESIM_{k.upper()}" for k in SESSION_KEYS}
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in session or not k.startswith("ZESIM_")) and k not in DRIVER_ENV_KEYS
    }
    env["ZE_ENABLE_ALT_DRIVERS"] = str(build())
    env[LIBRARY_ENV] = str(build())  # what l0mem demo runs on, in a checkout
    env["ZES_ENABLE_SYSMAN"] = "1"
    for key, value in config.items():
        env[f"ZESIM_{key.upper()}"] = _env_value(value)
    env.update(extra)
    return env


class SimControl:
    """The simulator's zesim_* control and ground-truth functions, on the library the loader loaded."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open the simulator at `path`; in a process using it, this is the loader's instance."""
        lib = ctypes.CDLL(os.fspath(path))
        lib.zesim_set.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.zesim_set.restype = ctypes.c_int
        lib.zesim_mirror_bytes.argtypes = []
        lib.zesim_mirror_bytes.restype = ctypes.c_uint64
        lib.zesim_device_used.argtypes = [ctypes.c_uint32]
        lib.zesim_device_used.restype = ctypes.c_uint64
        lib.zesim_subdevice_used.argtypes = [ctypes.c_uint32, ctypes.c_uint32]
        lib.zesim_subdevice_used.restype = ctypes.c_uint64
        lib.zesim_bytes_moved.argtypes = [ctypes.c_int32, ctypes.c_int32]
        lib.zesim_bytes_moved.restype = ctypes.c_uint64
        lib.zesim_kernel_launches.argtypes = []
        lib.zesim_kernel_launches.restype = ctypes.c_uint64
        lib.zesim_reset_counters.argtypes = []
        lib.zesim_reset_counters.restype = None
        lib.zesim_mirror_keeper_pid.argtypes = []
        lib.zesim_mirror_keeper_pid.restype = ctypes.c_int32
        for counter in ("zesim_corrupted_bytes", "zesim_peer_copies", "zesim_host_used"):
            getattr(lib, counter).argtypes = []
            getattr(lib, counter).restype = ctypes.c_uint64
        self._lib = lib

    @classmethod
    def from_env(cls) -> SimControl:
        """Return the control of the simulator named by ZE_ENABLE_ALT_DRIVERS in this process."""
        path = os.environ.get("ZE_ENABLE_ALT_DRIVERS", "").split(",")[0]
        if not path:
            raise RuntimeError("ZE_ENABLE_ALT_DRIVERS is not set: not running under the simulator")
        return cls(path)

    def set(self, key: str, value: object) -> None:
        """Change configuration key `key` at run time (after zeInit); raise ValueError if rejected."""
        if key not in CONFIG_KEYS or key == "config":
            raise ValueError(f"unknown simulator key {key!r}")
        if self._lib.zesim_set(key.encode(), _env_value(value).encode()) != 0:
            raise ValueError(f"simulator rejected {key}={value!r} (reason on stderr)")

    def mirror_bytes(self) -> int:
        """Return the host bytes currently held by simulated mirrors (including leaked ones)."""
        return int(self._lib.zesim_mirror_bytes())

    def mirror_keeper_pid(self) -> int:
        """Return the pid of the process holding this process's ``mirror_kind=anon`` mirrors, 0 if none.

        The keeper starts at the first anon mirror and exits when this process does.
        """
        return int(self._lib.zesim_mirror_keeper_pid())

    def device_used(self, device: int) -> int:
        """Return the bytes of live device allocations on `device`, its sub-devices' included."""
        return int(self._lib.zesim_device_used(device))

    def subdevice_used(self, device: int, sub: int) -> int:
        """Return the live device allocation bytes held by sub-device `sub` of `device`.

        That is the sub-device's own allocations plus its even part of each
        allocation made on the root device.
        """
        return int(self._lib.zesim_subdevice_used(device, sub))

    def host_used(self) -> int:
        """Return the bytes of live host allocations (``zeMemAllocHost``), every context's."""
        return int(self._lib.zesim_host_used())

    def bytes_moved(self, src: int, dst: int) -> int:
        """Return bytes copied from `src` to `dst` (device index, or -1 for host memory)."""
        return int(self._lib.zesim_bytes_moved(src, dst))

    def corrupted_bytes(self) -> int:
        """Return the bytes peer copies corrupted since a fault key was last set (corrupt_*)."""
        return int(self._lib.zesim_corrupted_bytes())

    def peer_copies(self) -> int:
        """Return the peer copies executed (or hung) since a fault key was last set."""
        return int(self._lib.zesim_peer_copies())

    def kernel_launches(self) -> int:
        """Return the number of kernel launches executed since the last reset."""
        return int(self._lib.zesim_kernel_launches())

    def reset_counters(self) -> None:
        """Zero the bytes-moved and kernel-launch counters."""
        self._lib.zesim_reset_counters()


def use_in_process(monkeypatch: Any, **config: object) -> None:
    """Point this process's environment at the simulator configured by ``config`` (undone by ``monkeypatch``)."""
    env = sim_env(None, **config)
    for key in list(os.environ):
        if key.startswith("ZESIM_") and key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("ZESIM_") or key in ("ZE_ENABLE_ALT_DRIVERS", "ZES_ENABLE_SYSMAN"):
            monkeypatch.setenv(key, value)


def run_python(
    code: str, timeout: float = 60, **config: object
) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter against the simulator configured by `config`."""
    return run_python_env(code, sim_env(**config), timeout)


def run_result(code: str, env: Mapping[str, str], timeout: float = 60) -> dict[str, Any]:
    """Run `code` as run_python_env does; return the JSON of its last ``RESULT `` line.

    The script prints ``RESULT <json>`` for what it found; a script that fails or
    prints none fails the caller with its output. Its stderr is in ``_stderr``.
    """
    proc = run_python_env(code, env, timeout)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no result:\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    result["_stderr"] = proc.stderr
    return result


def run_python_env(
    code: str, env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter with environment `env` (from sim_env)."""
    env = dict(env)
    # Lets `code` import tests.* helpers wherever the interpreter starts.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def loader_has_init_drivers() -> bool:
    """Return whether the installed loader exports zeInitDrivers (asked in a fresh process)."""
    code = "import l0mem._ze as z; print(z.has_function('zeInitDrivers'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip() == "True"
