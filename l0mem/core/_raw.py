"""Small typed helpers over :mod:`l0mem._ze` shared by the object layer.

Routines are passed as the bound function objects themselves
(``_raw.call(api().zeMemFree, ctx, ptr)``), so a type checker follows every
name; a failure names the routine by the function's ``__name__``. Structs are
built from their classes in :mod:`l0mem._ze.structs`, handle arrays from the
handle types in :mod:`l0mem._ze.scalars`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any, TypeVar

from l0mem._ze import CFunction, check
from l0mem._ze.enums import ze_result_t
from l0mem._ze.structs import Struct

# UINT64_MAX: the specification's timeout meaning "wait without limit".
WAIT_FOREVER = 2**64 - 1
UINT32_MAX = 2**32 - 1

StructT = TypeVar("StructT", bound=Struct)


def call(function: CFunction, *args: Any) -> None:
    """Call the C routine ``function`` and raise its ZeError on failure."""
    check(function(*args), function.__name__)


def create(function: CFunction, *args: Any) -> int:
    """Call ``function`` with ``args`` and an out-handle after them; return the handle."""
    h = ctypes.c_void_p()
    call(function, *args, ctypes.byref(h))
    return address(h)


def ready(function: CFunction, *args: Any) -> bool:
    """Call the status routine ``function``; False on ZE_RESULT_NOT_READY, True on success."""
    rc = function(*args)
    if rc == ze_result_t.ZE_RESULT_NOT_READY:
        return False
    check(rc, function.__name__)
    return True


def timeout(ns: int | None) -> ctypes.c_uint64:
    """Return ``ns`` as a C wait timeout (None waits forever, negative values do not wait)."""
    return ctypes.c_uint64(WAIT_FOREVER if ns is None else max(0, int(ns)))


def handles(kind: type[ctypes.c_void_p], count: int) -> ctypes.Array[ctypes.c_void_p]:
    """Return a C array of ``count`` empty handles of the handle type ``kind``."""
    return (kind * count)()


def handle_array(
    kind: type[ctypes.c_void_p], values: Sequence[int]
) -> ctypes.Array[ctypes.c_void_p]:
    """Return a C array of handles of type ``kind`` holding ``values``."""
    return (kind * len(values))(*values)


def struct_array(cls: type[StructT], count: int) -> ctypes.Array[StructT]:
    """Return a C array of ``count`` structs ``cls``, each with its ``stype`` preset."""
    # A bare ctypes array is zero-filled; copying in constructed structs presets stype.
    return (cls * count)(*(cls() for _ in range(count)))


def check_uint32(name: str, values: Sequence[int], minimum: int) -> list[int]:
    """Return ``values`` as a list after checking each is an int in [minimum, 2**32 - 1].

    The C routines take ``uint32_t``; ctypes would silently keep the low 32 bits.
    """
    out = list(values)
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= UINT32_MAX:
            raise ValueError(
                f"{name} must be ints from {minimum} to 2**32 - 1 (uint32), got {tuple(out)!r}"
            )
    return out


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
