"""Tests of the simulated Level Zero driver, driven through the real loader in subprocesses.

Every configuration runs in a fresh interpreter because the loader initializes
once per process. The numbers here come from the simulator, not from hardware.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.simdriver import zeraw
from tests.support.sim import (
    SimBuildError,
    build,
    run_python,
    run_python_env,
    run_result,
    sim_env,
)

MIB = 1 << 20

PRELUDE = """
import ctypes, json, os, struct, sys, time
from ctypes import byref, c_size_t, c_uint32, c_uint64, c_void_p
from tests.simdriver import zeraw as zr
from tests.support.sim import SimControl
ze = zr.Ze()
sim = SimControl.from_env()
devs = ze.devices()
def out(**kw):
    print("RESULT " + json.dumps(kw))
"""


def run(
    code: str, driver_env: Mapping[str, str] | None = None, /, **config: object
) -> dict[str, Any]:
    """Run `code` after PRELUDE against the simulator (plus `driver_env`) and return what it passed to out()."""
    return run_result(PRELUDE + textwrap.dedent(code), sim_env(driver_env, **config), 60.0)


def close(actual: float, expected: float, rel: float, slack: float) -> bool:
    """Return whether `actual` is within rel * expected + slack of `expected`."""
    return abs(actual - expected) <= rel * expected + slack


# ----------------------------------------------------------------- build


def test_build_is_cached_and_exports_only_the_driver_interface() -> None:
    first = build()
    build.cache_clear()
    second = build()
    assert first == second
    assert first.is_file()
    assert first.parent.parent == Path(__file__).resolve().parents[1] / "build" / "simdriver"
    lib = ctypes.CDLL(str(first))
    for name in (
        "zeGetGlobalProcAddrTable",
        "zesGetMemoryProcAddrTable",
        "zetGetDebugProcAddrTable",
    ):
        assert hasattr(lib, name)
    for name in ("zesim_set", "zesim_mirror_bytes", "zesim_device_used", "zesim_bytes_moved"):
        assert hasattr(lib, name)
    # Internal entry points must not be exported: they would interpose the loader's ze* symbols.
    assert not hasattr(lib, "sim_zeInit")
    assert not hasattr(lib, "zeInit")


def test_build_reports_missing_gcc(monkeypatch: pytest.MonkeyPatch) -> None:
    build.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(SimBuildError, match="gcc not found"):
            build()
    finally:
        build.cache_clear()


def test_sim_env_rejects_unknown_keys_and_sets_variables() -> None:
    env = sim_env(devices=4, mirror="peer-resident", mirror_release=False)
    assert env["ZESIM_DEVICES"] == "4"
    assert env["ZESIM_MIRROR"] == "peer-resident"
    assert env["ZESIM_MIRROR_RELEASE"] == "0"
    assert env["ZES_ENABLE_SYSMAN"] == "1"
    assert env["ZE_ENABLE_ALT_DRIVERS"] == str(build())
    with pytest.raises(ValueError, match="devcies"):
        sim_env(devcies=2)


def test_ctypes_layouts_match_the_headers(tmp_path: Path) -> None:
    gcc = shutil.which("gcc")
    assert gcc is not None
    lines = [f'printf("%s %zu\\n", "{n}", sizeof({n}));' for n in zeraw.LAYOUTS]
    src = tmp_path / "sizes.c"
    src.write_text(
        "#include <stdio.h>\n#include <ze_api.h>\n#include <zes_api.h>\nint main(void){\n"
        + "\n".join(lines)
        + "\nreturn 0;}\n"
    )
    exe = tmp_path / "sizes"
    subprocess.run([gcc, "-I/usr/include/level_zero", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    sizes = dict(line.split() for line in out.splitlines())
    for name, cls in zeraw.LAYOUTS.items():
        assert int(sizes[name]) == ctypes.sizeof(cls), name


# ------------------------------------------------------- devices and config


def test_loader_finds_configured_devices() -> None:
    r = run(
        """
        props = [ze.device_properties(d) for d in devs]
        chained = zr.PciExtProperties(stype=zr.ST_PCI_EXT_PROPERTIES)
        p0 = zr.DeviceProperties(stype=zr.ST_DEVICE_PROPERTIES, pNext=ctypes.addressof(chained))
        ze.check("props", ze.lib.zeDeviceGetProperties(devs[2], byref(p0)))
        props12 = [ze.device_properties(d, zr.ST_DEVICE_PROPERTIES_1_2) for d in devs]
        dp = zr.DriverProperties(stype=zr.ST_DRIVER_PROPERTIES)
        ze.check("drv", ze.lib.zeDriverGetProperties(ze.driver, byref(dp)))
        pci = []
        for d in devs:
            p = zr.PciExtProperties(stype=zr.ST_PCI_EXT_PROPERTIES)
            ze.check("pci", ze.lib.zeDevicePciGetPropertiesExt(d, byref(p)))
            pci.append([p.address.domain, p.address.bus, p.address.device, p.address.function])
        n = c_uint32(0)
        ze.check("sub", ze.lib.zeDeviceGetSubDevices(devs[0], byref(n), None))
        out(
            names=[p.name.decode() for p in props],
            vendor=[p.vendorId for p in props],
            types=[p.type for p in props],
            uuids=[bytes(p.uuid).hex() for p in props],
            res=[p.timerResolution for p in props],
            res12=[p.timerResolution for p in props12],
            kbits=props[0].kernelTimestampValidBits,
            total=[ze.memory_total(d) for d in devs],
            maxalloc=props[0].maxMemAllocSize,
            version=dp.driverVersion,
            pci=pci,
            subdevices=n.value,
            chained_bus=chained.address.bus,
        )
        """,
        devices=3,
        device_memory="1536M",
        driver_version="0x01020304",
    )
    assert r["names"] == [f"l0mem simulated GPU {i}" for i in range(3)]
    assert r["vendor"] == [0x8086] * 3
    assert r["types"] == [1] * 3  # ZE_DEVICE_TYPE_GPU
    assert len(set(r["uuids"])) == 3
    assert r["total"] == [1536 * MIB] * 3
    assert r["maxalloc"] == 1536 * MIB
    assert r["version"] == 0x01020304
    assert r["pci"] == [[0, 0x10 + i, 0, 0] for i in range(3)]
    assert r["subdevices"] == 0
    assert r["chained_bus"] == 0x12
    # ns per tick for the 1.0 stype and ticks per second for the 1.2 stype describe one clock.
    assert all(ns * hz == 10**9 for ns, hz in zip(r["res"], r["res12"], strict=True))
    assert r["kbits"] == 32


def test_config_file_with_environment_override(tmp_path: Path) -> None:
    cfg = tmp_path / "sim.conf"
    cfg.write_text("# simulator\ndevices = 4\ndevice_memory=2G\npeers=none\n")
    r = run(
        """
        v = c_uint32(0)
        ze.check("peer", ze.lib.zeDeviceCanAccessPeer(devs[0], devs[1], byref(v)))
        out(n=len(devs), total=ze.memory_total(devs[0]), peer=v.value)
        """,
        config=str(cfg),
        devices=2,
    )
    assert r == {"n": 2, "total": 2 << 30, "peer": 0, "_stderr": ""}


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"devices": "x"}, "devices=x"),
        ({"device_memory": "12Q"}, "device_memory=12Q"),
        ({"mirror": "sometimes"}, "mirror=sometimes"),
        ({"peers": "0>5"}, "peers=0>5"),
        ({"mirror_ratio": "-1"}, "mirror_ratio=-1"),
        ({"defer_backing_mirror": "2"}, "defer_backing_mirror=2"),
        ({"timestamp_not_ready": "3"}, "timestamp_not_ready=3"),
        ({"fill_noop": "2"}, "fill_noop=2"),
        ({"init_drivers": "2"}, "init_drivers=2: expected 1 or 0"),
        ({"free_delay_ms": "600001"}, "free_delay_ms=600001: expected 0..600000"),
        ({"subdevices": "1"}, "subdevices=1: expected 0 or 2..8"),
        ({"subdevices": "9"}, "subdevices=9"),
        ({"subdevices": "4", "device_memory": "3"}, "subdevices=4: more sub-devices than bytes"),
    ],
)
def test_bad_config_fails_zeinit_with_one_line(config: dict[str, str], needle: str) -> None:
    code = "import ctypes\nprint(hex(ctypes.CDLL('libze_loader.so.1').zeInit(0) & 0xffffffff))\n"
    proc = run_python(code, 60.0, **config)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == hex(zeraw.INVALID_ARGUMENT)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zesim: bad configuration:"), proc.stderr
    assert needle in lines[0]


def test_init_drivers_is_read_from_the_environment_only(tmp_path: Path) -> None:
    # The loader asks for the driver's tables before zeInit reads the file.
    cfg = tmp_path / "sim.conf"
    cfg.write_text("init_drivers=1\n")
    code = "import ctypes\nprint(hex(ctypes.CDLL('libze_loader.so.1').zeInit(0) & 0xffffffff))\n"
    proc = run_python(code, 60.0, config=str(cfg))
    assert proc.stdout.strip() == hex(zeraw.INVALID_ARGUMENT)
    assert "init_drivers is read from ZESIM_INIT_DRIVERS only" in proc.stderr


def test_init_drivers_cannot_change_after_zeinit() -> None:
    code = (
        "import ctypes\n"
        "from tests.support.sim import SimControl\n"
        "ctypes.CDLL('libze_loader.so.1').zeInit(0)\n"
        "try:\n"
        "    SimControl.from_env().set('init_drivers', 1)\n"
        "except ValueError as e:\n"
        "    print('refused', e)\n"
    )
    proc = run_python(code, 60.0, init_drivers=0)
    assert proc.stdout.startswith("refused"), proc.stdout + proc.stderr
    assert "init_drivers cannot change after zeInit" in proc.stderr


def test_unknown_environment_key_is_rejected() -> None:
    env = sim_env()
    env["ZESIM_DEVICE_MEMROY"] = "1G"
    code = "import ctypes\nprint(hex(ctypes.CDLL('libze_loader.so.1').zeInit(0) & 0xffffffff))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == hex(zeraw.INVALID_ARGUMENT)
    assert "unknown key 'device_memroy'" in proc.stderr


# Child script: CanAccessPeer and the P2P properties (flags, bandwidth) of every ordered pair.
PEER_MATRIX = """
acc, flags, bw = {}, {}, {}
for i, a in enumerate(devs):
    for j, b in enumerate(devs):
        v = c_uint32(0)
        ze.check("peer", ze.lib.zeDeviceCanAccessPeer(a, b, byref(v)))
        acc[f"{i}{j}"] = v.value & 0xff
        chained = zr.P2PBandwidthProperties(stype=zr.ST_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES)
        p = zr.P2PProperties(stype=zr.ST_DEVICE_P2P_PROPERTIES, pNext=ctypes.addressof(chained))
        ze.check("p2p", ze.lib.zeDeviceGetP2PProperties(a, b, byref(p)))
        flags[f"{i}{j}"] = p.flags
        bw[f"{i}{j}"] = chained.logicalBandwidth
