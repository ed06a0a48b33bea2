"""The tracer's build, its exported tables and declarations, and the session's reading of records."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from l0mem.trace import TraceBuildError, TraceSession, build, library
from l0mem.trace.records import DEVICE_TAIL, HEADER, Kind, decode

REPO = Path(__file__).resolve().parents[1]
HEADERS = Path("/usr/include/level_zero")


@pytest.fixture(autouse=True)
def _no_prebuilt_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.PREBUILT_VAR, raising=False)


def test_library_is_built_once_into_the_user_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = library()
    assert first.parent.parent == tmp_path / "l0mem" / "trace"
    stamp = first.stat().st_mtime_ns
    assert library() == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in first.parent.iterdir()] == [build.LIBRARY_NAME]


def test_no_compiler_is_one_clear_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    with pytest.raises(TraceBuildError) as info:
        library()
    text = str(info.value)
    assert "\n" not in text and "needs a C compiler (cc, gcc or clang)" in text
    assert "apt install gcc" in text
    with pytest.raises(TraceBuildError):
        TraceSession(tmp_path / "work")


def test_a_prebuilt_tracer_is_used_as_it_is_without_a_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prebuilt = tmp_path / "libmine.so"
    shutil.copyfile(library(), prebuilt)
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setenv(build.PREBUILT_VAR, str(prebuilt))
    assert library() == prebuilt
    monkeypatch.setenv(build.PREBUILT_VAR, str(tmp_path / "missing.so"))
    with pytest.raises(TraceBuildError, match=r"L0MEM_TRACE_LIBRARY=.*missing\.so: no such tracer"):
        library()


def test_no_compiler_on_path_in_a_fresh_process(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    code = (
        "from l0mem.trace import TraceBuildError, library\n"
        "try:\n    library()\nexcept TraceBuildError as e:\n    print('ERR', e)\n"
    )
    env = {"PATH": str(empty), "XDG_CACHE_HOME": str(tmp_path / "c"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ERR ") and proc.stdout.count("\n") == 1
    assert "needs a C compiler" in proc.stdout


@pytest.mark.skipif(not (HEADERS / "ze_ddi.h").is_file(), reason="no Level Zero headers")
def test_declarations_match_the_level_zero_headers() -> None:
    cc = build.compiler()
    proc = subprocess.run(
        [
            cc,
            "-fsyntax-only",
            "-Wall",
            "-Werror",
            "-Wno-unused-function",
            "-DL0MEM_TRACE_LAYOUT_CHECK",
            f"-I{HEADERS}",
            str(build.SOURCE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_exports_every_table_getter_the_simulator_and_loaders_ask_for() -> None:
    lib = ctypes.CDLL(str(library()))
    sim_source = (REPO / "tests" / "simdriver" / "ddi.c").read_text()
    getters = set(re.findall(r"SIM_(?:TABLE_BEGIN|STUB_TABLE)\((z\w+)", sim_source))
    # Tables loader 1.32 asks a driver for beyond the simulator's API 1.4 set.
    getters |= {
        "zeGetDriverExpProcAddrTable",
        "zeGetMemExpProcAddrTable",
        "zeGetCommandListExpProcAddrTable",
        "zeGetRTASBuilderExpProcAddrTable",
        "zesGetGlobalProcAddrTable",
        "zetGetMetricTracerExpProcAddrTable",
        "zerGetGlobalProcAddrTable",
    }
    assert len(getters) > 50
    missing = sorted(g for g in getters if not hasattr(lib, g))
    assert missing == []
    nm = shutil.which("nm")
    if nm:  # nothing but the getters: a driver exporting zeInit would be bound to the loader's
        out = subprocess.run(
            [nm, "-D", "--defined-only", str(library())], capture_output=True, text=True, check=True
        ).stdout
        names = {ln.split()[-1] for ln in out.splitlines() if " T " in ln}
        assert names and all(re.fullmatch(r"ze[rst]?Get\w+ProcAddrTable", n) for n in names)


def _header(kind: int, **fields: int) -> bytes:
    values = dict(
        flags=0,
        result=0,
        time_ns=1,
        ptr=0,
        size=0,
        context=0,
        owner=-1,
        target=-1,
        owner_sub=-1,
        target_sub=-1,
        lost=0,
        aux=0,
    )
    values.update(fields)
    return HEADER.pack(kind, *values.values())


def _device(index: int, uuid: bytes, name: str) -> bytes:
    tail = DEVICE_TAIL.pack(uuid, 0, 0x10 + index, 0, 0, name.encode())
    return _header(Kind.DEVICE, flags=2, owner=index, owner_sub=-1) + tail


def test_a_partial_record_waits_for_the_next_poll(tmp_path: Path) -> None:
    session = TraceSession(tmp_path)
    pid = os.getpid()  # a live process: its allocations stay live
    stream = (
        _header(Kind.PROCESS, size=1, aux=pid)
        + _device(0, b"\x01" * 16, "card zero")
        + _header(Kind.ALLOC_DEVICE, ptr=0x1000, size=4096, owner=0, context=7)
        + _header(Kind.ALLOC_DEVICE, ptr=0x9000, size=1 << 20, owner=0, context=7)
        + _header(Kind.FREE, ptr=0x1000, context=7)
        + _header(Kind.ALLOC_HOST, result=0x70000002, size=64, context=7, lost=2)
    )
    path = session.directory / f"{pid}-1.l0trace"
    cut = HEADER.size * 3 + DEVICE_TAIL.size + 10  # inside the second allocation
    path.write_bytes(stream[:cut])
    first = session.poll()
    assert [(d.name, d.pci, d.allocated) for d in first.devices] == [
        ("card zero", "0000:10:00.0", 4096)
    ]
    assert first.processes == 1
    with path.open("ab") as f:
        f.write(stream[cut:])
    second = session.poll()
    dev = second.devices[0]
    assert (dev.allocated, dev.allocated_peak) == (1 << 20, 4096 + (1 << 20))
    assert second.failed_calls == {"zeMemAllocHost": 1}
    assert second.lost_records == 2
    assert second.to_dict()["devices"][0]["uuid"] == "01010101-0101-0101-0101-010101010101"
    # A context destroyed with allocations left in it takes them along.
    with path.open("ab") as f:
        f.write(_header(Kind.CONTEXT_DESTROY, context=7))
        f.write(_header(Kind.RESIDENT)[:20])
    third = session.poll()
    assert third.devices[0].allocated == 0
    session.close()
    assert session.totals().lost_records == 3  # the record left incomplete


def test_a_call_is_in_flight_from_its_begin_record_to_its_own(tmp_path: Path) -> None:
    session = TraceSession(tmp_path)
    pid = os.getpid()
    path = session.directory / f"{pid}-1.l0trace"
    path.write_bytes(
        _header(Kind.PROCESS, size=1, aux=pid)
        + _device(0, b"\x01" * 16, "card zero")
        + _header(Kind.BEGIN, aux=Kind.ALLOC_DEVICE)
    )
    assert session.poll().in_flight == 1
    with path.open("ab") as f:
        f.write(_header(Kind.ALLOC_DEVICE, ptr=0x1000, size=4096, owner=0, context=7))
        f.write(_header(Kind.BEGIN, aux=Kind.RESIDENT))
    totals = session.poll()
    assert (totals.in_flight, totals.to_dict()["in_flight"]) == (1, 1)
    assert totals.calls == {"zeMemAllocDevice": 1}  # a begin is no call of its own
    with path.open("ab") as f:
        f.write(_header(Kind.RESIDENT, ptr=0x1000, size=4096, owner=0, target=0, context=7))
    assert session.poll().in_flight == 0
    session.close()


def test_decode_stops_before_an_incomplete_device_record() -> None:
    data = _device(1, b"\x02" * 16, "x")
    records, used = decode(data[:-1])
    assert (records, used) == ([], 0)
    records, used = decode(data)
    assert used == len(data) and records[0].name == "x" and records[0].owner == 1


FAKE_DRIVER = r"""
#include <stdint.h>
#include <string.h>
typedef struct { char name[256]; uint32_t version; } ext_t;
typedef struct { uint32_t stype; void *pNext; } base_t;
typedef struct { uint32_t stype; void *pNext; uint32_t flags; } ddi_t;
static const char *names[] = {"ZE_extension_a", "ZE_extension_driver_ddi_handles", "ZE_extension_b"};
static uint32_t get_ext(void *drv, uint32_t *count, ext_t *props) {
    if (!props) { *count = 3; return 0; }
    uint32_t n = *count < 3 ? *count : 3;
    for (uint32_t i = 0; i < n; i++) { strcpy(props[i].name, names[i]); props[i].version = 0x10001; }
    *count = n;
    return 0;
}
static uint32_t get_props(void *drv, base_t *props) {
    for (base_t *p = props->pNext; p; p = p->pNext)
        if (p->stype == 0x00020027) ((ddi_t *)p)->flags = 1;
    return 0;
}
static uint32_t none(void) { return 0x78000003; }
uint32_t zeGetGlobalProcAddrTable(uint32_t v, void **t) { t[0] = (void *)none; return 0; }
uint32_t zeGetDriverProcAddrTable(uint32_t v, void **t) {
    for (int i = 0; i < 6; i++) t[i] = (void *)none;
    t[2] = (void *)get_props; t[4] = (void *)get_ext;
    return 0;
}
"""


class Ext(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("version", ctypes.c_uint32)]


class DdiHandles(ctypes.Structure):
    _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32)]


class Base(ctypes.Structure):
    _fields_ = [
        ("stype", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("rest", ctypes.c_byte * 512),
    ]


def test_the_driver_ddi_handles_extension_is_hidden(tmp_path: Path) -> None:
    fake = tmp_path / "libfake_driver.so"
    src = tmp_path / "fake.c"
    src.write_text(FAKE_DRIVER)
    subprocess.run([build.compiler(), "-shared", "-fPIC", "-o", str(fake), str(src)], check=True)
    code = f"""
