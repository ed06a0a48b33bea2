"""SyclBackend on the SYCL CPU device: contexts, allocation, copies, fill, views, errors."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest
from typing_extensions import Buffer

from l0mem.backends import Backend, DeviceBuffer, Event, SyclBackend, check_fill
from l0mem.backends.kernels import KERNELS, add_f32
from l0mem.backends.select import select_devices
from l0mem.backends.sycl import CPU_GROUPS_PER_UNIT, CPU_MAX_WORK_GROUP_SIZE
from l0mem.backends.sycl_info import default_devices
from l0mem.sycl import load_dpctl

pytestmark = pytest.mark.sycl


@pytest.fixture(scope="module")
def dpctl() -> Any:
    return load_dpctl()


@pytest.fixture
def backend() -> Iterator[SyclBackend]:
    with SyclBackend(["opencl:cpu"]) as b:
        yield b


def _bytes(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8).tobytes()


def _read(b: SyclBackend, buf: DeviceBuffer, n: int | None = None) -> bytes:
    out = bytearray(buf.nbytes if n is None else n)
    b.download(buf, out).wait()
    return bytes(out)


class _Probe:
    """A USM array interface at an arbitrary address, to ask dpctl whether it is allocated."""

    def __init__(self, address: int, queue: Any) -> None:
        self.__sycl_usm_array_interface__ = {
            "data": (address, False),
            "shape": (1,),
            "strides": None,
            "typestr": "|u1",
            "version": 1,
            "syclobj": queue,
        }


def _is_allocated(dpctl: Any, address: int, queue: Any) -> bool:
    try:
        dpctl.memory.MemoryUSMDevice(_Probe(address, queue))
    except ValueError:
        return False
    return True


def test_satisfies_the_backend_protocol(backend: SyclBackend) -> None:
    as_protocol: Backend = backend  # mypy checks the structural match
    buf = as_protocol.allocate(0, 16)
    ev = as_protocol.fill(buf, b"\0")
    assert isinstance(backend, Backend)
    assert isinstance(buf, DeviceBuffer)
    assert isinstance(ev, Event)
    assert backend.name == "sycl"
    assert backend.device_count() == 1
    assert "opencl:cpu:0" in backend.device_name(0)


def test_default_context_is_the_platform_default(backend: SyclBackend) -> None:
    dev = backend.device_of(0)
    assert backend.context_of(0) == dev.sycl_platform.default_context
    assert backend.context_of(0).device_count == len(dev.sycl_platform.get_devices())


def test_single_context_holds_that_device_alone(dpctl: Any) -> None:
    with SyclBackend(["opencl:cpu"], context="single") as b:
        dev = b.device_of(0)
        ctx = b.context_of(0)
        default = dev.sycl_platform.default_context
        assert ctx != default
        assert ctx.device_count == 1
        assert ctx.get_devices()[0] == dev
        buf = b.allocate(0, 4096)
        mem = buf.memory()
        # The allocation is known to its own context only.
        assert mem.get_usm_type(ctx) == "device"
        assert mem.get_usm_type(default) == "unknown"


def test_default_context_allocation_is_device_usm(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 4096)
    mem = buf.memory()
    assert mem.get_usm_type(backend.device_of(0).sycl_platform.default_context) == "device"
    assert buf.address == mem.__sycl_usm_array_interface__["data"][0]


def test_upload_download_roundtrip(backend: SyclBackend) -> None:
    data = _bytes(100_000)
    buf = backend.allocate(0, 100_000)
    backend.upload(buf, data).wait()
    assert _read(backend, buf) == data
    # Partial: only the first bytes are replaced and read back.
    backend.upload(buf, b"hello").wait()
    assert _read(backend, buf, 8) == b"hello" + data[5:8]


def test_upload_accepts_typed_arrays(backend: SyclBackend) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = backend.allocate(0, x.nbytes)
    backend.upload(buf, cast(Buffer, x)).wait()
    out = np.empty_like(x)
    backend.download(buf, cast(Buffer, out)).wait()
    assert np.array_equal(out, x)


def test_direct_copy_on_one_device(backend: SyclBackend) -> None:
    data = _bytes(65_536, seed=1)
    a, b = backend.allocate(0, 65_536), backend.allocate(0, 65_536)
    backend.upload(a, data).wait()
    backend.fill(b, b"\0").wait()
    backend.copy(b, a, 1000).wait()
    got = _read(backend, b)
    assert got[:1000] == data[:1000]
    assert got[1000:] == bytes(65_536 - 1000)
    backend.copy(b, a, staged=True).wait()
    assert _read(backend, b) == data


def test_copy_between_views(backend: SyclBackend) -> None:
    data = _bytes(4096, seed=2)
    a, b = backend.allocate(0, 4096), backend.allocate(0, 4096)
    backend.upload(a, data).wait()
    backend.fill(b, b"\xee").wait()
    backend.copy(b.view(100, 200), a.view(1000, 300), 200).wait()
    got = _read(backend, b)
    assert got[100:300] == data[1000:1200]
    assert got[:100] == b"\xee" * 100 and got[300:] == b"\xee" * (4096 - 300)


def test_two_devices_in_default_context_copy_directly() -> None:
    with SyclBackend(["opencl:cpu", "opencl:cpu"]) as b:
        assert b.same_context(0, 1)
        data = _bytes(10_000, seed=3)
        x, y = b.allocate(0, 10_000), b.allocate(1, 10_000)
        e = b.upload(x, data)
        ev = b.copy(y, x, staged=False, wait_for=[e])
        assert len(ev.dpctl_events) == 1
        down = bytearray(10_000)
        # The copy ran on device 0's queue: device 1's queue must wait for it.
        b.download(y, down, wait_for=[ev]).wait()
        assert bytes(down) == data
        ev = b.copy(x, y, 5, queue_device=1, staged=True)
        assert len(ev.dpctl_events) == 2
        ev.wait()


def test_single_contexts_stage_device_to_device_copies() -> None:
    with SyclBackend(["opencl:cpu", "opencl:cpu"], context="single") as b:
        assert not b.same_context(0, 1)
        data = _bytes(50_000, seed=4)
        x, y = b.allocate(0, 50_000), b.allocate(1, 50_000)
        e = b.upload(x, data)
        with pytest.raises(ValueError, match="one context"):
            b.copy(y, x, staged=False, wait_for=[e])
        ev = b.copy(y, x, wait_for=[e])
        assert len(ev.dpctl_events) == 2, "expected device->host->device"
        down = bytearray(50_000)
        b.download(y, down, wait_for=[ev]).wait()  # an event of another context
        assert bytes(down) == data


def test_sub_devices_in_single_contexts(dpctl: Any) -> None:
    # Direct copies between CPU sub-devices sharing a context do not return with
    # this runtime, so only the staged path is exercised here.
    root = dpctl.SyclDevice("opencl:cpu")
    if root.max_compute_units < 2:
        pytest.fail("the CPU device needs two compute units to be partitioned")
    subs = root.create_sub_devices(partition=1)[:2]
    with SyclBackend(subs, context="single") as b:
        assert "sub-device" in b.device_name(1)
        data = _bytes(4096, seed=5)
        x, y = b.allocate(0, 4096), b.allocate(1, 4096)
        b.upload(x, data).wait()
        b.copy(y, x).wait()
        assert _read(b, y) == data


@pytest.mark.parametrize(
    "pattern", [b"\x7f", b"\x01\x02", b"\0\0\x80\x3f", bytes(range(16)), bytes(range(128))]
)
def test_fill_patterns(backend: SyclBackend, pattern: bytes) -> None:
    n = len(pattern) * 70_001  # larger than the seed block, not a power of two
    buf = backend.allocate(0, n + 10)
    backend.fill(buf, b"\0")
    backend.fill(buf, pattern, n).wait()
    got = _read(backend, buf)
    assert got[:n] == pattern * 70_001
    assert got[n:] == bytes(10)


def test_fill_view(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 1024)
    backend.fill(buf, b"\0").wait()
    backend.fill(buf.view(10, 20), b"\x55\x66").wait()
    got = _read(backend, buf)
    assert got[10:30] == b"\x55\x66" * 10
    assert got[:10] == bytes(10) and got[30:] == bytes(1024 - 30)


@pytest.mark.parametrize(
    ("pattern", "nbytes"),
    [(b"abc", 99), (bytes(256), 256), (b"\1" * 6, 96), (b"abcd", 98), (b"ab", 33)],
)
def test_fill_refuses_what_level_zero_refuses(
    backend: SyclBackend, pattern: bytes, nbytes: int
) -> None:
    buf = backend.allocate(0, 256)
    backend.fill(buf, b"\x11").wait()
    with pytest.raises(ValueError) as refused:
        check_fill(pattern, nbytes)
    with pytest.raises(ValueError) as err:
        backend.fill(buf, pattern, nbytes)
    assert str(err.value) == str(refused.value)
    assert _read(backend, buf) == b"\x11" * 256, "a refused fill must not write"


@pytest.mark.parametrize(("pattern", "nbytes"), [(b"\5", 7), (b"\1\2", 6), (bytes(range(128)), 256)])
def test_fill_accepts_what_level_zero_accepts(
    backend: SyclBackend, pattern: bytes, nbytes: int
) -> None:
    check_fill(pattern, nbytes)
    buf = backend.allocate(0, 256)
    backend.fill(buf, b"\0").wait()
    backend.fill(buf, pattern, nbytes).wait()
    got = _read(backend, buf)
    assert got[:nbytes] == pattern * (nbytes // len(pattern))
    assert got[nbytes:] == bytes(256 - nbytes)


def test_views_address_and_bounds(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 1000)
    v = buf.view(100, 500)
    w = v.view(50, 10)
    assert v.address == buf.address + 100
    assert w.address == buf.address + 150 and w.nbytes == 10 and w.offset == 150
    iface = w.__sycl_usm_array_interface__
    assert iface["data"][0] == w.address and iface["shape"] == (10,)
    backend.upload(w, b"0123456789").wait()
    assert _read(backend, buf)[150:160] == b"0123456789"
    with pytest.raises(ValueError, match="outside"):
        buf.view(990, 20)
    with pytest.raises(ValueError, match="outside"):
        v.view(-1, 5)


def test_size_errors(backend: SyclBackend) -> None:
    small, big = backend.allocate(0, 10), backend.allocate(0, 100)
    with pytest.raises(ValueError, match="upload of 11 bytes"):
        backend.upload(small, bytes(11))
    with pytest.raises(ValueError, match="download of 11 bytes"):
        backend.download(small, bytearray(11))
    with pytest.raises(ValueError, match="does not fit"):
        backend.copy(small, big)
    with pytest.raises(ValueError, match="multiple"):
        backend.fill(big, b"abcd", 98)
    with pytest.raises(ValueError, match="empty"):
        backend.fill(big, b"")
    with pytest.raises(ValueError, match="writable"):
        backend.download(small, b"0123456789")
    with pytest.raises(ValueError, match="positive"):
        backend.allocate(0, 0)
    with pytest.raises(IndexError, match="out of range"):
        backend.allocate(1, 10)


def test_closed_buffer_errors(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 64)
    view = buf.view(0, 8)
    buf.close()
    buf.close()  # idempotent
    assert buf.closed and view.closed
    for call in (
        lambda: backend.upload(buf, b"x"),
        lambda: backend.download(view, bytearray(1)),
        lambda: backend.fill(buf, b"\0"),
        lambda: buf.view(0, 1),
        lambda: view.address,
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_foreign_buffers_are_rejected(backend: SyclBackend) -> None:
    with SyclBackend(["opencl:cpu"]) as other:
        theirs = other.allocate(0, 16)
        with pytest.raises(ValueError, match="another SYCL backend"):
            backend.upload(theirs, b"x")
    with pytest.raises(TypeError, match="SyclBuffer"):
        backend.upload(object(), b"x")  # type: ignore[arg-type]


def test_launch_errors(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 64)
    with pytest.raises(ValueError, match="unknown kernel"):
        backend.launch("l0mem_nope", 0, [buf, buf, 1], 1)
    with pytest.raises(ValueError, match="takes 3 arguments"):
        backend.launch("l0mem_f32_add", 0, [buf, 1], 1)
    with pytest.raises(TypeError, match="must be an int"):
        backend.launch("l0mem_f32_add", 0, [buf, buf, buf], 1)
    with SyclBackend(["opencl:cpu", "opencl:cpu"]) as two:
        a, b = two.allocate(0, 64), two.allocate(1, 64)
        with pytest.raises(ValueError, match="on device 1"):
            two.launch("l0mem_f32_add", 0, [a, b, 1], 1)


class _ForeignBuffer:
    """A buffer of some other backend: it has the protocol's attributes but is no SyclBuffer."""

    nbytes = 64
    device = 0
    address = 0x1000

    def view(self, offset: int, nbytes: int) -> _ForeignBuffer:
        return self

    def close(self) -> None:
        pass


