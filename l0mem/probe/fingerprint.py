"""The host part of an environment fingerprint: kernel, memory, CPU, distribution, packages.

Everything here is plain JSON-serializable data read from the host; the device
and loader parts of a fingerprint come from the Level Zero layer. Sources:

- ``kernel_release`` / ``kernel_version`` / ``machine``: ``os.uname()``.
- ``mem_total_bytes``: ``MemTotal`` of ``/proc/meminfo``.
- ``cpu_model``: the first ``model name`` of ``/proc/cpuinfo``.
- ``distribution``: ``ID``, ``VERSION_ID`` and ``PRETTY_NAME`` of ``/etc/os-release``.
- ``packages``: installed versions of a fixed list of GPU user-space packages,
  from ``dpkg-query`` and ``rpm`` when those tools exist (a missing tool gives
  an empty result, never an error).
- ``gpu_modules``: version (or srcversion) of the loaded ``xe`` and ``i915``
  kernel modules, from ``/sys/module/<name>``.

:func:`driver_environment` is the environment part: the variables that change
what drivers, the loader and the runtimes do (``ZE_*``, ``ZES_*``, ``UR_*``,
``SYCL_*``, ``ONEAPI_DEVICE_SELECTOR``, NEO's debug keys while
``NEOReadDebugKeys`` is on, ...; the list is :mod:`l0mem.driverenv`'s). No
other variable, and so no value of an unrelated one, is recorded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from l0mem.driverenv import recorded_environment
from l0mem.probe.parse import parse_meminfo
from l0mem.text import os_text

# Debian/Ubuntu and RPM names of the Intel GPU compute stack and the Level Zero loader.
GPU_PACKAGES = (
    "intel-level-zero-gpu",
    "intel-level-zero-gpu-legacy1",
    "libze-intel-gpu1",
    "libze-intel-gpu-raytracing",
    "intel-opencl-icd",
    "intel-opencl",
    "intel-ocloc",
    "intel-igc-core",
    "intel-igc-core-2",
    "intel-igc-opencl",
    "intel-igc-opencl-2",
    "libigc1",
    "libigc2",
    "libigdfcl1",
    "libigdfcl2",
    "libigdgmm12",
    "intel-gmmlib",
    "intel-compute-runtime",
    "libze1",
    "libze-dev",
    "level-zero",
    "level-zero-devel",
    "oneapi-level-zero",
)

GPU_MODULES = ("xe", "i915")

_BDF = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_MODULE = re.compile(r"^[A-Za-z0-9_-]+$")
_TOOL_TIMEOUT_S = 20


def _read(path: str) -> str | None:
    """Return the text of ``path``, or None if it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def normalize_bdf(bdf: str) -> str:
    """Return ``bdf`` as ``dddd:bb:dd.f`` in lower case; raise ValueError if it is not one."""
    m = _BDF.match(bdf.strip())
    if m is None:
        raise ValueError(f"not a PCI address (expected dddd:bb:dd.f): {bdf!r}")
    domain, bus, dev, fn = m.groups()
    return f"{domain or '0000'}:{bus}:{dev}.{fn}".lower()


def pci_kernel_driver(bdf: str, sys_root: str = "/sys") -> str | None:
    """Return the kernel driver bound to PCI device ``bdf`` (e.g. ``xe``), or None if unbound."""
    link = os.path.join(sys_root, "bus", "pci", "devices", normalize_bdf(bdf), "driver")
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def gpu_modules(sys_root: str = "/sys") -> dict[str, str | None]:
    """Return the loaded GPU kernel modules (xe, i915) with their versions (None: unknown)."""
    return {
        name: kernel_module_version(name, sys_root)
        for name in GPU_MODULES
        if os.path.isdir(os.path.join(sys_root, "module", name))
    }


