"""Loading the Level Zero loader: lazily, once, from the right place, with optional symbols.

Besides the real loader, these tests use small stand-in libraries compiled
from C here: they export the table's functions (most just return
ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) so both branches of ``init()`` and the
handling of absent symbols can be checked whatever loader version is installed.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from l0mem._ze import (
    LoaderNotFoundError,
    LoaderTooOldError,
    MissingFunctionError,
    T,
    api,
    has_function,
    init,
    load,
    loader_path,
    loader_versions,
    missing_functions,
)
from l0mem._ze import loader as loader_mod
from l0mem._ze.errors import UninitializedError
from l0mem._ze.functions import FUNCTIONS

ROOT = Path(__file__).resolve().parents[1]

STUB_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef void* H;
typedef struct { int32_t stype; const void* pNext; uint32_t flags; } init_desc_t;
typedef struct { int major, minor, patch; } ver_t;
typedef struct { char name[64]; int32_t spec; ver_t lib; } comp_t;
static uint32_t last_flags = 0xffffffffu;
static int init_calls = 0;

uint32_t stub_last_flags(void) { return last_flags; }
int stub_init_calls(void) { return init_calls; }

static uint32_t fill(uint32_t* n, H* out, uint32_t total, uintptr_t base) {
    if (!out) { *n = total; return 0; }
    uint32_t k = *n < total ? *n : total;
    for (uint32_t i = 0; i < k; i++) out[i] = (H)(base + i);
    *n = k;
    return 0;
}

uint32_t zeInit(uint32_t flags) { last_flags = flags; init_calls++; return 0; }
uint32_t zeDriverGet(uint32_t* n, H* out) { return fill(n, out, 2, 0x1000); }

#ifdef WITH_INIT_DRIVERS
uint32_t zeInitDrivers(uint32_t* n, H* out, init_desc_t* d) {
    if (!d || d->stype != 0x00020021) return 0x78000004u;
    last_flags = d->flags;
    return fill(n, out, 3, 0x2000);
}
#endif

#ifndef NO_LOADER_VERSIONS
uint32_t zelLoaderGetVersions(size_t* n, comp_t* v) {
    if (!v) { *n = 2; return 0; }
    const char* names[2] = {"loader", "stub_driver"};
    for (size_t i = 0; i < *n && i < 2; i++) {
        memset(&v[i], 0, sizeof v[i]);
        strcpy(v[i].name, names[i]);
        v[i].spec = 0x10004;
        v[i].lib.major = 1; v[i].lib.minor = (int)i + 7; v[i].lib.patch = 42;
    }
    return 0;
}
#endif
"""

HAND_WRITTEN = {"zeInit", "zeDriverGet", "zeInitDrivers", "zelLoaderGetVersions"}
# Required functions left out of the "hollow" stub: far too many to name on one line.
HOLLOW = [name for name, _, _, required in FUNCTIONS if required and name not in HAND_WRITTEN][:30]


def _stub_source(drop: set[str]) -> str:
    """Return the stub library source: hand-written functions plus one-liners for the rest."""
    lines = [STUB_C]
    for name, _, _, required in FUNCTIONS:
        if name in HAND_WRITTEN or name in drop or not required:
            continue
        lines.append(f"uint32_t {name}(void) {{ return 0x78000003u; }}")
    return "\n".join(lines) + "\n"


