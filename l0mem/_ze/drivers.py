"""Initializing Level Zero and asking the loader what it loaded."""

from __future__ import annotations

import ctypes

from l0mem._ze import enums as E
from l0mem._ze import structs as S
from l0mem._ze.errors import check
from l0mem._ze.loader import api, has_function

# zeInit's flags select driver types; zeInitDrivers spells the same choice differently.
_DRIVER_TYPES = {
    0: E.ZE_INIT_DRIVER_TYPE_FLAG_GPU | E.ZE_INIT_DRIVER_TYPE_FLAG_NPU,
    E.ZE_INIT_FLAG_GPU_ONLY: E.ZE_INIT_DRIVER_TYPE_FLAG_GPU,
    E.ZE_INIT_FLAG_VPU_ONLY: E.ZE_INIT_DRIVER_TYPE_FLAG_NPU,
}


# zeInitDrivers results after which zeInit may still find drivers.
_FALL_BACK_ON = (
    E.ZE_RESULT_SUCCESS,  # with no driver found
    E.ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
    E.ZE_RESULT_ERROR_UNINITIALIZED,
)


def _handles(array: ctypes.Array[ctypes.c_void_p], count: int) -> list[int]:
    """Return the first ``count`` non-null handles of ``array`` as ints."""
    return [int(h) for h in array[:count] if h]


_state: dict[str, str] = {}


def init_path() -> str | None:
    """Return the call that initialized Level Zero ("zeInitDrivers" or "zeInit"), None before."""
    return _state.get("path")


def init(flags: int = 0) -> list[int]:
    """Initialize Level Zero and return the driver handles.

    Uses ``zeInitDrivers`` where the loader has it and falls back to ``zeInit``
    + ``zeDriverGet`` where it cannot serve: a new loader in front of drivers
    that predate ``zeInitDrivers`` answers UNSUPPORTED_FEATURE (or finds no
    driver) while ``zeInit`` still reaches them. ``flags`` are
    ``ze_init_flags_t`` (0 = every driver type). :func:`init_path` says which
    call succeeded.
    """
    if flags not in _DRIVER_TYPES:
        raise ValueError(
            f"init flags must be 0, ZE_INIT_FLAG_GPU_ONLY or ZE_INIT_FLAG_VPU_ONLY, not {flags!r}"
        )
    lib = api()
    count = ctypes.c_uint32(0)
    if has_function("zeInitDrivers"):
        desc = S.ze_init_driver_type_desc_t(flags=_DRIVER_TYPES[flags])
        rc = lib.zeInitDrivers(ctypes.byref(count), None, ctypes.byref(desc))
        if rc == E.ZE_RESULT_SUCCESS and count.value:
            array = (ctypes.c_void_p * count.value)()
            check(
                lib.zeInitDrivers(ctypes.byref(count), array, ctypes.byref(desc)), "zeInitDrivers"
            )
            _state["path"] = "zeInitDrivers"
            return _handles(array, count.value)
        if rc not in _FALL_BACK_ON:
            check(rc, "zeInitDrivers")
        count = ctypes.c_uint32(0)
    check(lib.zeInit(flags), "zeInit")
    check(lib.zeDriverGet(ctypes.byref(count), None), "zeDriverGet")
    array = (ctypes.c_void_p * count.value)()
    if count.value:
        check(lib.zeDriverGet(ctypes.byref(count), array), "zeDriverGet")
    _state["path"] = "zeInit"
    return _handles(array, count.value)


def loader_versions() -> list[tuple[str, tuple[int, int, int]]]:
    """Return (component name, (major, minor, patch)) for the loader and each layer/driver.

    Empty when the loader lacks ``zelLoaderGetVersions``; the loader lists
    drivers only after :func:`init`.
    """
    if not has_function("zelLoaderGetVersions"):
        return []
    lib = api()
    count = ctypes.c_size_t(0)
    check(lib.zelLoaderGetVersions(ctypes.byref(count), None), "zelLoaderGetVersions")
    if count.value == 0:
        return []
    versions = (S.zel_component_version_t * count.value)()
    check(lib.zelLoaderGetVersions(ctypes.byref(count), versions), "zelLoaderGetVersions")
    result = []
    for item in versions[: count.value]:
        v = item.component_lib_version
        name = item.component_name.decode("utf-8", "replace")
        result.append((name, (int(v.major), int(v.minor), int(v.patch))))
    return result
