"""Loading dpctl, the optional dependency behind every SYCL feature."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

INSTALL_HINT = "pip install 'l0mem[sycl]'"


class SyclUnavailableError(RuntimeError):
    """dpctl (and with it the SYCL runtime) cannot be imported."""


class SyclNoDeviceError(LookupError):
    """No SYCL device is available for the request: l0mem's "no device" error on the SYCL side."""


def _point_icd_loader_at_venv_cpu_runtime() -> None:
    # The intel-opencl-rt wheel installs the OpenCL CPU runtime into the
    # environment, where the system ICD loader does not look; without this the
    # CPU device is missing when running from a venv.
    if "OCL_ICD_FILENAMES" in os.environ:
        return
    candidate = Path(sys.prefix) / "lib" / "libintelocl.so"
    if candidate.exists():
        os.environ["OCL_ICD_FILENAMES"] = str(candidate)


def load_dpctl() -> ModuleType:
    """Return the imported ``dpctl`` module (with memory and program loaded) or raise SyclUnavailableError."""
    if "dpctl" not in sys.modules:
        _point_icd_loader_at_venv_cpu_runtime()
    try:
        import dpctl
        import dpctl.memory
        import dpctl.program
    except ImportError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SyclUnavailableError(f"SYCL support needs dpctl: {INSTALL_HINT} ({reason})") from exc
    return dpctl


def _missing(listed: str) -> list[str]:
    """Return the files of a path list (``:``- or ``,``-separated) that are not there."""
    parts = [p.strip() for p in listed.replace(",", os.pathsep).split(os.pathsep)]
    return [p for p in parts if p and not os.path.isfile(p)]


def no_device_found(environ: Mapping[str, str] | None = None) -> str:
    """Return the line for dpctl listing no device: what in ``environ`` hid them, and what to do.

    One line: the variables that decide what the SYCL runtime lists
    (``ONEAPI_DEVICE_SELECTOR``, ``OCL_ICD_FILENAMES``, ``ZE_ENABLE_ALT_DRIVERS``)
    where they are set, else the runtime to install.
    """
    env = os.environ if environ is None else environ
    why: list[str] = []
    selector = env.get("ONEAPI_DEVICE_SELECTOR")
    if selector is not None:
        why.append(
            f"ONEAPI_DEVICE_SELECTOR={selector!r} hides every device it does not select: "
            "unset it, or select one this machine has (opencl:cpu)"
        )
    icd = env.get("OCL_ICD_FILENAMES")
    if icd is not None and (missing := _missing(icd) or ([] if icd.strip() else [icd])):
        why.append(
            f"OCL_ICD_FILENAMES names {', '.join(repr(m) for m in missing)}, not a file: point "
            "it at the OpenCL CPU runtime's libintelocl.so, or unset it"
        )
    alt = env.get("ZE_ENABLE_ALT_DRIVERS", "").strip()
    if alt and selector is None:
        name = os.path.basename(alt.split(",")[0].strip()) or alt
        why.append(
            f"ZE_ENABLE_ALT_DRIVERS puts {name!r} in place of the Level Zero driver, and the "
            "SYCL runtime may then list no device at all (on l0mem's simulated driver it lists "
            "none without the test suite's workarounds): ONEAPI_DEVICE_SELECTOR=opencl:cpu "
            "lists the CPU device beside it"
        )
    if icd is None and not (Path(sys.prefix) / "lib" / "libintelocl.so").exists():
        why.append(
            "no OpenCL CPU runtime in this environment: pip install 'intel-opencl-rt==2025.3.*' "
            "(the last with a CPU device) or set OCL_ICD_FILENAMES to a libintelocl.so"
        )
    why.append(f"an Intel GPU needs its Level Zero driver, and SYCL dpctl: {INSTALL_HINT}")
    return "no SYCL device found: " + "; ".join(why)