out(acc=acc, flags=flags, bw=bw)
"""


def test_peer_matrix_and_p2p_properties() -> None:
    r = run(
        PEER_MATRIX,
        devices=3,
        peers="0>1,1>0,2>0",
    )
    allowed = {"01", "10", "20", "00", "11", "22"}
    for key, value in r["acc"].items():
        assert value == (1 if key in allowed else 0), key
        if key[0] != key[1]:
            both = zeraw.P2P_FLAG_ACCESS | zeraw.P2P_FLAG_ATOMICS
            assert r["flags"][key] == (both if key in allowed else 0), key
            assert (r["bw"][key] > 0) == (key in allowed), key


# ------------------------------------------------------------ copies


def test_peer_copies_are_corrupted_where_and_as_often_as_configured() -> None:
    r = run(
        """
        size = (2 << 20) + 3
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        ctx = ze.context()
        host = ze.alloc_host(ctx, size)
        d0, d0b, d1 = (ze.alloc_device(ctx, devs[i], size) for i in (0, 0, 1))
        zr.write(host, data)
        cl = ze.immediate_list(ctx, devs[0])
        ze.copy(cl, d0, host, size)      # host to device: never corrupted
        ze.copy(cl, d0b, d0, size)       # within one device: never corrupted
        ze.copy(cl, d1, d0, size)        # peer copy: corrupted at the offsets
        def bad(ptr):
            got = zr.read(ptr, size)
            return [i for i in range(size) if got[i] != data[i]]
        first = dict(same=bad(d0b), host=bad(d0), peer=bad(d1), n=sim.corrupted_bytes())
        sim.set("corrupt_offsets", "off")
        sim.set("corrupt_rate", "0.001")
        ze.copy(cl, d1, d0, size)
        peer = bad(d1)
        out(**first, rate=len(peer), counted=sim.corrupted_bytes(), copies=sim.peer_copies())
        """,
        corrupt_offsets="0,4096,2097152,2097154,9999999999",
    )
    size = (2 << 20) + 3
    assert r["same"] == [] and r["host"] == []
    assert r["peer"] == [0, 4096, 2 << 20, (2 << 20) + 2]  # the offset past the end is not hit
    assert r["n"] == 4
    # A rate of 1 in 1000: exactly the bytes the simulator counts, near the expected share.
    assert r["rate"] == r["counted"]
    assert 0.5 * size / 1000 < r["rate"] < 1.5 * size / 1000
    assert r["copies"] == 1


def test_a_hung_peer_copy_never_signals_and_stalls_its_list() -> None:
    r = run(
        """
        size = 1 << 16
        ctx = ze.context()
        d0, d1 = ze.alloc_device(ctx, devs[0], size), ze.alloc_device(ctx, devs[1], size)
        cl = ze.immediate_list(ctx, devs[0])
        pool = ze.event_pool(ctx, 4)
        ev = [ze.event(pool, i) for i in range(3)]
        ze.fill(cl, d0, b"\x07", size)
        ze.copy(cl, d1, d0, size, ev[0])         # peer copy 1: completes
        ze.copy(cl, d0, d1, size, ev[1])         # peer copy 2: hangs
        ze.copy(cl, d0, d0, 16, ev[2])           # behind it on the same list: never runs
        t0 = time.monotonic()
        waited = [ze.call("zeEventHostSynchronize", e, c_uint64(200_000_000)) for e in ev]
        out(waited=waited, took=time.monotonic() - t0, copies=sim.peer_copies(),
            d1=zr.read(d1, 4).hex())
        """,
        hang_copy_at=2,
    )
    assert r["waited"] == [0, zeraw.NOT_READY, zeraw.NOT_READY]
    assert r["copies"] == 2 and r["d1"] == "07070707"
    assert r["took"] >= 0.35  # both waits ran to their 0.2 s bound


def test_copy_fault_keys_are_checked() -> None:
    for key, value in (("corrupt_rate", "2"), ("corrupt_offsets", "x"), ("hang_copy_at", "-1")):
        proc = run_python_env(
            "from tests.simdriver import zeraw as zr; zr.Ze()", sim_env(**{key: value})
        )
        assert proc.returncode != 0 and f"{key}={value}" in proc.stderr, proc.stderr


def test_copies_move_the_right_bytes() -> None:
    r = run(
        """
        size = (1 << 20) + 13
        data = os.urandom(size)
        ctx = ze.context()
        host_in, host_out = ze.alloc_host(ctx, size), ze.alloc_host(ctx, size)
        d0, d1 = ze.alloc_device(ctx, devs[0], size), ze.alloc_device(ctx, devs[1], size)
        zr.write(host_in, data)
        cl = ze.immediate_list(ctx, devs[0])
        ze.copy(cl, d0, host_in, size)
        ze.copy(cl, d1, d0, size)
        ze.copy(cl, host_out, d1, size)
        # A plain Python buffer counts as host memory too.
        pybuf = ctypes.create_string_buffer(64)
        ze.copy(cl, ctypes.addressof(pybuf), d1 + 100, 64)
        over = ze.copy_rc(cl, d0 + 10, host_in, size)
        out(
            same=zr.read(host_out, size) == data,
            slice_ok=pybuf.raw == data[100:164],
            h2d=sim.bytes_moved(-1, 0),
            d2d=sim.bytes_moved(0, 1),
            d2h=sim.bytes_moved(1, -1),
            back=sim.bytes_moved(1, 0),
            used=[sim.device_used(0), sim.device_used(1)],
            over=over,
            size=size,
        )
        """
    )
    size = r["size"]
    assert r["same"] and r["slice_ok"]
    assert r["h2d"] == size
    assert r["d2d"] == size
    assert r["d2h"] == size + 64
    assert r["back"] == 0
    assert r["used"] == [size, size]
    assert r["over"] == zeraw.INVALID_SIZE


@pytest.mark.parametrize("fault", [0, 1])
def test_fault_keys_timestamp_not_ready_and_fill_noop(fault: int) -> None:
    r = run(
        """
        ctx = ze.context()
        buf = ze.alloc_host(ctx, 4096)
        zr.write(buf, b"\\x00" * 4096)
        pool = ze.event_pool(ctx, 1, zr.EVENT_POOL_FLAG_HOST_VISIBLE | zr.EVENT_POOL_FLAG_KERNEL_TIMESTAMP)
        ev = ze.event(pool, 0)
        cl = ze.immediate_list(ctx, devs[0])
        ze.copy(cl, buf, buf + 2048, 16, ev)
        ze.fill(cl, buf, b"\\x5a", 4096)
        ts = zr.KernelTimestampResult()
        out(
            sync=ze.call("zeEventHostSynchronize", ev, c_uint64(10**9)),
            ts=ze.call("zeEventQueryKernelTimestamp", ev, byref(ts)),
            filled=zr.read(buf, 4096) == b"\\x5a" * 4096,
        )
        """,
        timestamp_not_ready=fault,
        fill_noop=fault,
    )
    assert r["sync"] == 0
    assert r["ts"] == (zeraw.NOT_READY if fault else 0)
    assert r["filled"] is not bool(fault)


def test_regular_list_runs_on_execute_and_signals_event_and_fence() -> None:
    r = run(
        """
        ctx = ze.context()
        src, dst = ze.alloc_host(ctx, 4096), ze.alloc_host(ctx, 4096)
        zr.write(src, b"\\x5a" * 4096)
        pool = ze.event_pool(ctx, 2, zr.EVENT_POOL_FLAG_HOST_VISIBLE | zr.EVENT_POOL_FLAG_KERNEL_TIMESTAMP)
        ev = ze.event(pool, 0)
        cl = ze.regular_list(ctx, devs[0])
        q = ze.queue(ctx, devs[0])
        ze.copy(cl, dst, src, 4096, ev)
        before = (zr.read(dst, 4096) == b"\\x5a" * 4096, ze.call("zeEventQueryStatus", ev))
        ze.check("close", ze.lib.zeCommandListClose(cl))
        late = ze.copy_rc(cl, dst, src, 16)
        fdesc = zr.FenceDesc(stype=zr.ST_FENCE_DESC)
        fence = c_void_p()
        ze.check("fence", ze.lib.zeFenceCreate(q, byref(fdesc), byref(fence)))
        fence_before = ze.call("zeFenceQueryStatus", fence)
        lists = (c_void_p * 1)(cl.value)
        ze.check("exec", ze.lib.zeCommandQueueExecuteCommandLists(q, 1, lists, fence))
        ts = zr.KernelTimestampResult()
        ze.check("ts", ze.lib.zeEventQueryKernelTimestamp(ev, byref(ts)))
        out(
            before=before,
            after=zr.read(dst, 4096) == b"\\x5a" * 4096,
            late=late,
            fence_before=fence_before,
            fence_after=ze.call("zeFenceHostSynchronize", fence, c_uint64(10**9)),
            event_after=ze.call("zeEventHostSynchronize", ev, c_uint64(0)),
            ts=[ts.global_.kernelStart, ts.global_.kernelEnd],
            dup_index=ze.call("zeEventCreate", pool, byref(zr.EventDesc(stype=zr.ST_EVENT_DESC, index=0)), byref(c_void_p())),
        )
        """
    )
    assert r["before"] == [False, zeraw.NOT_READY]
    assert r["after"] is True
    assert r["late"] == zeraw.INVALID_ARGUMENT
    assert r["fence_before"] == zeraw.NOT_READY
    assert r["fence_after"] == zeraw.SUCCESS
    assert r["event_after"] == zeraw.SUCCESS
    start, end = r["ts"]
    assert end >= start and end - start < (
        1 << 31
    )  # a wrap of the 32-bit counter is not expected here
    assert r["dup_index"] == zeraw.INVALID_ARGUMENT


def test_concurrent_copies_from_threads_are_all_counted() -> None:
    r = run(
        """
        import threading
        ctx = ze.context()
        size, rounds, nthreads = 64 * 1024, 50, 4
        bufs = []
        for t in range(nthreads):
            h = ze.alloc_host(ctx, size)
            zr.write(h, bytes([t + 1]) * size)
            bufs.append((h, ze.alloc_device(ctx, devs[t % 2], size), ze.alloc_host(ctx, size)))
        def work(t):
            cl = ze.immediate_list(ctx, devs[t % 2])
            h, d, back = bufs[t]
            for _ in range(rounds):
                ze.copy(cl, d, h, size)
                ze.copy(cl, back, d, size)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
        for th in threads: th.start()
        for th in threads: th.join()
        ok = all(zr.read(b[2], size) == bytes([t + 1]) * size for t, b in enumerate(bufs))
        moved = sim.bytes_moved(-1, 0) + sim.bytes_moved(-1, 1) + sim.bytes_moved(0, -1) + sim.bytes_moved(1, -1)
        out(ok=ok, moved=moved, expected=2 * size * rounds * nthreads)
        """
    )
    assert r["ok"]
    assert r["moved"] == r["expected"]


# ---------------------------------------------------- device memory cost

ZERO_FILL = """
ctx = ze.context()
cl = ze.immediate_list(ctx, devs[0])
size = 256 << 20

