"""Finding, loading and binding the Level Zero loader library (``libze_loader.so.1``).

The library is loaded once, lazily, under a lock. ``L0MEM_ZE_LOADER`` or an
explicit :func:`load` path overrides the default SONAME. Every function of
:data:`l0mem._ze.functions.FUNCTIONS` gets its ``restype``/``argtypes`` here,
once per load.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from l0mem._ze.errors import LoaderNotFoundError, LoaderTooOldError, MissingFunctionError
from l0mem._ze.functions import FUNCTIONS, ctype_of

SONAME = "libze_loader.so.1"
ENV_VAR = "L0MEM_ZE_LOADER"


class CFunction(Protocol):
    """A bound Level Zero routine: returns its ``ze_result_t`` as an int, named as in C.

    ctypes function pointers and the stubs standing in for functions the
    loader lacks both carry ``__name__``, so error messages can name the routine.
    """

    __name__: str

    def __call__(self, *args: Any) -> int:
        """Call the C routine."""
        ...


class Api:
    """The bound Level Zero functions: one attribute per C function, named as in C.

    Each call returns the ``ze_result_t`` as an int and never raises, except a
    function the loader does not export, which raises MissingFunctionError.
    The annotations below let a type checker reject a misspelt routine;
    tests/test_ze_loader.py checks that they name exactly the rows of
    :data:`l0mem._ze.functions.FUNCTIONS`.
    """

    zeInit: CFunction
    zeDriverGet: CFunction
    zeDriverGetApiVersion: CFunction
    zeDriverGetProperties: CFunction
    zeDriverGetIpcProperties: CFunction
    zeDriverGetExtensionProperties: CFunction
    zeDriverGetExtensionFunctionAddress: CFunction
    zeDeviceGet: CFunction
    zeDeviceGetSubDevices: CFunction
    zeDeviceGetProperties: CFunction
    zeDeviceGetComputeProperties: CFunction
    zeDeviceGetMemoryProperties: CFunction
    zeDeviceGetMemoryAccessProperties: CFunction
    zeDeviceGetCommandQueueGroupProperties: CFunction
    zeDeviceGetExternalMemoryProperties: CFunction
    zeDeviceGetP2PProperties: CFunction
    zeDeviceCanAccessPeer: CFunction
    zeDeviceGetStatus: CFunction
    zeDeviceGetGlobalTimestamps: CFunction
    zeDevicePciGetPropertiesExt: CFunction
    zeContextCreate: CFunction
    zeContextCreateEx: CFunction
    zeContextDestroy: CFunction
    zeContextGetStatus: CFunction
    zeContextMakeMemoryResident: CFunction
    zeContextEvictMemory: CFunction
    zeMemAllocDevice: CFunction
    zeMemAllocHost: CFunction
    zeMemAllocShared: CFunction
    zeMemFree: CFunction
    zeMemGetAllocProperties: CFunction
    zeMemGetAddressRange: CFunction
    zeMemGetIpcHandle: CFunction
    zeMemOpenIpcHandle: CFunction
    zeMemCloseIpcHandle: CFunction
    zeCommandQueueCreate: CFunction
    zeCommandQueueDestroy: CFunction
    zeCommandQueueExecuteCommandLists: CFunction
    zeCommandQueueSynchronize: CFunction
    zeCommandListCreate: CFunction
    zeCommandListCreateImmediate: CFunction
    zeCommandListClose: CFunction
    zeCommandListReset: CFunction
    zeCommandListDestroy: CFunction
    zeCommandListAppendBarrier: CFunction
    zeCommandListAppendMemoryCopy: CFunction
    zeCommandListAppendMemoryFill: CFunction
    zeCommandListAppendLaunchKernel: CFunction
    zeCommandListAppendSignalEvent: CFunction
    zeCommandListAppendWaitOnEvents: CFunction
    zeCommandListAppendEventReset: CFunction
    zeCommandListAppendWriteGlobalTimestamp: CFunction
    zeEventPoolCreate: CFunction
    zeEventPoolDestroy: CFunction
    zeEventCreate: CFunction
    zeEventDestroy: CFunction
    zeEventHostSignal: CFunction
    zeEventHostSynchronize: CFunction
    zeEventQueryStatus: CFunction
    zeEventHostReset: CFunction
    zeEventQueryKernelTimestamp: CFunction
    zeFenceCreate: CFunction
    zeFenceDestroy: CFunction
    zeFenceHostSynchronize: CFunction
    zeFenceQueryStatus: CFunction
    zeFenceReset: CFunction
    zeModuleCreate: CFunction
    zeModuleDestroy: CFunction
    zeModuleBuildLogGetString: CFunction
    zeModuleBuildLogDestroy: CFunction
    zeModuleGetKernelNames: CFunction
    zeKernelCreate: CFunction
    zeKernelDestroy: CFunction
    zeKernelSetGroupSize: CFunction
    zeKernelSuggestGroupSize: CFunction
    zeKernelSetArgumentValue: CFunction
    zeKernelGetProperties: CFunction
    zeKernelGetName: CFunction
    zesDeviceGetProperties: CFunction
    zesDeviceEnumMemoryModules: CFunction
    zesMemoryGetProperties: CFunction
    zesMemoryGetState: CFunction
    zesDevicePciGetProperties: CFunction
    zelLoaderGetVersions: CFunction
    zeInitDrivers: CFunction

    def __init__(self, functions: Mapping[str, CFunction]) -> None:
        """Expose ``functions`` as attributes; they must be exactly the annotated routines."""
        declared = set(type(self).__annotations__)
        if set(functions) != declared:
            raise ValueError(
                "bound functions differ from Api's annotations: "
                f"{sorted(set(functions) ^ declared)}"
            )
        self.__dict__.update(functions)


@dataclass
class _Loaded:
    """One loaded loader library and what was bound from it."""

    cdll: ctypes.CDLL
    path: str | None
    api: Api
    present: frozenset[str]
    missing: frozenset[str] = field(default_factory=frozenset)


_lock = threading.Lock()
_state: _Loaded | None = None


def _missing_stub(name: str, where: str) -> CFunction:
    """Return a function that raises MissingFunctionError for ``name``."""

    def stub(*_args: Any) -> int:
        raise MissingFunctionError(
            f"{name} is not exported by the Level Zero loader {where}; "
            "it needs a newer loader (libze1)"
        )

    stub.__name__ = name
    return stub


class _LinkMap(ctypes.Structure):
    """The first two fields of glibc's ``struct link_map``."""

    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _dlinfo_path(cdll: ctypes.CDLL) -> str | None:
    """Return the file the dynamic linker mapped for ``cdll``, via dlinfo(RTLD_DI_LINKMAP)."""
    rtld_di_linkmap = 2
    for libname in (None, "libdl.so.2"):
        try:
            dlinfo = ctypes.CDLL(libname).dlinfo
        except (OSError, AttributeError):
            continue
        dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        dlinfo.restype = ctypes.c_int
        link_map = ctypes.POINTER(_LinkMap)()
        # CDLL._handle is ctypes' documented way to reach the dlopen() handle.
        if dlinfo(cdll._handle, rtld_di_linkmap, ctypes.byref(link_map)) != 0 or not link_map:
            return None
        name = link_map.contents.l_name
        return os.fsdecode(name) if name else None
    return None


