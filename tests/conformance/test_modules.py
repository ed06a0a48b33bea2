"""l0mem's shipped SPIR-V built by IGC for several products; bad headers never reach NEO."""

from __future__ import annotations

import pytest

from l0mem.backends.kernels import KERNELS
from tests.conformance import neo


@pytest.mark.parametrize("layers", [{}, neo.VALIDATION], ids=["plain", "validation"])
@pytest.mark.parametrize("product", sorted(neo.PRODUCTS))
def test_shipped_spirv_builds_with_every_kernel(product: str, layers: dict[str, str]) -> None:
    facts = neo.probe("modules", neo.env(product, **layers))
    assert set(KERNELS) <= set(facts["names"])
    for name in KERNELS:
        kernel = facts["kernels"][name]
        assert kernel["num_args"] == len(KERNELS[name].args)
        x, y, z = kernel["suggested"]
        assert x >= 1 and y == z == 1
    # The backend builds the module and launches a kernel (which does not run).
    assert facts["backend_launch"] is True


def test_l0mem_refuses_a_bad_header_and_the_process_lives() -> None:
    facts = neo.probe("bad_header", neo.env("bmg", **neo.VALIDATION))
    refused = facts["garbage_header"]
    assert refused["error"] == "ValueError" and "not a SPIR-V module" in refused["message"]


def test_fact_a_bad_header_given_to_the_driver_ends_the_process() -> None:
    # Why l0mem checks the header first: NEO exits (status 10) instead of returning an error.
    code = """
import ctypes
import l0mem.core as core
from l0mem._ze import api
from l0mem._ze.enums import ze_module_format_t
from l0mem._ze.structs import ze_module_desc_t
drv = core.drivers()[0]
dev = drv.devices()[0]
ctx = drv.create_context([dev])
data = ctypes.create_string_buffer(b"\\0" * 64, 64)
desc = ze_module_desc_t(
    format=ze_module_format_t.ZE_MODULE_FORMAT_IL_SPIRV,
    inputSize=64,
    pInputModule=ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8)),
    pBuildFlags=b"",
)
h, log = ctypes.c_void_p(), ctypes.c_void_p()
rc = api().zeModuleCreate(ctx.handle, dev.handle, ctypes.byref(desc), ctypes.byref(h), ctypes.byref(log))
print("RETURNED", rc)
"""
    proc = neo.run_code(code, neo.env("bmg"))
    assert proc.returncode == 10 and "RETURNED" not in proc.stdout, (proc.returncode, proc.stderr)
