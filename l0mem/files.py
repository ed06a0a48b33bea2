"""The one way l0mem writes a report file: atomically, fsynced, mode 0644.

Every command and library function that writes JSON, JUnit, CSV or a plot
goes through :func:`write_bytes` (or :func:`write_json`), so the rules of
writing a file live in one place.

What it may import: nothing of l0mem (a leaf every layer may use).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

PathLike = str | os.PathLike[str]


class ReportWriteError(OSError):
    """A report file could not be written; the message is one line naming the file."""

    @classmethod
    def of(cls, path: PathLike, exc: OSError) -> ReportWriteError:
        """Return the error for failing to write ``path`` because of ``exc``."""
        err = cls(f"{path}: cannot write ({exc.strerror or exc})")
        err.errno = exc.errno
        return err


def _folder(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def check_writable(path: PathLike) -> None:
    """Raise ReportWriteError unless :func:`write_bytes` could create ``path``.

    Run before measuring, so that a bad path does not throw a long run away.
    """
    target = Path(path)
    folder = _folder(target)
    try:
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
        if not folder.exists():
            raise FileNotFoundError(errno.ENOENT, "no such directory", str(folder))
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(folder))
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise ReportWriteError.of(target, exc) from None
    os.close(fd)
    os.unlink(tmp)


def write_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename); raise ReportWriteError."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=_folder(target))
    except OSError as exc:
        raise ReportWriteError.of(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            # mkstemp creates 0600; a report is meant to be shared like any output file.
            os.fchmod(f.fileno(), 0o644)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ReportWriteError.of(target, exc) from None
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
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def json_bytes(data: Any, *, strict: bool = False) -> bytes:
    """Return ``data`` as indented standard JSON, UTF-8, newline-ended.

    Non-finite numbers (inf, nan) are written as null, or with ``strict``
    refused (ValueError) for a format that must keep every number: the audit
    report. TypeError when ``data`` holds something that is not JSON data.
    """
    payload = data if strict else finite(data)
    return (json.dumps(payload, indent=2, allow_nan=False) + "\n").encode()


def write_json(path: PathLike, data: Any) -> None:
    """Write ``data`` as strict JSON to ``path`` atomically; raise ReportWriteError."""
    write_bytes(path, json_bytes(data))


__all__ = [
    "PathLike",
    "ReportWriteError",
    "check_writable",
    "finite",
    "json_bytes",
    "write_bytes",
    "write_json",
]