def _maps_path(name: str) -> str | None:
    """Return the first file in /proc/self/maps whose name starts with ``name``'s base name."""
    base = os.path.basename(name)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(base):
                    return parts[5].strip()
    except OSError:
        return None
    return None


def _resolve_path(cdll: ctypes.CDLL, requested: str) -> str | None:
    """Return the real file path of the loaded library, or None if it cannot be told."""
    path = _dlinfo_path(cdll) or _maps_path(requested)
    return os.path.realpath(path) if path else None


SHOWN_NAMES = 5


def _name_list(names: list[str]) -> str:
    """Return ``names`` for a one-line message: all of a few, else the count and the first few."""
    if len(names) <= SHOWN_NAMES:
        return ", ".join(names)
    return f"{len(names)} required functions ({', '.join(names[:SHOWN_NAMES])}, ...)"


def _bind(cdll: ctypes.CDLL, where: str) -> tuple[Api, frozenset[str], frozenset[str]]:
    """Set restype/argtypes of every table function; return (api, present, missing)."""
    functions: dict[str, CFunction] = {}
    present: set[str] = set()
    missing_required: list[str] = []
    for name, restype, argtypes, required in FUNCTIONS:
        try:
            func = getattr(cdll, name)
        except AttributeError:
            if required:
                missing_required.append(name)
            functions[name] = _missing_stub(name, where)
            continue
        func.restype = ctype_of(restype)
        func.argtypes = [ctype_of(a) for a in argtypes]
        functions[name] = func
        present.add(name)
    if missing_required:
        raise LoaderTooOldError(
            f"{where} is not a usable Level Zero loader: it lacks "
            f"{_name_list(missing_required)} "
            "(install libze1 >= 1.8 or point L0MEM_ZE_LOADER at a newer libze_loader.so.1)"
        )
    missing = frozenset(name for name, *_ in FUNCTIONS) - present
    return Api(functions), frozenset(present), missing


