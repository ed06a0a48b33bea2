"""Small helpers shared by the contract tests."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

from l0mem.backends import Backend, DeviceBuffer


def random_bytes(n: int, seed: int) -> bytes:
    """Return ``n`` seeded pseudo-random bytes."""
    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8).tobytes()


def host(a: npt.NDArray[Any]) -> Buffer:
    """Return a NumPy array as a host buffer (NumPy declares the protocol only from 3.12)."""
    return cast(Buffer, a)


def read(backend: Backend, buf: DeviceBuffer, n: int | None = None) -> bytes:
    """Return the first ``n`` bytes (default: all) of ``buf``."""
    out = bytearray(buf.nbytes if n is None else n)
    backend.download(buf, out).wait()
    return bytes(out)


def filled(backend: Backend, device: int, nbytes: int, byte: int) -> DeviceBuffer:
    """Return a new buffer on ``device`` with every byte set to ``byte``."""
    buf = backend.allocate(device, nbytes)
    backend.upload(buf, bytes([byte]) * nbytes).wait()
    return buf


def pairs(backend: Backend) -> list[tuple[int, int]]:
    """Return every ordered pair of devices, the same device twice included."""
    n = backend.device_count()
    return [(s, d) for s in range(n) for d in range(n)]