rss0, shared0 = zr.rss_kib(), zr.memfd_kib()
d = ze.alloc_device(ctx, devs[0], size)
ze.fill(cl, d, b"\\0\\0\\0\\0", size)
rss1, shared1 = zr.rss_kib(), zr.memfd_kib()
zeros = all(zr.read(d + off, 4096) == bytes(4096) for off in range(0, size, 16 << 20))
# Non-zero data costs host pages; a zero fill gives them back.
ze.fill(cl, d, b"\\xab", 64 << 20)
rss2 = zr.rss_kib()
pattern_ok = zr.read(d + (32 << 20), 16) == b"\\xab" * 16
ze.fill(cl, d + 100, b"\\0", (64 << 20) - 100)
rss3 = zr.rss_kib()
edge = zr.read(d, 101)
out(
    rss_fill=rss1 - rss0, shared_fill=shared1 - shared0, zeros=zeros,
    rss_pattern=rss2 - rss1, pattern_ok=pattern_ok, rss_zeroed=rss3 - rss1,
    edge_ok=edge == b"\\xab" * 100 + b"\\0",
)
"""


def test_zero_fill_of_device_memory_costs_no_host_memory() -> None:
    # Judged on the process's own memory as the kernel counts it (RSS and the
    # shared memory it holds), which no other process moves; that such memory
    # shows in MemAvailable and Shmem is tests/test_probe_live.py's question.
    r = run(ZERO_FILL, device_memory="1G")
    assert r["zeros"] and r["pattern_ok"] and r["edge_ok"]
    assert r["rss_fill"] < 4 * 1024
    assert r["shared_fill"] == 0
    assert r["rss_pattern"] >= 60 * 1024  # 64 MiB of 0xab really costs host pages
    assert r["rss_zeroed"] < 4 * 1024


# ------------------------------------------------------------- mirrors

MIRROR = """
import os
size = {size}
mode = {mode!r}
ctx = ze.context()
if mode == "dmabuf":
    plain = ze.alloc_device(ctx, devs[0], size)  # no export descriptor: no mirror
checks = {{}}

def create():
    if mode == "peer-resident":
        d = ze.alloc_device(ctx, devs[0], size)
        ze.make_resident(ctx, devs[0], d, size)
        checks.setdefault("owner_only", sim.mirror_bytes())
        ze.make_resident(ctx, devs[1], d, size)
        ze.make_resident(ctx, devs[1], d, size)
    elif mode == "dmabuf":
        checks.setdefault("owner_only", sim.mirror_bytes())
        d = ze.alloc_device(ctx, devs[0], size, export=True)
        props, dev, fd = ze.alloc_properties(ctx, d, export_fd=True)
        st = os.fstat(fd)
        checks.setdefault("fd_size", [st.st_size, st.st_blocks * 512])
        os.close(fd)
    else:
        d = ze.alloc_device(ctx, devs[0], size)
    return d

def release(d):
    if mode == "peer-resident":
        ze.evict(ctx, devs[1], d, size)
        checks.setdefault("after_evict", sim.mirror_bytes())
    ze.free(ctx, d)

def snap():
    return zr.memfd_kib(), zr.rss_kib()

shared, rss, held, after = [], [], [], []
for _ in range(5):
    s0 = snap()
    d = create()
    s1 = snap()
    held.append(sim.mirror_bytes())
    release(d)
    s2 = snap()
    after.append(sim.mirror_bytes())
    shared += [s1[0] - s0[0], s1[0] - s2[0]]
    rss.append(s1[1] - s0[1])
