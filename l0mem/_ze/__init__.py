"""A ctypes binding to the Level Zero loader (``libze_loader.so.1``), raw layer.

What it is for: the C API as it is, nothing more. ``api()`` returns the bound
C functions as an :class:`Api` whose attributes are declared one per routine
(a type checker rejects a misspelt name), each a :class:`CFunction` returning
its ``ze_result_t`` as an int and never raising. ``check(rc, routine)`` turns
a failed result into the matching :class:`ZeError` subclass. Enumerations,
structs and handle types live in :mod:`~l0mem._ze.enums`,
:mod:`~l0mem._ze.structs` and :mod:`~l0mem._ze.scalars` under their C names
(also gathered in ``T``, :mod:`l0mem._ze.types`); tests/test_ze_layout.py
checks all of them against the C headers.

What it may import: the standard library only, nothing of l0mem. The object
layer (``core``) and everything above build on it.
"""

from __future__ import annotations

from l0mem._ze import types as T
from l0mem._ze.drivers import init, init_path, loader_versions
from l0mem._ze.errors import (
    LoaderError,
    LoaderNotFoundError,
    LoaderTooOldError,
    MissingFunctionError,
    ZeError,
    ZeRuntimeError,
    ZeUsageError,
    check,
    error_class,
)
from l0mem._ze.loader import (
    Api,
    CFunction,
    api,
    has_function,
    load,
    loader_path,
    missing_functions,
)

__all__ = [
    "Api",
    "CFunction",
    "LoaderError",
    "LoaderNotFoundError",
    "LoaderTooOldError",
    "MissingFunctionError",
    "T",
    "ZeError",
    "ZeRuntimeError",
    "ZeUsageError",
    "api",
    "check",
    "error_class",
    "has_function",
    "init",
    "init_path",
    "load",
    "loader_path",
    "loader_versions",
    "missing_functions",
]
