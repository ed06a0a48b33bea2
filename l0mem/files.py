"""The one way l0mem writes a report file: atomically, fsynced, mode 0644; never replacing a device, FIFO or symlink.

Every command and library function that writes JSON, JUnit, CSV or a plot
goes through :func:`write_bytes` (or :func:`write_json`), so the rules of
writing a file live in one place.

What it may import: ``l0mem.text`` only (a leaf every layer may use).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from l0mem.text import printable

PathLike = str | os.PathLike[str]


class ReportWriteError(OSError):
    """A report file could not be written; the message is one line naming the file."""

    @classmethod
    def of(cls, path: PathLike, exc: OSError) -> ReportWriteError:
        """Return the error for failing to write ``path`` because of ``exc``."""
        err = cls(f"{printable(str(path))}: cannot write ({exc.strerror or exc})")
        err.errno = exc.errno
        return err


STDOUT = "-"  # the output path that means standard output


def _folder(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _resolved(path: PathLike) -> Path:
    """Return the file ``path`` names after every symlink, so a link is written through, not replaced."""
    return Path(os.path.realpath(path))


def _target(path: PathLike) -> Path:
    """Return the file to write for ``path``; OSError for a symlink loop (it would be replaced)."""
    target = _resolved(path)
    if target.is_symlink():
        raise OSError(errno.ELOOP, "too many levels of symbolic links")
    return target


# mkstemp's random part and the dots and suffix around the name.
_TEMP_EXTRA = len("..") + 8 + len(".tmp")


def _temporary(folder: Path, name: str) -> tuple[int, str]:
    """Return an open temporary file beside ``name`` in ``folder``, its name within the limit.

    Named after the report so a stray one says whose it is, the name cut to
    leave room for mkstemp's part: a report named at the file system's limit
    (255 bytes) is still written.
    """
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    room = max(0, limit - _TEMP_EXTRA)
    short = os.fsencode(name)[:room].decode(errors="ignore") if room else ""
    return tempfile.mkstemp(prefix=f".{short}.", suffix=".tmp", dir=folder)


def _special(target: Path) -> bool:
    """Return whether ``target`` exists and is not a regular file (a device, a FIFO, a socket)."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_writable(path: PathLike) -> None:
    """Raise ReportWriteError unless :func:`write_bytes` could write ``path``.

    Run before measuring, so that a bad path does not throw a long run away.
    """
    try:
        if str(path) == STDOUT:
            if sys.stdout is None:
                raise OSError(errno.EBADF, "standard output is closed")
            return
        if (fd := _descriptor(path)) is not None:
            os.fstat(fd)
            return
        target = _target(path)
        folder = _folder(target)
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
        if _special(target):
            if not os.access(target, os.W_OK):
                raise PermissionError(errno.EACCES, "permission denied", str(target))
            return
        if not folder.exists():
            raise FileNotFoundError(errno.ENOENT, "no such directory", str(folder))
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(folder))
        fd, tmp = _temporary(folder, target.name)
    except OSError as exc:
        raise ReportWriteError.of(path, exc) from None
    os.close(fd)
    os.unlink(tmp)


def same_path(a: PathLike, b: PathLike) -> bool:
    """Return whether ``a`` and ``b`` name the same file (after symlinks), existing or not."""
    if STDOUT in (str(a), str(b)):
        return str(a) == str(b)
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return _resolved(a) == _resolved(b)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_through(target: Path, data: bytes) -> None:
    """Write ``data`` into a device or FIFO by opening it, never replacing the node."""
    # Non-blocking so that a FIFO nobody reads fails at once (ENXIO) instead of hanging.
    fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)  # a reader is there: wait for it rather than fail on EAGAIN
        _write_all(fd, data)
    finally:
        os.close(fd)


def _fifo_hint(target: Path, exc: OSError) -> OSError:
    """Return ``exc``, reworded when it is a FIFO's missing reader (ENXIO says "no such device")."""
    with contextlib.suppress(OSError):
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(os.stat(target).st_mode):
            return OSError(errno.ENXIO, "no process is reading this FIFO")
    return exc


def discard(stream: Any) -> None:
    """Point ``stream``'s descriptor at /dev/null, after a write to it failed for good.

    Python flushes stdout once more at exit: into a broken pipe that would print
    "Exception ignored" and turn the command's exit code into 120.
    """
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


# Paths that name a descriptor this process already holds: writing them means
# writing that descriptor (as ``-`` does for 1), never replacing the file behind it,
# which a shell opened for this process (``--json /dev/stdout > out.txt``).
_DESCRIPTOR_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/thread-self/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: PathLike) -> int | None:
    """Return the descriptor ``path`` names (``/dev/stdout``, ``/dev/fd/3``), or None."""
    name = os.path.normpath(os.fspath(path))
    if name in _STD_PATHS:
        return _STD_PATHS[name]
    match = _DESCRIPTOR_PATH.match(name)
    return int(match.group(1)) if match else None