def _bad_launches(backend: SyclBackend, other: SyclBackend) -> list[tuple[list[Any], str]]:
    buf, theirs = backend.allocate(0, 64), other.allocate(0, 64)
    return [
        ([buf, buf, True], "'n' must be an int, got bool"),
        ([buf, buf, 1.0], "'n' must be an int, got float"),
        ([buf, buf, -1], "'n' must be in 0..2\\*\\*64-1"),
        ([buf, buf, 1 << 64], "'n' must be in 0..2\\*\\*64-1"),
        ([buf, 5, 1], "'acc' must be a device buffer, got int"),
        ([b"bytes", buf, 1], "'src' must be a device buffer, got bytes"),
        ([theirs, buf, 1], "'src' belongs to another backend"),
        ([buf, _ForeignBuffer(), 1], "'acc' belongs to another backend"),
        ([buf, buf, 1, 1], "takes 3 arguments, got 4"),
    ]


def test_launch_checks_arguments_against_the_kernel_table(backend: SyclBackend) -> None:
    with SyclBackend(["opencl:cpu"]) as other:
        for args, message in _bad_launches(backend, other):
            with pytest.raises(ValueError, match=message):
                backend.launch("l0mem_f32_add", 0, args, 1)
    with pytest.raises(ValueError, match="global size"):
        backend.launch("l0mem_f32_add", 0, [backend.allocate(0, 64)] * 2 + [1], True)


