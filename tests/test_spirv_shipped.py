"""The shipped SPIR-V module matches native_kernels/ and exposes the contract's kernels.

The compiler output is byte-deterministic, so the module is recompiled and
compared byte for byte; the recorded source+flags digest is checked as well.
"""

from __future__ import annotations

import hashlib
import importlib.util
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from l0mem.backends.kernels import KERNELS, spirv_bytes

ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / "native_kernels" / "build.py"
SPIRV_MAGIC = 0x07230203


@pytest.fixture(scope="module")
def build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("l0mem_native_build", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spirv_bytes_is_the_shipped_file(build: ModuleType) -> None:
    shipped = (build.OUT_DIR / build.SPV_NAME).read_bytes()
    assert spirv_bytes() == shipped
    assert struct.unpack_from("<I", shipped)[0] == SPIRV_MAGIC


def test_module_declares_every_contract_kernel_as_entry_point() -> None:
    words = struct.unpack(f"<{len(spirv_bytes()) // 4}I", spirv_bytes())
    entry_points = []
    i = 5  # after the header
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        assert count > 0, "malformed instruction stream"
        if opcode == 15:  # OpEntryPoint: model, id, literal name, interface...
            raw = struct.pack(f"<{count - 3}I", *words[i + 3 : i + count])
            entry_points.append(raw.split(b"\0", 1)[0].decode())
        i += count
    assert sorted(entry_points) == sorted(KERNELS)


def test_recorded_digests_match(build: ModuleType) -> None:
    recorded = build.parse_digest((build.OUT_DIR / build.DIGEST_NAME).read_text())
    shipped = (build.OUT_DIR / build.SPV_NAME).read_bytes()
    assert recorded[build.SPV_NAME] == hashlib.sha256(shipped).hexdigest()
    assert recorded[build.SOURCE_TAG] == build.source_digest(), (
        "kernel source or flags changed: run python native_kernels/build.py"
    )


def test_recompiling_reproduces_the_shipped_module(build: ModuleType) -> None:
    assert build.compilers_present(), "clang-15 and llvm-spirv-15 are part of the dev setup"
    assert build.compile_spirv() == (build.OUT_DIR / build.SPV_NAME).read_bytes()


def test_check_notices_an_edited_source(build: ModuleType, tmp_path: Path) -> None:
    edited = tmp_path / "l0mem_kernels.cl"
    edited.write_text(build.SOURCE.read_text().replace("0x0040u", "0x0000u"))
    assert build.source_digest(edited) != build.source_digest()
    assert build.compile_spirv(edited) != build.compile_spirv()


def test_build_script_check_mode_passes() -> None:
    proc = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_build_script_writes_module_and_digest(build: ModuleType, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / build.SPV_NAME).read_bytes() == spirv_bytes()
    digests = build.parse_digest((tmp_path / build.DIGEST_NAME).read_text())
    assert digests[build.SOURCE_TAG] == build.source_digest()
    assert (tmp_path / build.SPV_NAME).stat().st_mode & 0o044 == 0o044
