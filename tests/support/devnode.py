"""A character device node of the test's own, standing in for /dev/null (test support only)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


def null_device(folder: Path) -> Path:
    """Return a null character device made in ``folder``; skip the test where none can be made."""
    # Our own node, so that a writer that wrongly replaces it harms nothing.
    node = folder / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with open(node, "wb") as f:
            f.write(b"probe")
    except OSError as exc:
        pytest.skip(f"no character device can be made or opened here: {exc}")
    return node