def _open(requested: str, origin: str) -> _Loaded:
    """Load and bind the library ``requested`` (named by ``origin`` in error messages)."""
    try:
        cdll = ctypes.CDLL(requested)
    except OSError as exc:
        reason = " ".join(str(exc).split())
        todo = (
            f"fix or unset {ENV_VAR}"
            if origin == f"from {ENV_VAR}"
            else f"install libze1 (Debian and Ubuntu) or set {ENV_VAR} to the path of "
            "libze_loader.so.1"
        )
        raise LoaderNotFoundError(
            f"cannot load the Level Zero loader '{requested}' ({origin}): {reason}; {todo}"
        ) from None
    path = _resolve_path(cdll, requested)
    api, present, missing = _bind(cdll, path or requested)
    return _Loaded(cdll=cdll, path=path, api=api, present=present, missing=missing)


def _default_request() -> tuple[str, str]:
    """Return (library to load, where that choice came from)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env, f"from {ENV_VAR}"
    return SONAME, "the default SONAME"


def loader_request() -> tuple[str, str]:
    """Return the library :func:`load` opens by default (``$L0MEM_ZE_LOADER``, else the SONAME) and why."""
    return _default_request()


def _ensure() -> _Loaded:
    """Return the loaded state, loading the default library on first use."""
    state = _state
    if state is not None:
        return state
    return _load(None)


def _load(path: str | None) -> _Loaded:
    """Load ``path`` (or the default) under the lock and make it current."""
    global _state
    with _lock:
        if path is None:
            if _state is not None:
                return _state
            requested, origin = _default_request()
        else:
            requested, origin = path, "given to load()"
            if _state is not None and _state.path == os.path.realpath(path):
                return _state
        _state = _open(requested, origin)
        return _state


def load(path: str | os.PathLike[str] | None = None) -> ctypes.CDLL:
    """Load the loader (``path``, else ``$L0MEM_ZE_LOADER``, else the SONAME); return the CDLL."""
    return _load(os.fspath(path) if path is not None else None).cdll


def api() -> Api:
    """Return the bound functions, loading the loader on first use."""
    return _ensure().api


def loader_path() -> str | None:
    """Return the real path of the loaded loader library, or None if nothing is loaded."""
    state = _state
    return state.path if state is not None else None


def has_function(name: str) -> bool:
    """Return whether the loaded loader exports ``name`` (loads the loader if needed)."""
    state = _ensure()
    if name in state.present:
        return True
    if name in state.missing:
        return False
    return hasattr(state.cdll, name)


def missing_functions() -> frozenset[str]:
    """Return the names of table functions the loaded loader does not export."""
    return _ensure().missing
