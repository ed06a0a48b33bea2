"""Find the tracer: the one built into the wheel, else built from ``tracer.c`` once per user.

A wheel carries the tracer built when the wheel was built (``setup.py``),
with the digest of the source and flags it was built from: it is used
wherever that digest is this ``tracer.c``'s, so a GPU container needs no C
compiler. A source checkout, or a wheel built without a compiler, builds it
with the system C compiler on first use into the per-user cache.
``L0MEM_TRACE_LIBRARY`` names a tracer built elsewhere: it is used as it
is, never rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from l0mem.trace.errors import TraceBuildError

SOURCE = Path(__file__).with_name("tracer.c")
LIBRARY_NAME = "libl0mem_trace.so"
COMPILERS = ("cc", "gcc", "clang")
CFLAGS = ("-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-fvisibility=hidden")
LIBS = ("-ldl", "-lpthread")
PREBUILT_VAR = "L0MEM_TRACE_LIBRARY"
# The tracer a wheel carries, and the digest of the source and flags it was built from.
PACKAGED = Path(__file__).with_name(LIBRARY_NAME)
PACKAGED_DIGEST = Path(__file__).with_name(LIBRARY_NAME + ".digest")
NO_COMPILER = (
    "l0mem's allocation tracing needs a C compiler (cc, gcc or clang) to build its tracer; "
    "install one, e.g. apt install gcc"
)


def cache_dir() -> Path:
    """Return the per-user directory holding built tracers ($XDG_CACHE_HOME/l0mem/trace)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "l0mem" / "trace"


def compiler() -> str:
    """Return the path of the first C compiler found on PATH; raise TraceBuildError if none."""
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    raise TraceBuildError(NO_COMPILER)


def digest(source: bytes | None = None) -> str:
    """Return the digest of the tracer's source (``tracer.c`` unless given) and build flags."""
    h = hashlib.sha256(SOURCE.read_bytes() if source is None else source)
    h.update(" ".join(CFLAGS + LIBS).encode())
    return h.hexdigest()[:16]


def packaged() -> Path | None:
    """Return the tracer the wheel carries, or None where there is none built from this source."""
    try:
        built_from = PACKAGED_DIGEST.read_text().strip()
    except OSError:
        return None
    return PACKAGED if built_from == digest() and PACKAGED.is_file() else None


def library() -> Path:
    """Return the built tracer, compiling it on first use into the per-user cache."""
    prebuilt = os.environ.get(PREBUILT_VAR)
    if prebuilt:
        path = Path(prebuilt)
        if not path.is_file():
            raise TraceBuildError(f"{PREBUILT_VAR}={prebuilt}: no such tracer library")
        return path
    shipped = packaged()
    if shipped is not None:
        return shipped
    target = cache_dir() / digest() / LIBRARY_NAME
    if not target.is_file():
        build_into(target)
    return target


def build_into(target: Path, cc: str | None = None) -> None:
    """Build the tracer into ``target`` with ``cc`` (else the first compiler on PATH), atomically."""
    cc = cc or compiler()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Each build writes a private file; the rename makes one of concurrent builds win whole.
        fd, tmp_name = tempfile.mkstemp(prefix=".libl0mem_trace.", suffix=".so", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise TraceBuildError(
            f"cannot write the tracer into {target.parent}: {exc.strerror or exc}"
        ) from exc
    tmp = Path(tmp_name)
    try:
        cmd = [cc, *CFLAGS, "-o", str(tmp), str(SOURCE), *LIBS]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TraceBuildError(f"building the tracer with {cc} failed: {exc}") from exc
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            first = next((ln for ln in lines if "error" in ln), lines[0]).strip()
            raise TraceBuildError(f"building the tracer with {cc} failed: {first}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