out(held=held, after=after, shared=shared, rss=rss, used=sim.device_used(0), **checks)
"""


@pytest.mark.parametrize(("mode", "ratio"), [("all", 0.5), ("dmabuf", 1.0), ("peer-resident", 1.0)])
def test_mirror_costs_host_memory_outside_rss_and_is_released(mode: str, ratio: float) -> None:
    # Judged on the kernel's count of the pages the process holds in memfds (no
    # other process moves it); that such pages leave MemAvailable and show in
    # Shmem is asserted on the real signals in tests/test_probe_live.py and,
    # through the audit, in tests/test_audit_runner.py.
    size = 96 * MIB
    r = run(MIRROR.format(size=size, mode=mode), mirror=mode, mirror_ratio=ratio)
    assert r["held"] == [int(size * ratio)] * 5
    assert r["after"] == [0] * 5
    # Every create took the mirror's pages, every release gave them back.
    assert r["shared"] == [int(size * ratio) // 1024] * 10
    assert max(r["rss"]) < 4 * 1024  # the mirror is not in the process's VmRSS
    if mode == "dmabuf":
        assert r["owner_only"] == 0  # an allocation without the export descriptor is not mirrored
        assert r["fd_size"] == [size, size]  # the exported fd is the mirror itself
        assert r["used"] == size  # the plain allocation is still live
    if mode == "peer-resident":
        assert r["owner_only"] == 0  # residency on the owner is free
        assert r["after_evict"] == 0  # eviction from the peer releases the mirror


def test_mirror_none_costs_nothing() -> None:
    r = run(MIRROR.format(size=64 * MIB, mode="peer-resident"), mirror="none")
    assert r["held"] == [0] * 5 and r["owner_only"] == 0
    assert r["shared"] == [0] * 10
    assert max(r["rss"]) < 4 * 1024


def test_mirror_release_0_keeps_host_memory_after_free() -> None:
    r = run(
        """
        ctx = ze.context()
        steps = []
        for _ in range(3):
            kib0 = zr.memfd_kib()
            d = ze.alloc_device(ctx, devs[0], 64 << 20)
            ze.free(ctx, d)
            steps.append(zr.memfd_kib() - kib0)
        out(held=sim.mirror_bytes(), used=sim.device_used(0), shared=steps)
        """,
        mirror="all",
        mirror_release=0,
    )
    assert r["held"] == 3 * 64 * MIB  # every freed allocation left its mirror behind
    assert r["used"] == 0
    assert r["shared"] == [64 * 1024] * 3  # and the kernel still holds its pages


# --------------------------------------------------- capacity and faults


def test_out_of_device_memory_at_capacity() -> None:
    r = run(
        """
        ctx = ze.context()
        a = ze.alloc_device_rc(ctx, devs[0], 48 << 20)
        b = ze.alloc_device_rc(ctx, devs[0], 32 << 20)
        c = ze.alloc_device_rc(ctx, devs[0], 16 << 20)
        other = ze.alloc_device_rc(ctx, devs[1], 64 << 20)
        too_big = ze.alloc_device_rc(ctx, devs[1], 65 << 20)
        ze.free(ctx, a[1])
        again = ze.alloc_device_rc(ctx, devs[0], 40 << 20)
        out(rcs=[a[0], b[0], c[0], other[0], too_big[0], again[0]], used=sim.device_used(0))
        """,
        device_memory="64M",
    )
    ok, oom = zeraw.SUCCESS, zeraw.OUT_OF_DEVICE_MEMORY
    assert r["rcs"] == [ok, oom, ok, ok, oom, ok]
    assert r["used"] == 56 * MIB


def test_fail_alloc_at_fails_exactly_that_call() -> None:
    r = run(
        """
        ctx = ze.context()
        rcs = [ze.alloc_device_rc(ctx, devs[0], 4096)[0] for _ in range(4)]
        sim.set("fail_alloc_at", 2)
        rcs2 = [ze.alloc_device_rc(ctx, devs[0], 4096)[0] for _ in range(3)]
        out(rcs=rcs, rcs2=rcs2)
        """,
        fail_alloc_at=3,
    )
    ok, oom = zeraw.SUCCESS, zeraw.OUT_OF_DEVICE_MEMORY
    assert r["rcs"] == [ok, ok, oom, ok]
    assert r["rcs2"] == [ok, oom, ok]


def test_fail_oom_after_counts_bytes_allocated() -> None:
    r = run(
        """
        ctx = ze.context()
        a = ze.alloc_device_rc(ctx, devs[0], 4 << 20)
        b = ze.alloc_device_rc(ctx, devs[0], 4 << 20)
        c = ze.alloc_device_rc(ctx, devs[0], 4 << 20)
        d1 = ze.alloc_device_rc(ctx, devs[1], 8 << 20)
        ze.free(ctx, a[1]); ze.free(ctx, b[1])
        after_free = ze.alloc_device_rc(ctx, devs[0], 4 << 20)[0]
        sim.set("fail_oom_after", "10M")
        restarted = ze.alloc_device_rc(ctx, devs[0], 4 << 20)[0]
        out(rcs=[a[0], b[0], c[0], d1[0]], after_free=after_free, restarted=restarted)
        """,
        fail_oom_after="10M",
    )
    ok, oom = zeraw.SUCCESS, zeraw.OUT_OF_DEVICE_MEMORY
    assert r["rcs"] == [ok, ok, oom, ok]
    assert r["after_free"] == oom  # the budget counts bytes ever allocated, not live bytes
    assert r["restarted"] == ok


def test_device_lost_from_the_kth_call_on() -> None:
    r = run(
        """
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[0], 1 << 20)
        sim.set("device_lost_at", 3)
        rcs = [ze.call("zeDeviceGetStatus", devs[0]) for _ in range(2)]
        rcs.append(ze.call("zeContextGetStatus", ctx))
        rcs.append(ze.alloc_device_rc(ctx, devs[0], 4096)[0])
        free_rc = ze.call("zeMemFree", ctx, c_void_p(d))
        used = sim.device_used(0)
        sim.set("device_lost_at", "off")
        out(rcs=rcs, free_rc=free_rc, used=used, recovered=ze.call("zeDeviceGetStatus", devs[0]))
        """
    )
    ok, lost = zeraw.SUCCESS, zeraw.DEVICE_LOST
    assert r["rcs"] == [ok, ok, lost, lost]
    assert r["free_rc"] == lost
    assert r["used"] == 0  # frees still release memory on a lost device
    assert r["recovered"] == ok


def test_invalid_handles_and_pointers_are_rejected() -> None:
    r = run(
        """
        ctx = ze.context()
        pool = ze.event_pool(ctx, 1)
        ev = ze.event(pool, 0)
        ze.check("destroy", ze.lib.zeEventDestroy(ev))
        host = ze.alloc_host(ctx, 4096)
        out(
            null_ctx=ze.call("zeContextDestroy", None),
            wrong_kind=ze.call("zeMemFree", devs[0], c_void_p(host)),
            stale=ze.call("zeEventHostSignal", ev),
            unknown_ptr=ze.call("zeMemFree", ctx, c_void_p(host + 64)),
            other_ctx_dev=ze.alloc_device_rc(ze.context([devs[1]]), devs[0], 4096)[0],
        )
        """
    )
    assert r["null_ctx"] == zeraw.INVALID_NULL_HANDLE
    assert r["wrong_kind"] == zeraw.INVALID_ARGUMENT
    assert r["stale"] == zeraw.INVALID_ARGUMENT
    assert r["unknown_ptr"] == zeraw.INVALID_ARGUMENT
    assert r["other_ctx_dev"] == zeraw.INVALID_ARGUMENT


def test_alloc_properties_address_range_and_ipc() -> None:
    r = run(
        """
        ctx = ze.context()
        d = ze.alloc_device(ctx, devs[1], 10000)
        h = ze.alloc_host(ctx, 5000)
        pd, devd, _ = ze.alloc_properties(ctx, d + 77)
        ph, devh, _ = ze.alloc_properties(ctx, h)
        base, size = c_void_p(), c_size_t()
        ze.check("range", ze.lib.zeMemGetAddressRange(ctx, c_void_p(d + 500), byref(base), byref(size)))
        ipc = zr.IpcMemHandle()
        ze.check("ipc", ze.lib.zeMemGetIpcHandle(ctx, c_void_p(d), byref(ipc)))
        opened = c_void_p()
        ze.check("open", ze.lib.zeMemOpenIpcHandle(ctx, devs[0], ipc, 0, byref(opened)))
        close1 = ze.call("zeMemCloseIpcHandle", ctx, opened)
        close2 = ze.call("zeMemCloseIpcHandle", ctx, opened)
        out(
            dtype=pd.type, dev_is_1=devd.value == devs[1].value, htype=ph.type, hdev=devh.value,
            ids_differ=pd.id != ph.id, base_ok=base.value == d, size=size.value,
            opened_ok=opened.value == d, closes=[close1, close2],
        )
        """
    )
    assert r["dtype"] == zeraw.MEMORY_TYPE_DEVICE and r["dev_is_1"]
    assert r["htype"] == zeraw.MEMORY_TYPE_HOST and r["hdev"] is None
    assert r["ids_differ"] and r["base_ok"] and r["size"] == 10000
    assert r["opened_ok"]
    assert r["closes"] == [zeraw.SUCCESS, zeraw.INVALID_ARGUMENT]


# ----------------------------------------------------------------- sysman


def test_sysman_memory_state_tracks_allocations() -> None:
    r = run(
        """
        def state(i):
            n = c_uint32(0)
            ze.check("enum", ze.lib.zesDeviceEnumMemoryModules(devs[i], byref(n), None))
            mods = (c_void_p * n.value)()
            ze.check("enum", ze.lib.zesDeviceEnumMemoryModules(devs[i], byref(n), mods))
            s = zr.ZesMemState(stype=zr.ZES_ST_MEM_STATE)
            ze.check("state", ze.lib.zesMemoryGetState(c_void_p(mods[0]), byref(s)))
            return [n.value, s.size, s.free]
        ctx = ze.context()
        s0 = [state(0), state(1)]
        d = ze.alloc_device(ctx, devs[0], 100 << 20)
        s1 = [state(0), state(1)]
        ze.free(ctx, d)
        s2 = state(0)
        p = zr.ZesDeviceProperties(stype=zr.ZES_ST_DEVICE_PROPERTIES)
        ze.check("props", ze.lib.zesDeviceGetProperties(devs[1], byref(p)))
        pci = zr.ZesPciProperties(stype=zr.ZES_ST_PCI_PROPERTIES)
        ze.check("pci", ze.lib.zesDevicePciGetProperties(devs[1], byref(pci)))
        out(s0=s0, s1=s1, s2=s2, model=p.modelName.decode(), core=p.core.name.decode(), bus=pci.address.bus)
        """,
        device_memory="1G",
    )
    g = 1 << 30
    assert r["s0"] == [[1, g, g], [1, g, g]]
    assert r["s1"] == [[1, g, g - 100 * MIB], [1, g, g]]
    assert r["s2"] == [1, g, g]
    assert r["model"] == r["core"] == "l0mem simulated GPU 1"
    assert r["bus"] == 0x11


def test_sysman_reports_device_wide_usage_with_shared_state(tmp_path: Path) -> None:
    state = str(tmp_path / "devices.state")
    holder_code = PRELUDE + textwrap.dedent(
        """
        ctx = ze.context()
        held = [ze.alloc_device(ctx, devs[0], 96 << 20), ze.alloc_device(ctx, devs[1], 32 << 20)]
        print("held", flush=True)
        sys.stdin.readline()
        ze.free(ctx, held.pop())
        print("freed", flush=True)
        sys.stdin.readline()
        """
    )
    env = sim_env(device_memory="1G", shared_state=state)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    watcher = """
        def used(i):
            mods = ze.sysman_memory(devs[i])
            return mods[0][0].physicalSize - mods[0][1].free
        out(used=[used(0), used(1)], own=[sim.device_used(0), sim.device_used(1)])
        """
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        seen = run(watcher, device_memory="1G", shared_state=state)
        assert seen["used"] == [96 * MIB, 32 * MIB]  # the holder's, seen from another process
        assert seen["own"] == [0, 0]  # the ground truth of the reader itself is untouched
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "freed"
        assert run(watcher, device_memory="1G", shared_state=state)["used"] == [96 * MIB, 0]
        holder.kill()  # a process that ends without freeing no longer counts
        holder.wait(30)
        assert run(watcher, device_memory="1G", shared_state=state)["used"] == [0, 0]
        # without the key, Sysman counts the calling process only
        alone = run(watcher, device_memory="1G")
        assert alone["used"] == [0, 0]
    finally:
        holder.kill()
        holder.wait(30)


def test_shared_state_must_be_an_absolute_path() -> None:
    r = run_python_env(
        "from tests.simdriver import zeraw as zr; zr.Ze()", sim_env(shared_state="rel/x")
    )
    assert r.returncode != 0
    assert "shared_state=rel/x: expected an absolute path" in r.stderr


def test_sysman_disabled_by_config() -> None:
    r = run(
        """
        n = c_uint32(0)
        out(rc=ze.call("zesDeviceEnumMemoryModules", devs[0], byref(n), None))
        """,
        sysman=0,
    )
    assert r["rc"] == zeraw.UNINITIALIZED


# ----------------------------------------------------------------- kernels

KERNELS = """
import numpy as np
KERNEL_ARGS = {"l0mem_f32_to_bf16": 3, "l0mem_bf16_add_to_f32": 3, "l0mem_f32_add": 3, "other": 2}
spirv = SPIRV if "SPIRV" in globals() else zr.spirv_module(KERNEL_ARGS)
ctx = ze.context()
cl = ze.immediate_list(ctx, devs[0])
rc, mod, log = ze.module_rc(ctx, devs[0], spirv)
ze.check("module", rc)
n = c_uint32(0)
ze.check("names", ze.lib.zeModuleGetKernelNames(mod, byref(n), None))
names = (ctypes.c_char_p * n.value)()
ze.check("names", ze.lib.zeModuleGetKernelNames(mod, byref(n), names))
kernel_names = sorted(x.decode() for x in names)