def test_launchers_reject_other_backends_buffers(backend: SyclBackend) -> None:
    with SyclBackend(["opencl:cpu"]) as other:
        mine, theirs = backend.allocate(0, 64), other.allocate(0, 64)
        with pytest.raises(ValueError, match="'acc' belongs to another backend"):
            add_f32(backend, mine, theirs, 4)
        with pytest.raises(ValueError, match="'src' belongs to another backend"):
            add_f32(other, mine, theirs, 4)
        with pytest.raises(ValueError, match="'src' belongs to another backend"):
            add_f32(backend, _ForeignBuffer(), mine, 4)
    with pytest.raises(ValueError, match="element count must be an int, got bool"):
        add_f32(backend, mine, mine, True)


def test_work_group_size_is_checked_before_any_launch() -> None:
    with SyclBackend(["opencl:cpu"]) as b:
        default = b.work_group_size(0, "l0mem_f32_add")
        limit = b.work_group_limit(0)
        assert limit == min(int(b._kernel(0, name).work_group_size) for name in KERNELS)
        assert limit != default, "the test needs a limit other than the default size"
        b.set_work_group_size(limit)
        assert all(b.work_group_size(0, name) == limit for name in KERNELS)
        with pytest.raises(ValueError, match=f"exceeds the kernels' limit {limit}"):
            b.set_work_group_size(limit + 1)
        assert b.work_group_size(0, "l0mem_f32_add") == limit, "a refused size is not kept"
        b.set_work_group_size(None)
        assert b.work_group_size(0, "l0mem_f32_add") == default
        with pytest.raises(TypeError, match="int"):
            b.set_work_group_size(True)
    with pytest.raises(ValueError, match="exceeds the kernels' limit"):
        SyclBackend(["opencl:cpu"], work_group_size=limit + 1)
    with pytest.raises(ValueError, match="positive"):
        SyclBackend(["opencl:cpu"], work_group_size=0)