def _build_stub(directory: Path, name: str, defines: list[str], drop: set[str]) -> Path:
    """Compile one stub variant into ``directory``/``name``; return its path."""
    gcc = shutil.which("gcc")
    assert gcc, "gcc is required (bash .ci/dev setup installs it)"
    src = directory / f"{name}.c"
    out = directory / name
    src.write_text(_stub_source(drop))
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O0", *defines, "-o", str(out), str(src)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build the stand-in libraries once: old-style, new-style and one lacking a required call."""
    d = tmp_path_factory.mktemp("ze_stubs")
    return {
        "old": _build_stub(d, "libstub_old.so", [], set()),
        "new": _build_stub(d, "libstub_new.so", ["-DWITH_INIT_DRIVERS"], set()),
        "broken": _build_stub(d, "libstub_broken.so", [], {"zeMemAllocDevice", "zeEventCreate"}),
        "noversions": _build_stub(d, "libstub_noversions.so", ["-DNO_LOADER_VERSIONS"], set()),
        "hollow": _build_stub(d, "libstub_hollow.so", [], set(HOLLOW)),
    }


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the loaded library for one test; the original state comes back afterwards."""
    monkeypatch.setattr(loader_mod, "_state", None)
    monkeypatch.delenv(loader_mod.ENV_VAR, raising=False)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with extra environment; return the result."""
    full = {
        k: v for k, v in os.environ.items() if k not in ("L0MEM_ZE_LOADER", "ZE_ENABLE_ALT_DRIVERS")
    }
    full.update(env)
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=full,
        check=False,
    )