def kernel(name, group=64):
    rc, k = ze.kernel_rc(mod, name)
    ze.check(name, rc)
    ze.check("group", ze.lib.zeKernelSetGroupSize(k, group, 1, 1))
    return k

def dev_array(arr):
    p = ze.alloc_device(ctx, devs[0], arr.nbytes)
    zr.write(p, arr.tobytes())
    return p

def host_array(p, dtype, count):
    return np.frombuffer(zr.read(p, count * np.dtype(dtype).itemsize), dtype=dtype).copy()

rng = np.random.default_rng(7)
count = 1000
specials = np.array([1.0, -2.5, 3.14159, np.inf, -np.inf, 0.0, -0.0, 1e-40], dtype=np.float32)
bits = np.concatenate([specials.view(np.uint32),
                       np.array([0x7FC00001, 0xFFA00000, 0x3F808000, 0x3F818000, 0x7F7FFFFF], dtype=np.uint32)])
f32 = np.concatenate([bits.view(np.float32), rng.standard_normal(count - bits.size).astype(np.float32) * 100])

# f32 -> bf16, full launch: 16 groups of 64 cover 1000 elements (and 24 idle work-items).
src = dev_array(f32)
dst = dev_array(np.full(count, 0xBEEF, dtype=np.uint16))
k = kernel("l0mem_f32_to_bf16")
ze.set_arg(k, 0, src); ze.set_arg(k, 1, dst); ze.set_arg(k, 2, count)
ze.check("launch", ze.launch_rc(cl, k, (16, 1, 1)))
bf16 = host_array(dst, np.uint16, count)

# bf16 + f32 accumulate, partial launch: 10 groups of 64 reach only 640 elements.
acc0 = rng.standard_normal(count).astype(np.float32)
acc = dev_array(acc0)
k2 = kernel("l0mem_bf16_add_to_f32")
ze.set_arg(k2, 0, dst); ze.set_arg(k2, 1, acc); ze.set_arg(k2, 2, count)
ze.check("launch", ze.launch_rc(cl, k2, (10, 1, 1)))
acc1 = host_array(acc, np.float32, count)

# f32 + f32 with a kernel-timestamp event.
a0 = rng.standard_normal(count).astype(np.float32)
b = dev_array(a0)
k3 = kernel("l0mem_f32_add", group=100)
ze.set_arg(k3, 0, src); ze.set_arg(k3, 1, b); ze.set_arg(k3, 2, count)
pool = ze.event_pool(ctx, 1, zr.EVENT_POOL_FLAG_HOST_VISIBLE | zr.EVENT_POOL_FLAG_KERNEL_TIMESTAMP)
ev = ze.event(pool, 0)
ze.check("launch", ze.launch_rc(cl, k3, (10, 1, 1), ev))
ts = zr.KernelTimestampResult()
ze.check("ts", ze.lib.zeEventQueryKernelTimestamp(ev, byref(ts)))
sum1 = host_array(b, np.float32, count)
launches = sim.kernel_launches()

# Error paths.
k4 = kernel("l0mem_f32_add")
ze.set_arg(k4, 0, src)
missing = ze.launch_rc(cl, k4, (1, 1, 1))
v = c_uint32(1)
bad_size = ze.call("zeKernelSetArgumentValue", k4, 2, c_size_t(4), byref(v))
bad_index = ze.call("zeKernelSetArgumentValue", k4, 3, c_size_t(8), byref(c_uint64(1)))
ze.set_arg(k4, 1, b); ze.set_arg(k4, 2, count + 1)
outside = ze.launch_rc(cl, k4, (count + 1, 1, 1))
rc_other, ko = ze.kernel_rc(mod, "other")
kp = zr.KernelProperties(stype=zr.ST_KERNEL_PROPERTIES)
ze.check("kprops", ze.lib.zeKernelGetProperties(ko, byref(kp)))
ze.set_arg(ko, 0, src); ze.set_arg(ko, 1, 0)
other_launch = ze.launch_rc(cl, ko, (1, 1, 1))
unknown = ze.kernel_rc(mod, "nope")[0]
bad_rc, _, bad_log = ze.module_rc(ctx, devs[0], b"\\x00" * 64)
out(
    names=kernel_names, bf16=bf16.tolist(), f32_bits=f32.view(np.uint32).tolist(),
    acc0=acc0.tolist(), acc1=acc1.tolist(), a0=a0.tolist(), sum1=sum1.tolist(),
    ts=[ts.global_.kernelStart, ts.global_.kernelEnd], launches=launches,
    missing=missing, bad_size=bad_size, bad_index=bad_index, outside=outside,
    other_args=kp.numKernelArgs, rc_other=rc_other, other_launch=other_launch,
    unknown=unknown, bad_rc=bad_rc, bad_log=bad_log, final_launches=sim.kernel_launches(),
)
"""


def bf16_reference(bits: int) -> int:
    """Round float32 bits to bfloat16 bits: nearest, ties to even; NaN stays a quiet NaN."""
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return (bits >> 16) | 0x0040
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def check_kernel_results(r: dict[str, Any]) -> None:
    """Assert the kernel scenario's results against independent references."""
    import numpy as np

    assert r["names"] == sorted(
        ["l0mem_f32_to_bf16", "l0mem_bf16_add_to_f32", "l0mem_f32_add", "other"]
    )
    bf16 = np.array(r["bf16"], dtype=np.uint16)
    f32_bits = np.array(r["f32_bits"], dtype=np.uint32)
    assert [int(x) for x in bf16] == [bf16_reference(int(b)) for b in f32_bits]
    # Spot checks that pin the rounding rule itself: ties go to the even mantissa.
    tie_down, tie_up = int(bf16[10]), int(bf16[11])
    assert (tie_down, tie_up) == (0x3F80, 0x3F82)
    assert int(bf16[8]) == 0x7FC0 and int(bf16[9]) == 0xFFE0  # quiet NaNs keep their sign
    assert int(bf16[12]) == 0x7F80  # FLT_MAX rounds up to infinity

    acc0 = np.array(r["acc0"], dtype=np.float32)
    acc1 = np.array(r["acc1"], dtype=np.float32)
    widened = (bf16.astype(np.uint32) << 16).view(np.float32)
    expected = acc0.copy()
    expected[:640] = acc0[:640] + widened[:640]
    assert np.array_equal(acc1[:640], expected[:640], equal_nan=True)
    assert np.array_equal(acc1[640:], acc0[640:])  # beyond the launched work-items: untouched

    a0 = np.array(r["a0"], dtype=np.float32)
    sum1 = np.array(r["sum1"], dtype=np.float32)
    with np.errstate(invalid="ignore"):  # the inputs include a signalling NaN
        expected_sum = a0 + f32_bits.view(np.float32)
    assert np.array_equal(sum1, expected_sum, equal_nan=True)

    start, end = r["ts"]
    assert end >= start
    assert r["launches"] == 3
    assert r["missing"] == zeraw.INVALID_ARGUMENT
    assert r["bad_size"] == zeraw.INVALID_KERNEL_ARGUMENT_SIZE
    assert r["bad_index"] == zeraw.INVALID_KERNEL_ARGUMENT_INDEX
    assert r["outside"] == zeraw.INVALID_ARGUMENT  # n + 1 elements run past the allocation
    assert r["rc_other"] == zeraw.SUCCESS and r["other_args"] == 2
    assert r["other_launch"] == zeraw.UNSUPPORTED_FEATURE
    assert r["unknown"] == zeraw.INVALID_KERNEL_NAME
    assert r["bad_rc"] == zeraw.MODULE_BUILD_FAILURE and "magic" in r["bad_log"]
    assert r["final_launches"] == 3


def test_kernels_compute_reference_values_and_partial_launches() -> None:
    check_kernel_results(run(KERNELS))


OPENCL_KERNELS = r"""
__kernel void l0mem_f32_to_bf16(__global const float *src, __global ushort *dst, ulong n) {
    size_t i = get_global_id(0);
    if (i < n) {
        uint b = as_uint(src[i]);
        dst[i] = (b & 0x7fffffffu) > 0x7f800000u ? (ushort)((b >> 16) | 0x40u)
                                                : (ushort)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    }
}
__kernel void l0mem_bf16_add_to_f32(__global const ushort *src, __global float *acc, ulong n) {
    size_t i = get_global_id(0);
    if (i < n) acc[i] += as_float((uint)src[i] << 16);
}
__kernel void l0mem_f32_add(__global const float *src, __global float *acc, ulong n) {
    size_t i = get_global_id(0);
    if (i < n) acc[i] += src[i];
}
__kernel void other(__global float *a, __global float *b) { a[0] = b[0]; }
"""


def test_kernels_from_clang_built_spirv(tmp_path: Path) -> None:
    clang, translator = shutil.which("clang-15"), shutil.which("llvm-spirv-15")
    assert clang and translator, "clang-15 and llvm-spirv-15 are part of the dev setup (.ci/dev)"
    src = tmp_path / "k.cl"
    src.write_text(OPENCL_KERNELS)
    bc, spv = tmp_path / "k.bc", tmp_path / "k.spv"
    subprocess.run(
        [
            clang,
            "-cl-std=CL2.0",
            "-target",
            "spir64",
            "-O2",
            "-c",
            "-emit-llvm",
            "-o",
            str(bc),
            str(src),
        ],
        check=True,
    )
    subprocess.run([translator, str(bc), "-o", str(spv)], check=True)
    check_kernel_results(run(f"SPIRV = open({str(spv)!r}, 'rb').read()\n" + KERNELS))


def test_runtime_set_rejects_what_cannot_change() -> None:
    r = run(
        """
        errors = []
        for key, value in [("devices", 4), ("peers", "0>7"), ("mirror", "maybe"), ("device_memory", "lots")]:
            try:
                sim.set(key, value)
            except ValueError as e:
                errors.append(key)
        sim.set("device_memory", "2M")
        rc = ze.alloc_device_rc(ze.context(), devs[0], 3 << 20)[0]
        out(errors=errors, rc=rc, n=len(ze.devices()))
        """
    )
    assert r["errors"] == ["devices", "peers", "mirror", "device_memory"]
    assert r["rc"] == zeraw.OUT_OF_DEVICE_MEMORY
    assert r["n"] == 2
    assert r["_stderr"].count("zesim: zesim_set:") == 4


