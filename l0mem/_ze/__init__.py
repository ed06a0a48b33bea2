"""A ctypes binding to the Level Zero loader (``libze_loader.so.1``), raw layer.

``api()`` returns the bound C functions, named as in C; each returns its
``ze_result_t`` as an int and never raises. ``check(rc, routine)`` turns a
failed result into the matching :class:`ZeError` subclass. Types live in
``T`` (:mod:`l0mem._ze.types`) under their C names.
"""

from __future__ import annotations

from l0mem._ze import types as T
from l0mem._ze.drivers import init, loader_versions
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
from l0mem._ze.loader import Api, api, has_function, load, loader_path, missing_functions

__all__ = [
    "Api",
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
    "load",
    "loader_path",
    "loader_versions",
    "missing_functions",
]
