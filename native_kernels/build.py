"""Compile native_kernels/l0mem_kernels.cl to the SPIR-V module l0mem ships.

Usage (from the repository root)::

    python native_kernels/build.py            # rebuild l0mem/_spirv/
    python native_kernels/build.py --check    # exit 1 if the shipped module is stale

The output of clang-15 + llvm-spirv-15 is byte-deterministic for a given source
and flag set, so ``--check`` recompiles and compares bytes. The digest file also
records a hash of the source and the flags, which lets a machine without the
compiler at least notice an edited source.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "l0mem_kernels.cl"
OUT_DIR = HERE.parent / "l0mem" / "_spirv"
SPV_NAME = "l0mem_kernels.spv"
DIGEST_NAME = "l0mem_kernels.sha256"
SOURCE_TAG = "l0mem_kernels.cl+flags"

CLANG = os.environ.get("L0MEM_CLANG", "clang-15")
LLVM_SPIRV = os.environ.get("L0MEM_LLVM_SPIRV", "llvm-spirv-15")

# No -cl-denorms-are-zero / -cl-fast-relaxed-math: the additions must keep
# subnormal sums. A DenormPreserve execution mode would state that in the
# module, but the OpenCL CPU runtime (2025.3) refuses modules that declare it.
CLANG_FLAGS: tuple[str, ...] = (
    "-cl-std=CL1.2",
    "-target",
    "spir64",
    "-O2",
    "-emit-llvm",
    "-c",
)
# SPIR-V 1.0 is the oldest version every Level Zero and OpenCL consumer reads.
LLVM_SPIRV_FLAGS: tuple[str, ...] = ("--spirv-max-version=1.0",)


def source_digest(source: Path = SOURCE) -> str:
    """Return the sha256 hex digest of the kernel source together with the build flags."""
    h = hashlib.sha256()
    h.update(source.read_bytes())
    for flag in (*CLANG_FLAGS, "|", *LLVM_SPIRV_FLAGS):
        h.update(b"\0" + flag.encode())
    return h.hexdigest()


def compilers_present() -> bool:
    """Return whether both clang and llvm-spirv are on PATH."""
    return shutil.which(CLANG) is not None and shutil.which(LLVM_SPIRV) is not None


def compile_spirv(source: Path = SOURCE) -> bytes:
    """Return the SPIR-V module compiled from ``source``."""
    if not compilers_present():
        raise RuntimeError(f"{CLANG} and {LLVM_SPIRV} are needed to build the kernels")
    with tempfile.TemporaryDirectory(prefix="l0mem-spirv-") as tmp:
        bc = Path(tmp) / "kernels.bc"
        spv = Path(tmp) / "kernels.spv"
        subprocess.run([CLANG, *CLANG_FLAGS, "-o", str(bc), str(source)], check=True)
        subprocess.run([LLVM_SPIRV, *LLVM_SPIRV_FLAGS, str(bc), "-o", str(spv)], check=True)
        return spv.read_bytes()


def digest_text(spirv: bytes, source: Path = SOURCE) -> str:
    """Return the digest file's content: sha256sum-style lines for the module and the source."""
    return (
        f"{hashlib.sha256(spirv).hexdigest()}  {SPV_NAME}\n"
        f"{source_digest(source)}  {SOURCE_TAG}\n"
    )


def parse_digest(text: str) -> dict[str, str]:
    """Return {name: hex digest} from a digest file's content."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            digest, _, name = line.partition("  ")
            out[name.strip()] = digest.strip()
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600; package data must be readable by every user.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def build(out_dir: Path = OUT_DIR) -> Path:
    """Compile the kernels into ``out_dir``; return the path of the written module."""
    spirv = compile_spirv()
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(out_dir / SPV_NAME, spirv)
    _write_atomic(out_dir / DIGEST_NAME, digest_text(spirv).encode())
    return out_dir / SPV_NAME


def check(out_dir: Path = OUT_DIR) -> list[str]:
    """Return the reasons the shipped module does not match the sources (empty when it does)."""
    problems: list[str] = []
    shipped = (out_dir / SPV_NAME).read_bytes()
    recorded = parse_digest((out_dir / DIGEST_NAME).read_text())
    if recorded.get(SOURCE_TAG) != source_digest():
        problems.append("kernel source or flags changed since the module was built")
    if recorded.get(SPV_NAME) != hashlib.sha256(shipped).hexdigest():
        problems.append(f"{SPV_NAME} does not match its recorded digest")
    if compilers_present() and compile_spirv() != shipped:
        problems.append(f"recompiling the source does not reproduce {SPV_NAME}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    parser.add_argument("--check", action="store_true", help="only verify the shipped module")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check(args.out)
            for p in problems:
                print(f"stale: {p}", file=sys.stderr)
            return 1 if problems else 0
        print(build(args.out))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