def is_stdout(path: PathLike) -> bool:
    """Return whether writing ``path`` writes standard output (``-``, ``/dev/stdout``, ``/dev/fd/1``)."""
    return str(path) == STDOUT or _descriptor(path) == 1


def _write_descriptor(fd: int, data: bytes) -> None:
    """Write ``data`` to descriptor ``fd`` after what Python buffered for it."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    if fd in (1, 2) and stream is None:  # started with it closed
        raise OSError(errno.EBADF, "the descriptor is closed")
    try:
        if stream is None:
            _write_all(fd, data)
        else:
            # Through the stream: whoever replaced sys.stdout (a test runner) gets it.
            stream.flush()
            stream.buffer.write(data)
            stream.buffer.flush()
    except OSError:
        if stream is not None:
            discard(stream)
        raise


def write_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path``; raise ReportWriteError.

    ``-`` is standard output, and a path naming a descriptor of this process
    (``/dev/stdout``, ``/dev/fd/N``) writes that descriptor. A regular file (or none yet) is replaced
    atomically (temp file, fsync, rename), keeping an existing file's mode,
    else 0644; a symlink is followed and its target written instead; a
    device or FIFO is opened and written into, never replaced.
    """
    fd = 1 if str(path) == STDOUT else _descriptor(path)
    if fd is not None:
        try:
            _write_descriptor(fd, data)
        except OSError as exc:
            raise ReportWriteError.of(path, exc) from None
        return
    try:
        target = _target(path)
    except OSError as exc:
        raise ReportWriteError.of(path, exc) from None
    if _special(target):
        try:
            _write_through(target, data)
        except OSError as exc:
            raise ReportWriteError.of(path, _fifo_hint(target, exc)) from None
        return
    try:
        old: os.stat_result | None = os.stat(target)
    except OSError:
        old = None
    try:
        fd, tmp = _temporary(_folder(target), target.name)
    except OSError as exc:
        raise ReportWriteError.of(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            # mkstemp creates 0600; a report is meant to be shared like any output
            # file, and a replaced file keeps its mode (and, for root, its owner).
            os.fchmod(f.fileno(), 0o644 if old is None else stat.S_IMODE(old.st_mode))
            if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ReportWriteError.of(path, exc) from None
        raise
    # Make the rename itself durable; not every file system lets a directory be fsynced.
    with contextlib.suppress(OSError):
        dir_fd = os.open(_folder(target), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def finite(data: Any) -> Any:
    """Return ``data`` with every non-finite float (inf, nan) replaced by None, for strict JSON."""
    return _plain(data, nulls=True, unsign=False)


def unsigned_zeros(data: Any) -> Any:
    """Return ``data`` with every ``-0.0`` as ``0.0``: the JSON half of :func:`l0mem.units.fixed`.

    A slope of ``-0.0`` is no finding, and a reader printing it would show
    the sign. Every other number (``-1e-09``, inf, nan) is kept as it is, and
    so is anything that is not JSON data (for the writer to refuse).
    """
    return _plain(data, nulls=False, unsign=True)


def _plain(data: Any, *, nulls: bool, unsign: bool) -> Any:
    """Return ``data`` with, where asked, every non-finite float as None and no signed zero."""
    if isinstance(data, float):
        if nulls and not math.isfinite(data):
            return None
        return 0.0 if unsign and data == 0.0 else data
    if isinstance(data, dict):
        return {k: _plain(v, nulls=nulls, unsign=unsign) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain(v, nulls=nulls, unsign=unsign) for v in data]
    return data


def json_bytes(data: Any, *, strict: bool = False) -> bytes:
    """Return ``data`` as indented standard JSON, UTF-8, newline-ended.

    Non-finite numbers (inf, nan) are written as null, or with ``strict``
    refused (ValueError) for a format that must keep every number: the audit
    report. TypeError when ``data`` holds something that is not JSON data.
    A zero is never signed (:func:`unsigned_zeros`).
    """
    payload = _plain(data, nulls=not strict, unsign=True)
    return (json.dumps(payload, indent=2, allow_nan=False) + "\n").encode()


def write_json(path: PathLike, data: Any) -> None:
    """Write ``data`` as strict JSON to ``path`` atomically; raise ReportWriteError."""
    write_bytes(path, json_bytes(data))


__all__ = [
    "STDOUT",
    "PathLike",
    "ReportWriteError",
    "check_writable",
    "finite",
    "json_bytes",
    "same_path",
    "unsigned_zeros",
    "write_bytes",
    "write_json",
]
