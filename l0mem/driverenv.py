"""The environment variables that change what GPU drivers and runtimes do.

Two questions are answered here, from an environment mapping alone:

- :func:`recorded_environment`: which variables a report records, so that a
  result can be told apart from one made under other driver settings. Only
  variables that change driver, loader or runtime behaviour are taken, by
  prefix (:data:`RECORDED_PREFIXES`) or name (:data:`RECORDED_NAMES`), plus
  the debug keys of Intel's compute-runtime ("NEO") while it reads them
  (``NEOReadDebugKeys`` a non-zero integer), and always the few keys its
  release builds read regardless (:data:`NEO_RELEASE_KEYS`). NEO's keys have no prefix; they
  are CamelCase names (``EnableDeferBacking``, ``SetCommandStreamReceiver``),
  while ordinary variables are upper case with underscores, so a CamelCase
  name is taken for a NEO key (:func:`is_neo_key`). Nothing else of the
  environment is recorded: no values of unrelated variables.
- :func:`no_hardware_reason`: whether those settings put NEO into a mode
  where no GPU executes anything (``SetCommandStreamReceiver`` selecting an
  AUB file, a TBX server or the null AUB stream): the driver then answers
  the API without hardware, and no time, bandwidth or memory effect of GPU
  work is real.

What it may import: nothing of l0mem (a leaf every layer may use).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Level Zero (loader, layers, drivers, Sysman, tools), the unified runtime and
# SYCL, NEO's and IGC's own prefixed variables, l0mem's simulator, the OpenCL ICD loader.
RECORDED_PREFIXES = (
    "ZE_",
    "ZES_",
    "ZET_",
    "ZEL_",
    "ZEX_",
    "UR_",
    "SYCL_",
    "NEO_",
    "IGC_",
    "ZESIM_",
    "OCL_ICD_",
)
RECORDED_NAMES = frozenset({"ONEAPI_DEVICE_SELECTOR", "L0MEM_ZE_LOADER", "NEOReadDebugKeys"})
# NEO keys that its release builds read even with NEOReadDebugKeys off: recorded
# always (MakeAllBuffersResident changes residency, the mirror's own subject).
NEO_RELEASE_KEYS = frozenset(
    {"MakeAllBuffersResident", "EnableCrossDeviceAccess", "OverrideDefaultFP64Settings"}
)

# The value of recorded variables is cut here: a report is no place for a long path list.
MAX_VALUE_CHARS = 512

_NEO_KEY = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")

# NEO's CommandStreamReceiverType: 0 is the hardware, 3 the hardware with an AUB capture.
_NO_HARDWARE_CSR = {1: "AUB", 2: "TBX", 4: "TBX with AUB", 5: "null AUB"}
_HARDWARE_CSR = {-1, 0, 3}


def _integer(value: str | None) -> int | None:
    """Return ``value`` as an int (decimal or 0x hex), or None when it is not one."""
    if value is None:
        return None
    text = value.strip()
    try:
        return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
    except ValueError:
        return None


def neo_reads_debug_keys(env: Mapping[str, str]) -> bool:
    """Return True when NEO reads its debug keys from ``env`` (NEOReadDebugKeys non-zero)."""
    return bool(_integer(env.get("NEOReadDebugKeys")))


def is_neo_key(name: str) -> bool:
    """Return True when ``name`` has the shape of a NEO debug key (CamelCase, no underscore)."""
    return bool(_NEO_KEY.match(name))


def recorded_environment(env: Mapping[str, str]) -> dict[str, str]:
    """Return the variables of ``env`` that change driver or runtime behaviour, sorted by name."""
    neo = neo_reads_debug_keys(env)
    out = {}
    for name in sorted(env):
        if (
            name.startswith(RECORDED_PREFIXES)
            or name in RECORDED_NAMES
            or name in NEO_RELEASE_KEYS
            or (neo and is_neo_key(name))
        ):
            out[name] = env[name][:MAX_VALUE_CHARS]
    return out


def no_hardware_reason(env: Mapping[str, str]) -> str | None:
    """Return why NEO runs without hardware under ``env`` (one line), or None when it does not.

    ``SetCommandStreamReceiver`` other than -1 (default), 0 (hardware) or 3
    (hardware with an AUB capture) sends every command to an AUB file, a TBX
    server or nowhere, when NEO reads its debug keys at all.
    """
    if not neo_reads_debug_keys(env):
        return None
    raw = env.get("SetCommandStreamReceiver")
    csr = _integer(raw)
    # A value that is no integer reads as 0 in NEO (atoi): the hardware.
    if raw is None or csr is None or csr in _HARDWARE_CSR:
        return None
    mode = _NO_HARDWARE_CSR.get(csr, "an unknown")
    product = env.get("ProductFamilyOverride")
    also = f", ProductFamilyOverride={product}" if product else ""
    return (
        f"NEO runs without hardware: SetCommandStreamReceiver={raw.strip()}{also} "
        f"({mode} command-stream mode): the driver answers the API but no GPU executes "
        "any command, so no time, bandwidth or memory effect of GPU work is real"
    )


__all__ = [
    "MAX_VALUE_CHARS",
    "NEO_RELEASE_KEYS",
    "RECORDED_NAMES",
    "RECORDED_PREFIXES",
    "is_neo_key",
    "neo_reads_debug_keys",
    "no_hardware_reason",
    "recorded_environment",
]
