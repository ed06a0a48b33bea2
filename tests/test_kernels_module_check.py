"""A SPIR-V module that builds but lacks l0mem's kernels is refused, naming them (issue 9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import l0mem.core as core
from l0mem.backends import SyclBackend
from l0mem.backends.kernels import (
    KERNELS,
    SPIRV_RESOURCE,
    MissingKernelsError,
    check_module_kernels,
    spirv_bytes,
)
from l0mem.backends.levelzero import LevelZeroBackend
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean

F32_ADD = b"l0mem_f32_add"


def _renamed(old: bytes, new: bytes) -> Callable[[], bytes]:
    """Return a spirv_bytes stand-in whose module has the kernel names ``old`` renamed ``new``."""
    assert len(old) == len(new)  # the same length keeps the SPIR-V words valid
    data = spirv_bytes()
    assert old in data
    return lambda: data.replace(old, new)


def test_check_module_kernels_names_every_missing_one() -> None:
    check_module_kernels("m.spv", KERNELS.__contains__)
    with pytest.raises(MissingKernelsError) as info:
        check_module_kernels("m.spv", lambda name: name == "l0mem_f32_add")
    assert info.value.module == "m.spv"
    assert info.value.missing == ("l0mem_f32_to_bf16", "l0mem_bf16_add_to_f32")
    assert "m.spv" in str(info.value) and "l0mem_bf16_add_to_f32" in str(info.value)


@pytest.mark.parametrize(
    ("old", "new", "missing"),
    [
        (b"l0mem_", b"other_", tuple(KERNELS)),  # builds, but none of the kernels
        (F32_ADD, b"l0mem_f32_mul", ("l0mem_f32_add",)),
    ],
)
def test_level_zero_refuses_a_module_without_the_kernels(
    clean: Any,
    monkeypatch: pytest.MonkeyPatch,
    old: bytes,
    new: bytes,
    missing: tuple[str, ...],
) -> None:
    monkeypatch.setattr("l0mem.backends.l0_kernels.spirv_bytes", _renamed(old, new))
    with LevelZeroBackend(core.drivers()[0].devices()[:1]) as b:
        # Even a kernel the module does have is refused: the module as a whole is wrong.
        with pytest.raises(MissingKernelsError) as info:
            b.kernel("l0mem_f32_to_bf16", 0)
        assert info.value.missing == missing and info.value.module == SPIRV_RESOURCE
        assert all(name in str(info.value) for name in missing)


def test_level_zero_accepts_the_shipped_module(clean: Any) -> None:
    with LevelZeroBackend(core.drivers()[0].devices()[:1]) as b:
        assert b.kernel("l0mem_f32_add", 0).name == "l0mem_f32_add"


def test_sycl_refuses_a_module_without_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "l0mem.backends.sycl_kernels.spirv_bytes", _renamed(F32_ADD, b"l0mem_f32_mul")
    )
    with SyclBackend(["opencl:cpu"]) as b:
        with pytest.raises(MissingKernelsError) as info:
            b.work_group_limit(0)
        assert info.value.missing == ("l0mem_f32_add",)