@pytest.mark.parametrize("layer", ["ZE_ENABLE_VALIDATION_LAYER", "ZE_ENABLE_LOADER_INTERCEPT"])
def test_works_under_validation_layer_and_loader_intercept(layer: str) -> None:
    code = PRELUDE + textwrap.dedent(
        """
        ctx = ze.context()
        h = ze.alloc_host(ctx, 4096)
        d = ze.alloc_device(ctx, devs[1], 4096)
        zr.write(h, bytes(range(256)) * 16)
        cl = ze.immediate_list(ctx, devs[1])
        ze.copy(cl, d, h, 4096)
        ze.fill(cl, h, b"\\0", 4096)
        ze.copy(cl, h, d, 4096)
        out(ok=zr.read(h, 4096) == bytes(range(256)) * 16, moved=sim.bytes_moved(1, -1))
        """
    )
    env = sim_env()
    env[layer] = "1"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert 'RESULT {"ok": true, "moved": 4096}' in proc.stdout


# ------------------------------- driver variables: affinity mask and NEO keys

DEVICES_SEEN = """
ctx = ze.context()
names = [ze.device_properties(d).name.decode() for d in devs]
used = []
if devs:
    d = ze.alloc_device(ctx, devs[0], 1 << 20)
    used = [sim.device_used(i) for i in range(4)]
    ze.free(ctx, d)
mem = []
for d in devs:
    n = c_uint32(0)
    ze.check("mods", ze.lib.zesDeviceEnumMemoryModules(d, byref(n), None))
    mem.append(n.value)
out(names=names, used=used, mem=mem)
"""


@pytest.mark.parametrize(
    ("mask", "physical", "ignored"),
    [
        (None, [0, 1, 2, 3], None),
        ("", [0, 1, 2, 3], None),
        (" , ", [0, 1, 2, 3], None),
        ("0", [0], None),
        ("2", [2], None),
        ("1, 3", [1, 3], None),
        # The spec: the reported order is "not affected by the order of devices in the mask".
        ("3,1,3", [1, 3], None),
        ("0.1,2", [2], "0.1"),
        ("9", [], "9"),
        ("x,0", [0], "x"),
    ],
)
def test_affinity_mask_selects_and_renumbers_devices(
    mask: str | None, physical: list[int], ignored: str | None
) -> None:
    extra = {} if mask is None else {"ZE_AFFINITY_MASK": mask}
    proc = run_python_env(PRELUDE + textwrap.dedent(DEVICES_SEEN), sim_env(extra, devices=4))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    # Device k of zeDeviceGet is the k-th listed configured device; names carry the configured index.
    assert r["names"] == [f"l0mem simulated GPU {i}" for i in physical]
    assert r["mem"] == [1] * len(physical)  # Sysman handles are the visible device handles
    if physical:
        # Ground truth counts by configured index: reported device 0 is configured device physical[0].
        expected = [0] * 4
        expected[physical[0]] = 1 << 20
        assert r["used"] == expected
    if ignored is None:
        assert proc.stderr == ""
    else:
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("zesim: ZE_AFFINITY_MASK="), proc.stderr
        assert f"ignored {ignored}:" in lines[0]


def test_affinity_mask_hides_devices_from_contexts_and_queries() -> None:
    r = run(
        """
        ctx = ze.context()
        # The API never hands out a hidden device; the simulator's devices are one array, so
        # the handle halfway between configured devices 0 and 2 is hidden device 1.
        hidden = c_void_p(devs[0].value + (devs[1].value - devs[0].value) // 2)
        v = c_uint32(0)
        ze.check("peer", ze.lib.zeDeviceCanAccessPeer(devs[0], devs[1], byref(v)))
        rc_alloc = ze.alloc_device_rc(ctx, hidden, 4096)[0]
        rc_props = ze.call("zeDeviceGetProperties", hidden, byref(zr.DeviceProperties(stype=zr.ST_DEVICE_PROPERTIES)))
        h = ze.alloc_host(ctx, 4096)
        d1 = ze.alloc_device(ctx, devs[1], 4096)
        cl = ze.immediate_list(ctx, devs[1])
        ze.copy(cl, d1, h, 4096)
        out(n=len(devs), peer=v.value & 0xff, rc_alloc=rc_alloc, rc_props=rc_props,
            moved=[sim.bytes_moved(-1, i) for i in range(3)])
        """,
        {"ZE_AFFINITY_MASK": "0,2"},
        devices=3,
        peers="0>2",
    )
    assert r["n"] == 2
    assert r["peer"] == 1  # reported devices 0 and 1 are configured 0 and 2: peers=0>2 applies
    assert r["rc_alloc"] == zeraw.INVALID_ARGUMENT
    assert r["rc_props"] == zeraw.INVALID_ARGUMENT
    assert r["moved"] == [0, 0, 4096]