def test_import_does_not_load_and_first_call_does() -> None:
    """Importing the package maps nothing; api() maps the loader and records its path."""
    code = (
        "import json, l0mem._ze as z\n"
        "def mapped():\n"
        "    return any('libze_loader' in l for l in open('/proc/self/maps'))\n"
        "before = (mapped(), z.loader_path())\n"
        "z.api()\n"
        "print(json.dumps([before, mapped(), z.loader_path()]))\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    before, after_mapped, path = json.loads(result.stdout)
    assert before == [False, None]
    assert after_mapped is True
    assert path and os.path.isfile(path) and "libze_loader" in os.path.basename(path)


def test_recorded_path_is_the_mapped_file() -> None:
    """loader_path() names a file the process really has mapped."""
    api()
    path = loader_path()
    assert path is not None
    with open("/proc/self/maps") as maps:
        mapped = {os.path.realpath(line.split()[-1]) for line in maps if "/" in line}
    assert path in mapped


def test_concurrent_first_use_loads_once(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads racing into api() share one load and one Api object."""
    calls = []
    real_open = loader_mod._open

    def slow_open(requested: str, origin: str) -> loader_mod._Loaded:
        calls.append(requested)
        time.sleep(0.05)  # widens the window in which a second loader could start
        return real_open(requested, origin)

    monkeypatch.setattr(loader_mod, "_open", slow_open)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def worker() -> None:
        barrier.wait()
        results.append(api())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_env_var_pointing_nowhere_gives_one_line_error() -> None:
    """A bad L0MEM_ZE_LOADER fails cleanly, naming the path and the variable to fix."""
    code = (
        "import l0mem._ze as z\n"
        "try:\n"
        "    z.api()\n"
        "except z.LoaderNotFoundError as e:\n"
        "    print(str(e))\n"
        "    raise SystemExit(3)\n"
    )
    result = _run(code, L0MEM_ZE_LOADER="/nonexistent/dir/libze_loader.so.1")
    assert result.returncode == 3, result.stderr
    message = result.stdout.strip()
    assert "\n" not in message
    assert "/nonexistent/dir/libze_loader.so.1" in message
    # The user chose that path: the variable is what to fix (installing libze1 would not help).
    assert message.endswith("; fix or unset L0MEM_ZE_LOADER") and "libze1" not in message
    assert "Traceback" not in result.stderr


def test_env_var_selects_the_library(stubs: dict[str, Path], tmp_path: Path) -> None:
    """L0MEM_ZE_LOADER decides which file is loaded and reported."""
    copy = tmp_path / "libze_loader.so.1"
    shutil.copy(stubs["old"], copy)
    result = _run(
        "import l0mem._ze as z; z.api(); print(z.loader_path())", L0MEM_ZE_LOADER=str(copy)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(copy.resolve())


def test_load_argument_overrides_and_bad_path_raises(
    fresh_state: None, stubs: dict[str, Path]
) -> None:
    """load(path) loads that file; a missing file raises LoaderNotFoundError and changes nothing."""
    cdll = load(stubs["old"])
    assert isinstance(cdll, ctypes.CDLL)
    assert loader_path() == str(stubs["old"].resolve())
    with pytest.raises(LoaderNotFoundError, match=r"does-not-exist\.so"):
        load("/tmp/does-not-exist.so")
    assert loader_path() == str(stubs["old"].resolve())
    assert load(stubs["old"]) is cdll


def test_absent_optional_symbols(fresh_state: None, stubs: dict[str, Path]) -> None:
    """Missing optional functions do not break loading; calling one raises MissingFunctionError."""
    load(stubs["old"])
    assert not has_function("zeInitDrivers")
    assert not has_function("zeDevicePciGetPropertiesExt")
    assert has_function("zeInit") and has_function("zeMemAllocDevice")
    with pytest.raises(MissingFunctionError, match="zeInitDrivers"):
        api().zeInitDrivers(None, None, None)
    with pytest.raises(MissingFunctionError, match="zeDevicePciGetPropertiesExt"):
        api().zeDevicePciGetPropertiesExt(None, None)


def test_api_annotations_name_exactly_the_table() -> None:
    """Api declares one annotation per table row, so a type checker knows every routine."""
    annotated = set(loader_mod.Api.__annotations__)
    table = {name for name, *_ in FUNCTIONS}
    assert annotated == table, sorted(annotated ^ table)
    assert len(FUNCTIONS) == len(table)


def test_api_refuses_functions_other_than_the_annotated_ones() -> None:
    """Binding a set of functions that drifted from the annotations fails at load time."""
    with pytest.raises(ValueError, match="zeMemFree"):
        loader_mod.Api({})


def test_every_bound_function_carries_its_c_name(fresh_state: None, stubs: dict[str, Path]) -> None:
    """ctypes pointers and missing-function stubs both know their C name (for messages)."""
    load(stubs["old"])
    lib = api()
    assert not has_function("zeInitDrivers") and has_function("zeMemFree")
    for name, *_ in FUNCTIONS:
        assert getattr(lib, name).__name__ == name


def test_has_function_agrees_with_the_real_loader() -> None:
    """For the installed loader, has_function matches what the library exports."""
    api()
    path = loader_path()
    assert path
    cdll = ctypes.CDLL(path)
    for name, *_ in FUNCTIONS:
        assert has_function(name) == hasattr(cdll, name), name
    assert not has_function("zeNoSuchFunction")
    # Exported but outside the table: answered from the library itself.
    assert has_function("zeImageCreate") == hasattr(cdll, "zeImageCreate")


def test_missing_required_symbols_refuse_the_library(
    fresh_state: None, stubs: dict[str, Path]
) -> None:
    """A library without required functions is rejected with their names."""
    with pytest.raises(LoaderTooOldError) as info:
        load(stubs["broken"])
    assert "zeMemAllocDevice" in str(info.value) and "zeEventCreate" in str(info.value)
    assert loader_mod._state is None


def test_bound_functions_have_types_set_once(fresh_state: None, stubs: dict[str, Path]) -> None:
    """Every present function carries restype/argtypes from the table."""
    load(stubs["old"])
    lib = api()
    for name, _, argtypes, _ in FUNCTIONS:
        if has_function(name):
            func = getattr(lib, name)
            assert func.restype is ctypes.c_uint32
            assert len(func.argtypes) == len(argtypes), name
    assert (
        lib.zeMemAllocDevice(None, None, 0, 0, None, None) == T.ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
    )


def test_init_falls_back_to_zeInit(fresh_state: None, stubs: dict[str, Path]) -> None:
    """Without zeInitDrivers, init() calls zeInit(flags) and returns zeDriverGet's handles."""
    cdll = load(stubs["old"])
    assert init(T.ZE_INIT_FLAG_GPU_ONLY) == [0x1000, 0x1001]
    assert cdll.stub_last_flags() == T.ZE_INIT_FLAG_GPU_ONLY
    assert cdll.stub_init_calls() == 1


def test_init_prefers_zeInitDrivers(fresh_state: None, stubs: dict[str, Path]) -> None:
    """With zeInitDrivers, init() uses it with a proper descriptor and never calls zeInit."""
    cdll = load(stubs["new"])
    assert has_function("zeInitDrivers")
    assert init() == [0x2000, 0x2001, 0x2002]
    assert cdll.stub_last_flags() == T.ZE_INIT_DRIVER_TYPE_FLAG_GPU | T.ZE_INIT_DRIVER_TYPE_FLAG_NPU
    assert cdll.stub_init_calls() == 0
    init(T.ZE_INIT_FLAG_GPU_ONLY)
    assert cdll.stub_last_flags() == T.ZE_INIT_DRIVER_TYPE_FLAG_GPU


def test_init_rejects_bad_flags(fresh_state: None, stubs: dict[str, Path]) -> None:
    """Flags other than 0, GPU_ONLY and VPU_ONLY are refused before any call."""
    load(stubs["old"])
    with pytest.raises(ValueError, match="init flags"):
        init(7)


def test_loader_versions_parses_components(fresh_state: None, stubs: dict[str, Path]) -> None:
    """loader_versions() returns (name, (major, minor, patch)) per component."""
    load(stubs["old"])
    assert loader_versions() == [("loader", (1, 7, 42)), ("stub_driver", (1, 8, 42))]


def test_init_on_real_loader_uses_fallback_without_drivers() -> None:
    """On the installed loader with no driver, init() ends in zeInit, which says why.

    A loader with zeInitDrivers answers it without a driver too (UNINITIALIZED,
    or success with none found); init() then asks zeInit, as it does for
    drivers that predate zeInitDrivers, and zeInit's error is the one raised.
    """
    code = (
        "import l0mem._ze as z\n"
        "from l0mem._ze.errors import UninitializedError\n"
        "try:\n"
        "    z.init()\n"
        "except UninitializedError as e:\n"
        "    print(e.routine, z.has_function('zeInitDrivers'))\n"
    )
    result = _run(code, ZE_ENABLE_ALT_DRIVERS="/nonexistent/libze_no_driver.so")
    assert result.returncode == 0, result.stderr
    routine, has_new = result.stdout.split()
    assert routine == "zeInit" and has_new in ("True", "False")
    assert UninitializedError.code == T.ZE_RESULT_ERROR_UNINITIALIZED


def test_loader_versions_is_empty_without_the_function(
    fresh_state: None, stubs: dict[str, Path]
) -> None:
    """A loader without zelLoaderGetVersions gives [] and lists the function as missing."""
    load(stubs["noversions"])
    assert not has_function("zelLoaderGetVersions")
    assert "zelLoaderGetVersions" in missing_functions()
    assert loader_versions() == []


def test_missing_functions_lists_the_absent_optional_ones(
    fresh_state: None, stubs: dict[str, Path]
) -> None:
    """missing_functions() is exactly the table functions the library does not export."""
    cdll = load(stubs["old"])
    missing = missing_functions()
    assert "zeInitDrivers" in missing and "zelLoaderGetVersions" not in missing
    assert missing == {name for name, *_ in FUNCTIONS if not hasattr(cdll, name)}
    assert not any(required and name in missing for name, _, _, required in FUNCTIONS)


def test_a_long_list_of_missing_functions_stays_short(
    fresh_state: None, stubs: dict[str, Path]
) -> None:
    """The error names how many functions are missing and only the first few."""
    with pytest.raises(LoaderTooOldError) as info:
        load(stubs["hollow"])
    message = str(info.value)
    assert "\n" not in message
    assert f"lacks {len(HOLLOW)} required functions ({', '.join(HOLLOW[:5])}, ...)" in message
    assert HOLLOW[5] not in message
    assert len(message) < 400