_NO_DEVICE = """
import l0mem.sycl as s
import l0mem.backends as b
for devices in (None, ["opencl:cpu"]):
    try:
        b.SyclBackend(devices)
    except s.SyclNoDeviceError as err:
        print(type(err).__name__, isinstance(err, LookupError), err)
    else:
        print("created")
"""


def test_no_sycl_device_is_l0mem_s_no_device_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZE_ENABLE_ALT_DRIVERS"}
    env["OCL_ICD_FILENAMES"] = "/nonexistent.so"
    proc = subprocess.run(
        [sys.executable, "-c", _NO_DEVICE], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert lines[0].startswith("SyclNoDeviceError True no usable SYCL device:")
    assert lines[1] == "SyclNoDeviceError True no SYCL device matches 'opencl:cpu'"


def test_events_time_only_with_profiling(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 1 << 20)
    assert backend.fill(buf, b"\1").elapsed_ns() is None
    with SyclBackend(["opencl:cpu"], profiling=True) as prof:
        pbuf = prof.allocate(0, 1 << 20)
        ns = prof.upload(pbuf, bytes(1 << 20)).elapsed_ns()
        assert ns is not None and ns > 0


def test_close_frees_everything(dpctl: Any) -> None:
    b = SyclBackend(["opencl:cpu"])
    queue = b.queue_of(0)
    buf = b.allocate(0, 1 << 20)
    address = buf.address
    assert _is_allocated(dpctl, address, queue)
    b.close()
    b.close()  # idempotent
    assert buf.closed
    assert not _is_allocated(dpctl, address, queue)
    with pytest.raises(RuntimeError, match="closed"):
        b.allocate(0, 16)


def test_buffer_frees_when_collected_and_on_exit(dpctl: Any, backend: SyclBackend) -> None:
    queue = backend.queue_of(0)
    buf = backend.allocate(0, 1 << 20)
    address = buf.address
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is None
    assert not _is_allocated(dpctl, address, queue)
    with backend.allocate(0, 4096) as scoped:
        address = scoped.address
        assert _is_allocated(dpctl, address, queue)
    assert not _is_allocated(dpctl, address, queue)


def test_in_flight_work_keeps_a_closed_buffer_alive(backend: SyclBackend) -> None:
    src = backend.allocate(0, 1 << 22)
    dst = backend.allocate(0, 1 << 22)
    backend.fill(src, b"\x42").wait()
    ev = backend.copy(dst.view(0, 1 << 22), src.view(0, 1 << 22))
    src.close()  # the copy may still be running; it must not read freed memory
    ev.wait()
    assert _read(backend, dst, 64) == b"\x42" * 64


def test_synchronize_and_close_release_what_enqueued_work_kept(backend: SyclBackend) -> None:
    buf = backend.allocate(0, 1 << 20)
    data = np.full(1 << 18, 7, dtype=np.float32)
    alive = weakref.ref(data)
    backend.upload(buf, data)
    del data
    backend.synchronize(0)
    gc.collect()
    assert alive() is None, "synchronize() drops the host buffers of finished work"
    out = np.empty(1 << 18, dtype=np.float32)
    alive = weakref.ref(out)
    backend.download(buf, out)
    del out
    backend.close()
    gc.collect()
    assert alive() is None, "close() drops them too"


def test_without_devices_the_backend_makes_select_devices_default_choice() -> None:
    _, chosen = select_devices("sycl")
    assert chosen == default_devices()
    with SyclBackend() as b:
        assert [b.device_of(i) for i in range(b.device_count())] == chosen


def test_bad_arguments(dpctl: Any) -> None:
    with pytest.raises(ValueError, match="'default' or 'single'"):
        SyclBackend(["opencl:cpu"], context="multi")  # type: ignore[arg-type]
    with pytest.raises(LookupError, match="no SYCL device matches"):
        SyclBackend(["hip:accelerator"])
    with pytest.raises(ValueError, match="unknown backend"):
        SyclBackend(["vulkan:gpu"])



@pytest.mark.parametrize(("mode", "programs"), [("default", 1), ("single", 2)])
def test_kernels_are_built_once_per_context(mode: str, programs: int) -> None:
    with SyclBackend(["opencl:cpu", "opencl:cpu"], context=mode) as b:  # type: ignore[arg-type]
        for dev in (0, 1):
            for name in ("l0mem_f32_add", "l0mem_f32_to_bf16"):
                assert b.work_group_size(dev, name) >= 1
        assert len(b._programs) == programs


@pytest.mark.parametrize("n", [1, 3000, 32_768, 1_000_003, 1 << 24])
def test_cpu_work_groups_grow_with_the_launch_but_keep_every_unit_busy(
    backend: SyclBackend, n: int
) -> None:
    base = backend.work_group_size(0, "l0mem_f32_to_bf16")
    size = backend.work_group_size(0, "l0mem_f32_to_bf16", n)
    units = int(backend.device_of(0).max_compute_units)
    enough = CPU_GROUPS_PER_UNIT * units
    cap = min(backend.work_group_limit(0), CPU_MAX_WORK_GROUP_SIZE)
    assert size % base == 0 and (size // base) & (size // base - 1) == 0, "a power-of-two multiple"
    assert size <= cap
    if size > base:
        assert n >= size * enough, "grown groups must leave several per compute unit"
    assert size * 2 > cap or n < size * 2 * enough, "the largest size the rule allows"
    if n == 1 << 24 and cap > base:
        assert size > base and n % size == 0, "a large power-of-two launch needs no padding"