@pytest.mark.parametrize(
    ("extra", "expected", "warning"),
    [
        ({}, "matrix", None),
        ({"ForceZeDeviceCanAccessPerReturnValue": "0"}, "matrix", None),
        ({"NEOReadDebugKeys": "0", "ForceZeDeviceCanAccessPerReturnValue": "0"}, "matrix", None),
        ({"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "-1"}, "matrix", None),
        ({"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "0"}, 0, None),
        ({"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "1"}, 1, None),
        (
            {"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "no"},
            "matrix",
            "ForceZeDeviceCanAccessPerReturnValue=no",
        ),
        (
            {"NEOReadDebugKeys": "yes", "ForceZeDeviceCanAccessPerReturnValue": "0"},
            "matrix",
            "NEOReadDebugKeys=yes",
        ),
    ],
)
def test_neo_key_overrides_can_access_peer_only_with_read_debug_keys(
    extra: dict[str, str], expected: int | str, warning: str | None
) -> None:
    r = run(
        PEER_MATRIX,
        extra,
        devices=3,
        peers="0>1,2>0",
    )
    matrix = {"00", "11", "22", "01", "20"}
    both = zeraw.P2P_FLAG_ACCESS | zeraw.P2P_FLAG_ATOMICS
    for key, value in r["acc"].items():
        # Like Intel's driver, the override applies to a device paired with itself too.
        allowed = key in matrix if expected == "matrix" else bool(expected)
        assert value == int(allowed), key
        assert r["flags"][key] == (both if allowed else 0), key
        assert (r["bw"][key] > 0) == allowed, key
    if warning is None:
        assert r["_stderr"] == ""
    else:
        assert r["_stderr"].strip() == f"zesim: {warning}: not an integer, ignored"


WORKAROUND = """
size = 4 << 20
res = {}
for mode in ("peer-resident", "dmabuf", "all"):
    sim.set("mirror", mode)
    ctx = ze.context()
    d = ze.alloc_device(ctx, devs[0], size, export=(mode == "dmabuf"))
    # Residency on a peer is legal whatever zeDeviceCanAccessPeer says.
    rcs = [ze.call("zeContextMakeMemoryResident", ctx, p, c_void_p(d), c_size_t(size)) for p in devs[1:]]
    held = sim.mirror_bytes()
    blocks = None
    if mode == "dmabuf":
        fd = ze.alloc_properties(ctx, d, export_fd=True)[2]
        blocks = os.fstat(fd).st_blocks * 512
        os.close(fd)
    for p in devs[1:]:
        ze.evict(ctx, p, d, size)
    ze.free(ctx, d)
    ze.check("destroy", ze.lib.zeContextDestroy(ctx))
    res[mode] = {"held": held, "rcs": rcs, "blocks": blocks, "left": sim.mirror_bytes()}
out(n=len(devs), res=res)
"""

NEO = {"NEOReadDebugKeys": "1"}
NO_PEER = {"ForceZeDeviceCanAccessPerReturnValue": "0"}
NO_DEFER = {"EnableDeferBacking": "0"}
ALL_MODES = {"peer-resident", "dmabuf", "all"}
AT_ALLOCATION = {"dmabuf", "all"}


@pytest.mark.parametrize(
    ("extra", "config", "mirrored"),
    [
        pytest.param({}, {}, ALL_MODES, id="no-workaround"),
        pytest.param({"ZE_AFFINITY_MASK": "0"}, {}, AT_ALLOCATION, id="affinity-0"),
        pytest.param({"ZE_AFFINITY_MASK": "1"}, {}, AT_ALLOCATION, id="affinity-1"),
        pytest.param({**NEO, **NO_PEER}, {}, AT_ALLOCATION, id="neo-no-peer-access"),
        pytest.param(NO_PEER, {}, ALL_MODES, id="no-peer-access-without-neo"),
        pytest.param(
            {**NEO, "ForceZeDeviceCanAccessPerReturnValue": "1"},
            {"peers": "none"},
            ALL_MODES,
            id="neo-forced-peer-access",
        ),
        pytest.param({}, {"peers": "none"}, AT_ALLOCATION, id="peers-none"),
        # The peer (device 1) must be able to access the owner's (device 0) memory.
        pytest.param({}, {"peers": "1>0"}, ALL_MODES, id="peer-can-access-owner"),
        pytest.param({}, {"peers": "0>1"}, AT_ALLOCATION, id="owner-can-access-peer-only"),
        pytest.param({**NEO, **NO_DEFER}, {}, set(), id="neo-no-defer-backing"),
        pytest.param(NO_DEFER, {}, ALL_MODES, id="no-defer-backing-without-neo"),
        pytest.param(
            {"NEOReadDebugKeys": "0", **NO_DEFER}, {}, ALL_MODES, id="no-defer-backing-neo-0"
        ),
        pytest.param(
            {**NEO, **NO_DEFER},
            {"defer_backing_mirror": 0},
            ALL_MODES,
            id="no-defer-backing-not-modelled",
        ),
        pytest.param({**NEO, "EnableDeferBacking": "1"}, {}, ALL_MODES, id="neo-defer-backing-on"),
    ],
)
def test_workarounds_remove_the_mirror_where_they_should(
    extra: dict[str, str], config: dict[str, object], mirrored: set[str]
) -> None:
    r = run(WORKAROUND, extra, **config)
    size = 4 << 20
    assert r["n"] == (1 if "ZE_AFFINITY_MASK" in extra else 2)
    for mode, res in r["res"].items():
        assert res["held"] == (size if mode in mirrored else 0), mode
        assert res["rcs"] == [zeraw.SUCCESS] * (r["n"] - 1), mode
        assert res["left"] == 0, mode
        if mode == "dmabuf":
            # The exported fd holds the mirror's pages, or none when there is no mirror.
            assert res["blocks"] == (size if mode in mirrored else 0)
    assert r["_stderr"] == ""


def test_peer_resident_mirror_follows_the_peers_that_can_access_the_owner() -> None:
    r = run(
        """
        size = 1 << 20
        ctx = ze.context()
        steps = []
        def step(what, dev, fn):
            fn(ctx, devs[dev], d, size)
            steps.append([what, dev, sim.mirror_bytes()])
        d = ze.alloc_device(ctx, devs[0], size)
        step("resident", 2, ze.make_resident)  # device 2 cannot access device 0: no mirror
        step("resident", 1, ze.make_resident)  # device 1 can: mirrored
        step("evict", 1, ze.evict)  # device 2 is still resident but has no access: released
        step("resident", 1, ze.make_resident)
        step("evict", 2, ze.evict)  # device 1 still holds it
        step("evict", 1, ze.evict)
        sim.set("defer_backing_mirror", 0)  # no effect without EnableDeferBacking=0
        step("resident", 1, ze.make_resident)
        step("evict", 1, ze.evict)
        out(steps=steps)
        """,
        devices=3,
        peers="1>0",
        mirror="peer-resident",
    )
    mib = 1 << 20
    assert r["steps"] == [
        ["resident", 2, 0],
        ["resident", 1, mib],
        ["evict", 1, 0],
        ["resident", 1, mib],
        ["evict", 2, mib],
        ["evict", 1, 0],
        ["resident", 1, mib],
        ["evict", 1, 0],
    ]


def test_defer_backing_mirror_can_change_at_run_time() -> None:
    r = run(
        """
        ctx = ze.context()
        held = []
        for value in (1, 0, 1):
            sim.set("defer_backing_mirror", value)
            d = ze.alloc_device(ctx, devs[0], 1 << 20)
            held.append(sim.mirror_bytes())
            ze.free(ctx, d)
        errors = 0
        try:
            sim.set("defer_backing_mirror", "maybe")
        except ValueError:
            errors += 1
        out(held=held, errors=errors)
        """,
        {**NEO, **NO_DEFER},
        mirror="all",
    )
    assert r["held"] == [0, 1 << 20, 0]
    assert r["errors"] == 1
    assert r["_stderr"].count("zesim: zesim_set: defer_backing_mirror=maybe") == 1


def test_sim_env_passes_driver_variables_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZE_AFFINITY_MASK", "1")
    monkeypatch.setenv("NEOReadDebugKeys", "1")
    env = sim_env()
    assert "ZE_AFFINITY_MASK" not in env and "NEOReadDebugKeys" not in env
    env = sim_env({"ZE_AFFINITY_MASK": "0", "EnableDeferBacking": "0"}, devices=3)
    assert env["ZE_AFFINITY_MASK"] == "0"
    assert env["EnableDeferBacking"] == "0"
    assert env["ZESIM_DEVICES"] == "3"
    assert "NEOReadDebugKeys" not in env
    with pytest.raises(ValueError, match="ZESIM_DEVICES"):
        sim_env({"ZESIM_DEVICES": "2"})


# ------------------------------------------------------------ sub-devices

SUBDEVICE_TOPOLOGY = """
def props(d):
    p = ze.device_properties(d)
    return {"flags": p.flags, "id": p.subdeviceId, "uuid": bytes(p.uuid).hex(), "name": p.name.decode(),
            "maxalloc": p.maxMemAllocSize, "total": ze.memory_total(d)}
def pci(d):
    p = zr.PciExtProperties(stype=zr.ST_PCI_EXT_PROPERTIES)
    ze.check("pci", ze.lib.zeDevicePciGetPropertiesExt(d, byref(p)))
    return p.address.bus
def peer(a, b):
    v = c_uint32(0)
    ze.check("peer", ze.lib.zeDeviceCanAccessPeer(a, b, byref(v)))
    return v.value & 0xff
subs = [ze.sub_devices(d) for d in devs]
# A short array gets the first handles; a long one gets them all and the true count.
n = c_uint32(2)
short = (c_void_p * 2)()
ze.check("short", ze.lib.zeDeviceGetSubDevices(devs[0], byref(n), short))
n_long = c_uint32(5)
long_ = (c_void_p * 5)()
ze.check("long", ze.lib.zeDeviceGetSubDevices(devs[0], byref(n_long), long_))
zp = zr.ZesDeviceProperties(stype=zr.ZES_ST_DEVICE_PROPERTIES)
ze.check("zes", ze.lib.zesDeviceGetProperties(subs[1][2], byref(zp)))
out(
    roots=[props(d) for d in devs],
    subs=[[props(s) for s in row] for row in subs],
    handles=[[s.value for s in row] for row in subs],
    root_handles=[d.value for d in devs],
    again=[s.value for s in ze.sub_devices(devs[0])],
    short=[n.value, list(short)], long=[n_long.value, list(long_)[:3]],
    nested=[len(ze.sub_devices(s)) for row in subs for s in row],
    bus=[[pci(s) for s in row] for row in subs],
    same_card=[peer(subs[0][0], subs[0][1]), peer(subs[0][2], subs[0][0]), peer(subs[0][1], devs[0])],
    cross=[peer(subs[0][0], subs[1][0]), peer(subs[1][0], subs[0][0]), peer(subs[0][1], devs[1])],
    zes=[zp.numSubdevices, zp.core.flags, zp.core.name.decode()],
)
"""


def test_subdevices_are_reported_with_their_own_handles_and_properties() -> None:
    # 3 GiB + 2 bytes does not split evenly in 3: the first tiles take the leftover bytes.
    total = 3 * (1 << 30) + 2
    r = run(SUBDEVICE_TOPOLOGY, subdevices=3, device_memory=str(total), peers="0>1")
    shares = [(1 << 30) + 1, (1 << 30) + 1, 1 << 30]
    flag = zeraw.DEVICE_PROPERTY_FLAG_SUBDEVICE
    for i, (root, row) in enumerate(zip(r["roots"], r["subs"], strict=True)):
        assert not root["flags"] & flag
        assert root["total"] == root["maxalloc"] == total
        assert [s["id"] for s in row] == [0, 1, 2]
        assert all(s["flags"] & flag for s in row)
        assert [s["total"] for s in row] == shares
        assert sum(s["total"] for s in row) == root["total"]
        assert [s["maxalloc"] for s in row] == shares
        # Tiles carry their card's name, as Intel's driver does; the UUID tells them apart.
        assert {s["name"] for s in row} == {root["name"]} == {f"l0mem simulated GPU {i}"}
    uuids = [d["uuid"] for d in r["roots"]] + [s["uuid"] for row in r["subs"] for s in row]
    assert len(set(uuids)) == 8
    handles = r["root_handles"] + [h for row in r["handles"] for h in row]
    assert len(set(handles)) == 8
    assert r["again"] == r["handles"][0]  # the same handles in the same order on every call
    assert r["short"] == [2, r["handles"][0][:2]]
    assert r["long"] == [3, r["handles"][0]]
    assert r["nested"] == [0] * 6  # one level of tiles
    assert r["bus"] == [[0x10] * 3, [0x11] * 3]  # a tile sits on its card's PCI address
    # Spec: sub-devices of one parent can always access each other (and their root);
    # across cards the peers matrix decides, here 0>1 only.
    assert r["same_card"] == [1, 1, 1]
    assert r["cross"] == [1, 0, 1]
    # Sysman answers for the whole card, even through a tile's handle.
    assert r["zes"] == [3, r["roots"][1]["flags"], "l0mem simulated GPU 1"]


def test_subdevices_default_to_none_and_ignore_mask_entries_for_them() -> None:
    r = run(
        """
        zp = zr.ZesDeviceProperties(stype=zr.ZES_ST_DEVICE_PROPERTIES)
        ze.check("zes", ze.lib.zesDeviceGetProperties(devs[0], byref(zp)))
        mods = ze.sysman_memory(devs[0])
        out(subs=[len(ze.sub_devices(d)) for d in devs], zes=zp.numSubdevices,
            mods=[[m.onSubdevice, m.physicalSize] for m, _ in mods], n=len(devs))
        """,
        {"ZE_AFFINITY_MASK": "0.1,1"},
    )
    assert r["subs"] == [0]
    assert r["zes"] == 0
    assert r["mods"] == [[0, 8 << 30]]
    assert r["n"] == 1
    assert "ignored 0.1:" in r["_stderr"] and "has no sub-devices" in r["_stderr"]
    masked = run(
        "out(n=len(devs), subs=len(ze.sub_devices(devs[0])))",
        {"ZE_AFFINITY_MASK": "0.1,1"},
        subdevices=2,
    )
    # Selecting tiles by mask is not modelled: the entry is ignored, and says so.
    assert masked["n"] == 1 and masked["subs"] == 2
    assert "ignored 0.1:" in masked["_stderr"]
    assert "does not select sub-devices by mask" in masked["_stderr"]


SUBDEVICE_MEMORY = """
subs = ze.sub_devices(devs[0])
ctx = ze.context()
def used():
    return [sim.device_used(0), sim.subdevice_used(0, 0), sim.subdevice_used(0, 1), sim.device_used(1)]
def sysman(d):
    return [[m.onSubdevice, m.subdeviceId, m.physicalSize, s.size, s.free] for m, s in ze.sysman_memory(d)]
steps = {}
a = ze.alloc_device(ctx, subs[0], 20 * MIB)
steps["sub0"] = used()
steps["sub0_too_big"] = ze.alloc_device_rc(ctx, subs[0], 12 * MIB + 1)[0]
b = ze.alloc_device(ctx, subs[0], 12 * MIB)
steps["sub0_full"] = used()
# A root allocation is spread evenly over the tiles: tile 0 has no room for its half.
steps["root_no_room"] = ze.alloc_device_rc(ctx, devs[0], 2 * MIB)[0]
c = ze.alloc_device(ctx, subs[1], 20 * MIB)
ze.free(ctx, a)
steps["after_free"] = used()
d = ze.alloc_device(ctx, devs[0], 20 * MIB + 3)
steps["root"] = used()
steps["sysman_root"] = sysman(devs[0])
steps["sysman_via_tile"] = sysman(subs[1])
owners = [ze.alloc_properties(ctx, p)[1].value for p in (b, c, d)]
steps["owners"] = [o == h.value for o, h in zip(owners, [subs[0], subs[1], devs[0]])]
# The root's capacity is the sum of its tiles': 12 + 20 + 20 MiB + 3 bytes live, 12 MiB - 3 left.
steps["root_over"] = ze.alloc_device_rc(ctx, devs[0], 12 * MIB)[0]
for p in (b, c, d):
    ze.free(ctx, p)
steps["freed"] = used()
# Destroying a context frees its allocations on tiles too.
ctx2 = ze.context([subs[1]])
ze.alloc_device(ctx2, subs[1], 5 * MIB)
steps["ctx2"] = used()
ze.check("destroy", ze.lib.zeContextDestroy(ctx2))
steps["ctx2_gone"] = used()
# The fail_oom_after budget is per card: tile allocations count against their root's.
sim.set("fail_oom_after", "6M")
steps["budget"] = [ze.alloc_device_rc(ctx, subs[0], 4 * MIB)[0], ze.alloc_device_rc(ctx, subs[1], 4 * MIB)[0],
                   ze.alloc_device_rc(ctx, devs[1], 4 * MIB)[0]]
try:
    sim.set("subdevices", 4)
    steps["runtime_set"] = "accepted"
except ValueError:
    steps["runtime_set"] = "rejected"
out(**steps)
"""


def test_subdevice_memory_is_split_and_counted_on_tile_and_root() -> None:
    r = run("MIB = 1 << 20\n" + SUBDEVICE_MEMORY, subdevices=2, device_memory="64M")
    ok, oom = zeraw.SUCCESS, zeraw.OUT_OF_DEVICE_MEMORY
    half = 32 * MIB
    # [root 0, tile 0, tile 1, root 1]
    assert r["sub0"] == [20 * MIB, 20 * MIB, 0, 0]
    assert r["sub0_too_big"] == oom
    assert r["sub0_full"] == [32 * MIB, 32 * MIB, 0, 0]
    assert r["root_no_room"] == oom
    assert r["after_free"] == [32 * MIB, 12 * MIB, 20 * MIB, 0]
    # 20 MiB + 3 bytes over two tiles: tile 0 takes the odd byte.
    assert r["root"] == [52 * MIB + 3, 22 * MIB + 2, 30 * MIB + 1, 0]
    tiles = [[1, 0, half, half, half - (22 * MIB + 2)], [1, 1, half, half, half - (30 * MIB + 1)]]
    assert r["sysman_root"] == tiles  # one module per tile, as on multi-tile cards
    assert r["sysman_via_tile"] == tiles
    assert r["owners"] == [True, True, True]
    assert r["root_over"] == oom
    assert r["freed"] == [0, 0, 0, 0]
    assert r["ctx2"] == [5 * MIB, 0, 5 * MIB, 0]
    assert r["ctx2_gone"] == [0, 0, 0, 0]
    assert r["budget"] == [ok, oom, ok]
    assert r["runtime_set"] == "rejected"
    assert "subdevices cannot change after zeInit" in r["_stderr"]


def test_contexts_queues_and_data_on_subdevices() -> None:
    r = run(
        """
        import numpy as np
        s0, s1 = ze.sub_devices(devs[0])
        t0, _ = ze.sub_devices(devs[1])
        # A context over root 0 may use its tiles (spec: "the device, or its sub-devices").
        ctx = ze.context([devs[0]])
        rc_tile = ze.alloc_device_rc(ctx, s1, 4096)[0]
        rc_other_card = ze.alloc_device_rc(ctx, t0, 4096)[0]
        # A context over one tile may use that tile only, not its sibling or its root.
        only = ze.context([s0])
        rc_only = [ze.alloc_device_rc(only, d, 4096)[0] for d in (s0, s1, devs[0])]
        resident_sibling = ze.call("zeContextMakeMemoryResident", only, s1,
                                   c_void_p(ze.alloc_device(only, s0, 4096)), c_size_t(4096))

        full = ze.context()
        size = (1 << 20) + 5
        data = os.urandom(size)
        h_in, h_out = ze.alloc_host(full, size), ze.alloc_host(full, size)
        a, b, c = (ze.alloc_device(full, d, size) for d in (s0, s1, t0))
        zr.write(h_in, data)
        cl = ze.immediate_list(full, s1)
        ze.copy(cl, a, h_in, size)
        ze.copy(cl, b, a, size)
        ze.copy(cl, c, b, size)
        ze.copy(cl, h_out, c, size)
        ze.fill(cl, b, bytes([0x5A, 0xA5]), 4096)
        filled = zr.read(b, 4096)

        # A regular list runs only on a queue of its own tile.
        reg = ze.regular_list(full, s0)
        ze.copy(reg, h_out, a, 64)
        ze.check("close", ze.lib.zeCommandListClose(reg))
        lists = (c_void_p * 1)(reg.value)
        wrong_queue = ze.call("zeCommandQueueExecuteCommandLists", ze.queue(full, s1), 1, lists, None)
        right_queue = ze.call("zeCommandQueueExecuteCommandLists", ze.queue(full, s0), 1, lists, None)

        # A kernel built for a tile adds arrays held on both tiles of the card.
        n = 1000
        x = np.arange(n, dtype=np.float32)
        y = np.full(n, 0.5, dtype=np.float32)
        px, py = ze.alloc_device(full, s0, x.nbytes), ze.alloc_device(full, s1, y.nbytes)
        zr.write(px, x.tobytes()); zr.write(py, y.tobytes())
        rc, mod, _ = ze.module_rc(full, s1, zr.spirv_module({"l0mem_f32_add": 3}))
        ze.check("module", rc)
        rc, k = ze.kernel_rc(mod, "l0mem_f32_add")
        ze.check("kernel", rc)
        ze.check("group", ze.lib.zeKernelSetGroupSize(k, 100, 1, 1))
        ze.set_arg(k, 0, px); ze.set_arg(k, 1, py); ze.set_arg(k, 2, n)
        ze.check("launch", ze.launch_rc(cl, k, (10, 1, 1)))
        summed = np.frombuffer(zr.read(py, y.nbytes), dtype=np.float32)
        out(
            rc_tile=rc_tile, rc_other_card=rc_other_card, rc_only=rc_only,
            resident_sibling=resident_sibling,
            same=zr.read(h_out, size) == data, filled=filled == bytes([0x5A, 0xA5]) * 2048,
            # Ground truth counts bytes by card: tile-to-tile copies stay on card 0.
            moved=[sim.bytes_moved(-1, 0), sim.bytes_moved(0, 0), sim.bytes_moved(0, 1),
                   sim.bytes_moved(1, -1), sim.bytes_moved(0, -1)],
            queues=[wrong_queue, right_queue],
            summed=bool(np.array_equal(summed, x + y)), launches=sim.kernel_launches(),
        )
        """,
        subdevices=2,
        device_memory="256M",
    )
    ok, bad = zeraw.SUCCESS, zeraw.INVALID_ARGUMENT
    assert r["rc_tile"] == ok and r["rc_other_card"] == bad
    assert r["rc_only"] == [ok, bad, bad]
    assert r["resident_sibling"] == bad  # the sibling is not a device of that context
    assert r["same"] and r["filled"]
    size = (1 << 20) + 5
    assert r["moved"] == [size, size, size, size, 64]
    assert r["queues"] == [bad, ok]
    assert r["summed"] and r["launches"] == 1


@pytest.mark.parametrize(
    ("peers", "expected_mib"),
    [("all", [0, 0, 1, 1, 1, 0]), ("none", [0, 0, 0, 0, 0, 0])],
)
def test_peer_resident_mirror_needs_another_card(peers: str, expected_mib: list[int]) -> None:
    # Residency on a sibling tile or on the own root shares the card's memory: no mirror.
    # Residency on another card's tile mirrors, if that card can access the owner's memory.
    r = run(
        """
        s0, s1 = ze.sub_devices(devs[0])
        t0, t1 = ze.sub_devices(devs[1])
        ctx = ze.context()
        p = ze.alloc_device(ctx, s0, 1 << 20)
        seen = []
        for dev in (s1, devs[0], t1):
            ze.make_resident(ctx, dev, p, 1 << 20)
            ze.make_resident(ctx, dev, p, 1 << 20)
            seen.append(sim.mirror_bytes() >> 20)
        ze.make_resident(ctx, t0, p, 1 << 20)
        seen.append(sim.mirror_bytes() >> 20)
        ze.evict(ctx, t1, p, 1 << 20)
        seen.append(sim.mirror_bytes() >> 20)
        ze.evict(ctx, t0, p, 1 << 20)
        seen.append(sim.mirror_bytes() >> 20)
        out(seen=seen)
        """,
        subdevices=2,
        mirror="peer-resident",
        peers=peers,
    )
    # Resident on s1, root 0, t1 (twice each), then t0; evicted from t1, then t0. The mirror
    # stays while any tile of the accessing card holds the allocation and goes with the last.
    assert r["seen"] == expected_mib
