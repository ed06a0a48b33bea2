"""Loading dpctl, the optional dependency behind every SYCL feature."""

from __future__ import annotations

import os
import sys
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