def kernel_module_version(name: str, sys_root: str = "/sys") -> str | None:
    """Return the version (else srcversion) of loaded module ``name``, or None if unknown."""
    if not _MODULE.match(name):
        raise ValueError(f"not a kernel module name: {name!r}")
    for leaf in ("version", "srcversion"):
        text = _read(os.path.join(sys_root, "module", name, leaf))
        if text and text.strip():
            return text.strip()
    return None


def parse_os_release(text: str) -> dict[str, str]:
    """Return the ``KEY=value`` pairs of an os-release text, quotes removed."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or not key or key.startswith("#"):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value
    return out


def parse_cpu_model(text: str) -> str | None:
    """Return the first ``model name`` of a /proc/cpuinfo text, or None if it has none."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return value.strip() or None
    return None


def parse_dpkg_query(text: str) -> dict[str, str]:
    """Return package -> version of the installed packages in ``dpkg-query -W`` output.

    The output format is ``${Package}\\t${Version}\\t${Status}`` per line.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[2].endswith(" installed") and fields[1]:
            out[fields[0]] = fields[1]
    return out


def parse_rpm_query(text: str) -> dict[str, str]:
    """Return package -> version-release from ``rpm -q`` output (``%{NAME}\\t%{VERSION}-%{RELEASE}``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        # rpm prints "package X is not installed" (no tab) for the missing ones
        if len(fields) == 2 and fields[0] and fields[1]:
            out[fields[0]] = fields[1]
    return out


def _run(argv: list[str]) -> str:
    """Return the stdout of ``argv``, or "" if it cannot run; a nonzero exit is not an error."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    # dpkg-query and rpm exit nonzero when some names are not installed
    return done.stdout


def installed_packages(names: tuple[str, ...] = GPU_PACKAGES) -> dict[str, dict[str, str]]:
    """Return package manager -> {package: version} for the installed ones among ``names``."""
    out: dict[str, dict[str, str]] = {}
    if shutil.which("dpkg-query"):
        fmt = "${Package}\\t${Version}\\t${Status}\\n"
        out["dpkg"] = parse_dpkg_query(_run(["dpkg-query", "-W", "-f", fmt, *names]))
    if shutil.which("rpm"):
        fmt = "%{NAME}\\t%{VERSION}-%{RELEASE}\\n"
        out["rpm"] = parse_rpm_query(_run(["rpm", "-q", "--qf", fmt, *names]))
    return out


def host_fingerprint(
    *, proc_root: str = "/proc", sys_root: str = "/sys", os_release: str = "/etc/os-release"
) -> dict[str, Any]:
    """Return the host part of the environment fingerprint as JSON-serializable data."""
    uname = os.uname()
    meminfo = parse_meminfo(_read(os.path.join(proc_root, "meminfo")) or "")
    cpuinfo = _read(os.path.join(proc_root, "cpuinfo"))
    release = parse_os_release(_read(os_release) or "")
    distribution = {k: release[k] for k in ("ID", "VERSION_ID", "PRETTY_NAME") if k in release}
    modules = gpu_modules(sys_root)
    return {
        "kernel_release": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "mem_total_bytes": meminfo.get("meminfo.MemTotal"),
        "cpu_model": parse_cpu_model(cpuinfo) if cpuinfo else None,
        "distribution": distribution,
        "packages": installed_packages(),
        "gpu_modules": modules,
        "machine_id": machine_id(),
    }


def machine_id(path: str = "/etc/machine-id") -> str | None:
    """Return a hash of the machine's id (tells machines apart in ``l0mem matrix``), or None."""
    text = (_read(path) or "").strip()
    if not text:
        return None
    # A hash, never the id itself: reports are shared in issues.
    return hashlib.sha256(b"l0mem:" + text.encode()).hexdigest()[:16]


def driver_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the variables of ``env`` (default: this process's) that change driver behaviour.

    As a report records them: a byte that is not UTF-8 as ``\\xNN`` (:func:`l0mem.text.os_text`).
    """
    recorded = recorded_environment(os.environ if env is None else env)
    return {os_text(k): os_text(v) for k, v in recorded.items()}