import ctypes, sys
sys.path.insert(0, {str(REPO)!r})
from tests.test_trace_build import Base, DdiHandles, Ext
lib = ctypes.CDLL({str(library())!r})
table = (ctypes.c_void_p * 16)()
assert lib.zeGetDriverProcAddrTable(0x10004, table) == 0
get_ext = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32),
                           ctypes.POINTER(Ext))(table[4])
get_props = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p)(table[2])
n = ctypes.c_uint32(0)
assert get_ext(None, ctypes.byref(n), None) == 0
props = (Ext * 3)()
m = ctypes.c_uint32(3)
assert get_ext(None, ctypes.byref(m), props) == 0
one = ctypes.c_uint32(1)
assert get_ext(None, ctypes.byref(one), props) == 0
ddi = DdiHandles(0x00020027, None, 0)
base = Base(1, ctypes.cast(ctypes.pointer(ddi), ctypes.c_void_p))
assert get_props(None, ctypes.byref(base)) == 0
print(n.value, [props[i].name.decode() for i in range(m.value)], one.value, ddi.flags)
"""
    env = dict(os.environ, L0MEM_TRACE_DRIVERS=str(fake), PYTHONPATH=str(REPO))
    env.pop("L0MEM_TRACE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "2 ['ZE_extension_a', 'ZE_extension_b'] 1 0"
