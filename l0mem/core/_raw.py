"""Small helpers over :mod:`l0mem._ze` shared by the object layer."""

from __future__ import annotations

import ctypes
from typing import Any

from l0mem._ze import T, api, check
from l0mem._ze.enums import ZE_RESULT_NOT_READY

WAIT_FOREVER = 2**64 - 1


def call(name: str, *args: Any) -> None:
    """Call the C routine ``name`` and raise its ZeError on failure."""
    check(getattr(api(), name)(*args), name)


def create(name: str, *args: Any) -> int:
    """Call the C routine ``name`` with ``args`` and an out-handle after them; return the handle."""
    h = ctypes.c_void_p()
    call(name, *args, ctypes.byref(h))
    return address(h)


def ready(name: str, *args: Any) -> bool:
    """Call the status routine ``name``; return False on ZE_RESULT_NOT_READY, True on success."""
    rc = getattr(api(), name)(*args)
    if rc == ZE_RESULT_NOT_READY:
        return False
    check(rc, name)
    return True


def timeout(ns: int | None) -> ctypes.c_uint64:
    """Return ``ns`` as a C wait timeout (None waits forever, negative values do not wait)."""
    return ctypes.c_uint64(WAIT_FOREVER if ns is None else max(0, int(ns)))


def fn(name: str) -> Any:
    """Return the bound C routine ``name`` (for release calls that run later)."""
    return getattr(api(), name)


def handle(type_name: str) -> Any:
    """Return a new empty handle of the C handle type ``type_name``."""
    return getattr(T, type_name)()


def handles(type_name: str, count: int) -> Any:
    """Return a ctypes array of ``count`` empty handles of ``type_name``."""
    return (getattr(T, type_name) * count)()


def struct(type_name: str, **fields: Any) -> Any:
    """Return the C struct ``type_name`` (stype preset) with ``fields`` set."""
    s = getattr(T, type_name)()
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def address(h: Any) -> int:
    """Return the integer value of a handle or pointer (0 for NULL)."""
    if h is None:
        return 0
    if isinstance(h, int):
        return h
    v = h.value if hasattr(h, "value") else ctypes.cast(h, ctypes.c_void_p).value
    return int(v or 0)


def cstr(raw: bytes | Any) -> str:
    """Decode a fixed-size C char array to str."""
    data = bytes(raw)
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def uuid_str(raw: Any) -> str:
    """Format a 16-byte UUID array as the usual 8-4-4-4-12 hex string."""
    b = bytes(bytearray(raw))
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
