"""Intel's Level Zero GPU driver (NEO) without a GPU: its environment and child processes.

NEO comes up on a machine without a GPU in its AUB command-stream mode
(:data:`AUB_KEYS`; each of the last four is required). The API then answers
for real but no command executes. Every call that may end the process (NEO
exits or aborts on some inputs) runs in a child process: :func:`probe` runs
one function of :mod:`tests.conformance.probe` and returns the facts it
printed, :func:`run` runs any code.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_child as run

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = "libze_intel_gpu.so.1"

AUB_KEYS = {
    "NEOReadDebugKeys": "1",
    "SetCommandStreamReceiver": "1",
    "UseAubStream": "0",
    "UseBindlessMode": "0",
}
# HardwareInfoOverride (slices x sub-slices x EUs) per product: NEO aborts on a
# configuration the product never had (tgllp with 1x4x8).
PRODUCTS = {"bmg": "1x4x8", "dg2": "1x4x8", "pvc": "1x4x8", "lnl": "1x4x8", "tgllp": "1x6x16"}
# The copy engine's work done by the CPU instead: the only way bytes move in this mode.
CPU_COPIES = {"ExperimentalForceCopyThroughLock": "1"}
VALIDATION = {"ZE_ENABLE_VALIDATION_LAYER": "1", "ZE_ENABLE_PARAMETER_VALIDATION": "1"}
RESULT = "RESULT "

# Inherited variables that would point the loader elsewhere or change the driver.
_DROP_PREFIXES = ("ZE_", "ZES_", "ZEL_", "ZESIM_", "NEO", "SYCL_", "UR_")
_CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")


def driver_present() -> bool:
    """Return True when the dynamic linker finds NEO's Level Zero driver library."""
    try:
        ctypes.CDLL(DRIVER)
    except OSError:
        return ctypes.util.find_library("ze_intel_gpu") is not None
    return True


def env(product: str = "bmg", **keys: str) -> dict[str, str]:
    """Return a clean environment bringing NEO up without hardware as ``product``, plus ``keys``.

    ``**VALIDATION`` among ``keys`` turns the loader's validation layer on.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_PREFIXES)}
    # NEO's debug keys are CamelCase names without a prefix.
    base = {k: v for k, v in base.items() if not _CAMEL.match(k)}
    out = {
        **base,
        **AUB_KEYS,
        "ProductFamilyOverride": product,
        "HardwareInfoOverride": PRODUCTS[product],
        "ZES_ENABLE_SYSMAN": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    out.update(keys)
    out["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return out


def run_code(code: str, environ: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Return the finished child running ``code``."""
    return run([sys.executable, "-c", code], environ)


def probe(name: str, environ: Mapping[str, str], *args: str) -> dict[str, Any]:
    """Return the facts that probe ``name`` printed; fail the test when the child did not finish."""
    proc = run([sys.executable, "-m", "tests.conformance.probe", name, *args], environ)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        pytest.fail(
            f"probe {name} {' '.join(args)} ended with status {proc.returncode}:\n"
            f"{proc.stderr[-3000:]}"
        )
    facts: dict[str, Any] = json.loads(lines[-1][len(RESULT) :])
    return facts


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    """Fail unless the child ended by itself without a Python traceback."""
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
