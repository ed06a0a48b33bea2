"""Command lists, queues, events, fences, modules and kernels of l0mem.core (simulator)."""

from __future__ import annotations

import ctypes
import gc
import re
import struct

import numpy as np
import pytest

import l0mem.core as core
from l0mem.backends.kernels import spirv_bytes
from l0mem.bf16 import bf16_to_f32, f32_to_bf16
from tests.support import core_fixtures

sim = core_fixtures.sim
clean = core_fixtures.clean
driver = core_fixtures.driver
ctx = core_fixtures.ctx


@pytest.fixture
def dev(driver):
    return driver.devices()[0]


def test_event_host_signal_query_wait_reset(ctx):
    pool = ctx.event_pool(4)
    ev = pool.event(2)
    assert pool.event(2) is ev
    assert not ev.query()
    assert ev.wait(timeout_ns=0) is False
    ev.signal()
    assert ev.query() and ev.wait() is True
    ev.reset()
    assert not ev.query()
    with pytest.raises(IndexError):
        pool.event(4)
    with pytest.raises(ValueError, match="at least 1"):
        ctx.event_pool(0)


def test_pool_close_destroys_its_events_first(ctx):
    pool = ctx.event_pool(2)
    e0, e1 = pool.event(0), pool.event(1)
    pool.close()
    assert pool.closed and e0.closed and e1.closed
    e0.close()  # already gone: no second destroy


def test_immediate_list_event_use_and_wait_for(ctx, dev):
    cl = ctx.immediate_command_list(dev)
    pool = ctx.event_pool(3)
    gate, done = pool.event(0), pool.event(1)
    a = ctx.allocate_device(dev, 64)
    out = bytearray(64)
    cl.fill(a, b"\x11")
    # The simulator runs work at submission, so the gate opens before the dependent append.
    gate.signal()
    ev = cl.fill(a, b"\x22", wait_for=[gate], signal=done)
    assert ev is done
    assert done.wait(timeout_ns=10**9)
    cl.copy_to_host(a, out)
    assert out == b"\x22" * 64
    cl.barrier()
    assert cl.synchronize() is True


def test_asynchronous_host_copy_keeps_buffer_until_wait(ctx, dev):
    cl = ctx.immediate_command_list(dev)
    a = ctx.allocate_device(dev, 32)
    cl.copy_from_host(a, bytes(range(32)))
    ev = ctx.event_pool(1).event(0)
    out = bytearray(32)
    assert cl.copy_to_host(a, out, signal=ev) is ev
    ev.wait()
    assert out == bytes(range(32))
    out.extend(b"x")  # the pin was released at wait, so resizing works again


def test_kernel_timestamps_give_a_duration(ctx, dev):
    cl = ctx.immediate_command_list(dev)
    pool = ctx.event_pool(1, timestamps=True)
    ev = pool.event(0)
    a = ctx.allocate_device(dev, 1 << 16)
    cl.fill(a, b"\0", signal=ev)
    ev.wait()
    start, end = ev.kernel_timestamp()
    assert end >= start
    res = dev.properties.timer_resolution_ns
    bits = dev.properties.kernel_timestamp_valid_bits
    assert ev.duration_ns() == ((end - start) & ((1 << bits) - 1)) * res
    assert ev.elapsed_ns() == ev.duration_ns()
    plain = ctx.event_pool(1).event(0)
    with pytest.raises(ValueError, match="timestamps"):
        plain.kernel_timestamp()
    assert plain.elapsed_ns() is None


def test_regular_list_queue_and_fence(ctx, dev):
    a = ctx.allocate_device(dev, 64)
    host = bytearray(64)
    cl = ctx.command_list(dev)
    cl.fill(a, b"\x5a")
    cl.barrier()
    cl.copy_to_host(a, host)
    cl.end()
    assert host == bytes(64)  # recorded, not run
    q = ctx.command_queue(dev)
    fence = q.fence()
    assert not fence.query()
    q.execute([cl], fence)
    assert fence.wait(timeout_ns=10**9)
    assert fence.query()
    assert host == b"\x5a" * 64
    fence.reset()
    assert not fence.query()
    assert q.synchronize() is True
    cl.reset()
    cl.fill(a, b"\x01")
    cl.end()
    q.execute([cl])
    q.synchronize()
    imm = ctx.immediate_command_list(dev)
    imm.copy_to_host(a, host)
    assert host == b"\x01" * 64
    with pytest.raises(ValueError, match="at least one"):
        q.execute([])


def test_queue_close_destroys_its_fences(ctx, dev):
    q = ctx.command_queue(dev)
    f = q.fence()
    q.close()
    assert q.closed and f.closed


def test_signal_wait_reset_appends(ctx, dev):
    cl = ctx.command_list(dev)
    pool = ctx.event_pool(2)
    e0, e1 = pool.event(0), pool.event(1)
    cl.wait_events([e0])
    cl.signal_event(e1)
    cl.end()
    q = ctx.command_queue(dev)
    assert not e1.wait(timeout_ns=0)
    e0.signal()  # before execution: the simulator runs lists at submission
    q.execute([cl])
    assert e1.wait(timeout_ns=10**9)
    cl2 = ctx.command_list(dev)
    cl2.reset_event(e1)
    cl2.end()
    q.execute([cl2])
    q.synchronize()
    assert not e1.query()


def test_module_lists_kernels_and_properties(ctx, dev):
    m = ctx.create_module(dev, spirv_bytes())
    names = m.kernel_names()
    assert {"l0mem_f32_to_bf16", "l0mem_bf16_add_to_f32", "l0mem_f32_add"} <= set(names)
    k = m.kernel("l0mem_f32_add")
    assert k.name == "l0mem_f32_add" and k.module is m
    assert k.properties.num_args == 3
    gx, gy, gz = k.suggest_group_size(1000)
    assert gx >= 1 and gy == gz == 1
    k.set_group_size(gx)
    assert k.group_size == (gx, 1, 1)
    with pytest.raises(ValueError):
        k.set_group_size(0)
    with pytest.raises(TypeError, match="C type"):
        k.set_arg(2, 5)
    m.close()
    assert k.closed


# A well-formed SPIR-V 1.0 header (magic, version, generator, bound, schema) over a body
# the driver cannot read: an instruction whose word count is 0.
BAD_BODY = struct.pack("<5I", 0x07230203, 0x00010000, 0, 8, 0) + b"\x00" * 44


def test_bad_spirv_raises_build_error_with_log(ctx, dev):
    with pytest.raises(core.ModuleBuildError) as info:
        ctx.create_module(dev, BAD_BODY)
    assert info.value.build_log
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="empty"):
        ctx.create_module(dev, b"")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00" * 64, "magic number 00000000"),
        (b"\x03\x02\x23\x07" * 3, "whole number of 32-bit words"),
        (BAD_BODY[:18], "whole number of 32-bit words"),
        (struct.pack("<5I", 0x07230203, 0x00020000, 0, 8, 0), "version word 0x00020000"),
        (struct.pack("<5I", 0x07230203, 0x00010700, 0, 8, 0), "version word 0x00010700"),
        (struct.pack("<5I", 0x07230203, 0x01010000, 0, 8, 0), "version word 0x01010000"),
        (struct.pack("<5I", 0x07230203, 0x00010000, 0, 0, 0), "id bound is 0"),
        (struct.pack("<5I", 0x07230203, 0x00010000, 0, 8, 1), "schema word 0x1"),
    ],
)
def test_a_bad_spirv_header_never_reaches_the_driver(ctx, dev, monkeypatch, data, why):
    # Intel's driver exits the process (status 10) on such a header: l0mem refuses it first.
    import l0mem.core.module as module_mod

    def driver() -> None:
        pytest.fail("the driver was reached")

    monkeypatch.setattr(module_mod, "api", driver)
    with pytest.raises(ValueError, match=f"not a SPIR-V module: .*{re.escape(why)}"):
        ctx.create_module(dev, data)


def test_spirv_header_in_either_byte_order_is_accepted():
    from l0mem.core.module import check_spirv

    check_spirv(spirv_bytes())
    big = struct.pack(">5I", 0x07230203, 0x00010600, 7, 100, 0)
    check_spirv(big + b"\x00" * 8)


def test_unknown_kernel_name_raises(ctx, dev):
    from l0mem._ze.errors import ZeError

    m = ctx.create_module(dev, spirv_bytes())
    with pytest.raises(ZeError):
        m.kernel("no_such_kernel")


def _run(ctx, dev, name, src, acc, n):
    m = ctx.create_module(dev, spirv_bytes())
    k = m.kernel(name)
    gx = k.suggest_group_size(n)[0]
    k.set_group_size(gx)
    k.set_arg(0, src)
    k.set_arg(1, acc)
    k.set_arg(2, ctypes.c_uint64(n))
    cl = ctx.immediate_command_list(dev)
    cl.launch(k, -(-n // gx))


def test_f32_add_kernel_result(ctx, clean, dev):
    n = 1000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    src = ctx.allocate_device(dev, 4 * n)
    acc = ctx.allocate_device(dev, 4 * n)
    cl = ctx.immediate_command_list(dev)
    cl.copy_from_host(src, x)
    cl.copy_from_host(acc, y)
    clean.reset_counters()
    _run(ctx, dev, "l0mem_f32_add", src, acc, n)
    assert clean.kernel_launches() == 1
    out = np.empty(n, dtype=np.float32)
    cl.copy_to_host(acc, out)
    np.testing.assert_array_equal(out, x + y)


def test_bf16_kernels_results(ctx, dev):
    n = 513
    x = np.linspace(-3, 3, n, dtype=np.float32)
    src = ctx.allocate_device(dev, 4 * n)
    half = ctx.allocate_device(dev, 2 * n)
    acc = ctx.allocate_device(dev, 4 * n)
    cl = ctx.immediate_command_list(dev)
    cl.copy_from_host(src, x)
    _run(ctx, dev, "l0mem_f32_to_bf16", src, half, n)
    h = np.empty(n, dtype=np.uint16)
    cl.copy_to_host(half, h)
    np.testing.assert_array_equal(h, f32_to_bf16(x))
    cl.fill(acc, np.float32(1.0).tobytes())
    _run(ctx, dev, "l0mem_bf16_add_to_f32", half, acc, n)
    out = np.empty(n, dtype=np.float32)
    cl.copy_to_host(acc, out)
    np.testing.assert_array_equal(out, bf16_to_f32(h) + np.float32(1.0))


def test_dropped_lists_and_modules_are_released(clean, driver, dev):
    c = driver.create_context()
    kept = [c.immediate_command_list(dev), c.command_list(dev), c.command_queue(dev).fence()]
    kept.append(c.create_module(dev, spirv_bytes()).kernel("l0mem_f32_add"))
    # immediate list and its sync pool; list; queue and fence; module and kernel
    assert c.live_handles == 7
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del kept
        gc.collect()
        assert c.live_handles == 0  # dropping the objects released every handle
        c.close()


def test_context_managers_release(clean, driver, dev):
    with driver.create_context([dev]) as c:
        with c.allocate_device(dev, 256) as a:
            assert clean.device_used(0) == 256
        assert a.closed and clean.device_used(0) == 0
        with c.event_pool(1) as pool:
            ev = pool.event(0)
        assert pool.closed and ev.closed
        with c.command_queue(dev) as q, q.fence() as f:
            pass
        assert q.closed and f.closed
        with c.command_list(dev) as cl, c.immediate_command_list(dev) as imm:
            pass
        assert cl.closed and imm.closed
        with c.create_module(dev, spirv_bytes()) as m:
            k = m.kernel("l0mem_f32_add")
        assert m.closed and k.closed
    assert c.closed


def test_kernel_argument_as_raw_bytes(ctx, dev):
    n = 16
    x = np.arange(n, dtype=np.float32)
    src = ctx.allocate_device(dev, 4 * n)
    acc = ctx.allocate_device(dev, 4 * n)
    cl = ctx.immediate_command_list(dev)
    cl.copy_from_host(src, x)
    cl.copy_from_host(acc, x)
    k = ctx.create_module(dev, spirv_bytes()).kernel("l0mem_f32_add")
    k.set_group_size(4)
    k.set_arg(0, src)
    k.set_arg(1, acc)
    k.set_arg(2, n.to_bytes(8, "little"))
    cl.launch(k, n // 4)
    out = np.empty(n, dtype=np.float32)
    cl.copy_to_host(acc, out)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(TypeError, match="unsupported"):
        k.set_arg(0, 1.5)


@pytest.mark.parametrize(
    ("parent", "make", "destroy"),
    [
        (None, lambda c, d, p: c.allocate_device(d, 4096), "zeMemFree"),
        (None, lambda c, d, p: c.command_list(d), "zeCommandListDestroy"),
        (None, lambda c, d, p: c.command_queue(d), "zeCommandQueueDestroy"),
        (None, lambda c, d, p: c.event_pool(2), "zeEventPoolDestroy"),
        (None, lambda c, d, p: c.create_module(d, spirv_bytes()), "zeModuleDestroy"),
        (lambda c, d: c.event_pool(2), lambda c, d, p: p.event(1), "zeEventDestroy"),
        (lambda c, d: c.command_queue(d), lambda c, d, p: p.fence(), "zeFenceDestroy"),
        (
            lambda c, d: c.create_module(d, spirv_bytes()),
            lambda c, d, p: p.kernel("l0mem_f32_add"),
            "zeKernelDestroy",
        ),
    ],
)
def test_handle_is_released_when_the_context_cannot_track_it(
    ctx, clean, dev, monkeypatch, parent, make, destroy
):
    from l0mem.core import _raw

    owner = parent(ctx, dev) if parent is not None else None
    calls = []
    real_call = _raw.call

    def record(function, *args):
        calls.append(function.__name__)
        real_call(function, *args)

    def refuse(*args, **kwargs):
        raise RuntimeError("tracker refused")

    monkeypatch.setattr(_raw, "call", record)
    # The new object registers its release with its owner: the parent object, else the context.
    monkeypatch.setattr(owner if owner is not None else ctx, "register_release", refuse)
    with pytest.raises(RuntimeError, match="tracker refused"):
        make(ctx, dev, owner)
    assert calls[-1] == destroy
    assert clean.device_used(0) == 0


def test_closed_wait_event_is_reported_before_a_closed_allocation(ctx, dev):
    cl = ctx.immediate_command_list(dev)
    a, b = ctx.allocate_device(dev, 64), ctx.allocate_device(dev, 64)
    ev = ctx.event_pool(1).event(0)
    a.close()
    ev.close()
    with pytest.raises(ValueError, match="closed event"):
        cl.copy(a, b, wait_for=[ev])
    with pytest.raises(ValueError, match="DeviceAllocation is closed"):
        cl.copy(a, b)


def _record_driver_calls(monkeypatch):
    """Record every raw call the object layer makes from now on."""
    from l0mem.core import _raw

    calls = []
    for name in ("call", "ready", "create"):
        real = getattr(_raw, name)

        def wrapper(routine, *args, _real=real):
            calls.append(routine.__name__)
            return _real(routine, *args)

        monkeypatch.setattr(_raw, name, wrapper)
    return calls


def _closed_uses(ctx, dev):
    """Return (object, [(label, call)]) pairs: each object closed, each call using its handle."""
    a = ctx.allocate_device(dev, 64)
    pool = ctx.event_pool(2)
    ev = pool.event(0)
    m = ctx.create_module(dev, spirv_bytes())
    k = m.kernel("l0mem_f32_add")
    k.set_group_size(1)

    def appends(cl):
        return [
            ("copy", lambda: cl.copy(a, a, 8)),
            ("copy_from_host", lambda: cl.copy_from_host(a, b"x")),
            ("copy_to_host", lambda: cl.copy_to_host(a, bytearray(1))),
            ("fill", lambda: cl.fill(a, b"\0")),
            ("launch", lambda: cl.launch(k, 1)),
            ("barrier", lambda: cl.barrier()),
            ("signal_event", lambda: cl.signal_event(ev)),
            ("wait_events", lambda: cl.wait_events([ev])),
            ("reset_event", lambda: cl.reset_event(ev)),
        ]

    imm = ctx.immediate_command_list(dev)
    reg = ctx.command_list(dev)
    q = ctx.command_queue(dev)
    fence = q.fence()
    ev2 = ctx.event_pool(1).event(0)
    m2 = ctx.create_module(dev, spirv_bytes())
    k2 = m2.kernel("l0mem_f32_add")
    pool2 = ctx.event_pool(1)
    return [
        (imm, [*appends(imm), ("synchronize", lambda: imm.synchronize())]),
        (reg, [*appends(reg), ("end", reg.end), ("reset", reg.reset)]),
        (pool2, [("event", lambda: pool2.event(0))]),
        (
            ev2,
            [
                ("wait", lambda: ev2.wait(0)),
                ("signal", ev2.signal),
                ("query", ev2.query),
                ("reset", ev2.reset),
                ("kernel_timestamp", ev2.kernel_timestamp),
            ],
        ),
        (m2, [("kernel_names", m2.kernel_names), ("kernel", lambda: m2.kernel("l0mem_f32_add"))]),
        (
            k2,
            [
                ("properties", lambda: k2.properties),
                ("set_group_size", lambda: k2.set_group_size(1)),
                ("suggest_group_size", lambda: k2.suggest_group_size(64)),
                ("set_arg", lambda: k2.set_arg(0, a)),
            ],
        ),
        (
            q,
            [
                ("fence", q.fence),
                ("execute", lambda: q.execute([reg])),
                ("synchronize", lambda: q.synchronize(0)),
            ],
        ),
        (fence, [("wait", lambda: fence.wait(0)), ("query", fence.query), ("reset", fence.reset)]),
    ]


def test_closed_objects_never_reach_the_driver(ctx, dev, monkeypatch):
    uses = _closed_uses(ctx, dev)
    for obj, _ in uses:
        obj.close()
    calls = _record_driver_calls(monkeypatch)
    checked = 0
    for obj, methods in uses:
        for label, use in methods:
            with pytest.raises(ValueError, match=f"{type(obj).__name__} is closed"):
                use()
            assert calls == [], f"{type(obj).__name__}.{label} called {calls}"
            checked += 1
    assert checked == 39  # every method listed above ran


def test_closed_arguments_never_reach_the_driver(ctx, dev, monkeypatch):
    cl = ctx.immediate_command_list(dev)
    reg = ctx.command_list(dev)
    reg.end()
    q = ctx.command_queue(dev)
    fence = q.fence()
    ev = ctx.event_pool(1).event(0)
    k = ctx.create_module(dev, spirv_bytes()).kernel("l0mem_f32_add")
    for obj in (fence, ev, k):
        obj.close()
    calls = _record_driver_calls(monkeypatch)
    with pytest.raises(ValueError, match="Kernel is closed"):
        cl.launch(k, 1)
    with pytest.raises(ValueError, match="Event is closed"):
        cl.signal_event(ev)
    with pytest.raises(ValueError, match="Event is closed"):
        cl.reset_event(ev)
    with pytest.raises(ValueError, match="Event is closed"):
        cl.barrier(signal=ev)
    with pytest.raises(ValueError, match="Fence is closed"):
        q.execute([reg], fence)
    assert calls == []


@pytest.mark.parametrize("bad", [2**32, -1, True, 1.0])
def test_uint32_arguments_are_checked_before_the_driver(ctx, dev, monkeypatch, bad):
    k = ctx.create_module(dev, spirv_bytes()).kernel("l0mem_f32_add")
    cl = ctx.immediate_command_list(dev)
    calls = _record_driver_calls(monkeypatch)
    with pytest.raises(ValueError, match="uint32"):
        k.set_group_size(bad)
    with pytest.raises(ValueError, match="uint32"):
        k.set_group_size(1, 1, bad)
    with pytest.raises(ValueError, match="uint32"):
        k.suggest_group_size(bad)
    with pytest.raises(ValueError, match="uint32"):
        k.suggest_group_size((64, bad))
    with pytest.raises(ValueError, match="uint32"):
        cl.launch(k, bad)
    with pytest.raises(ValueError, match="uint32"):
        cl.launch(k, (1, bad))
    assert calls == []
    assert k.suggest_group_size(2**32 - 1)[0] >= 1  # the largest uint32 still goes through


def test_build_error_is_a_ze_error_and_pickles(ctx, dev):
    import pickle

    from l0mem._ze import T
    from l0mem._ze.errors import ZeError

    with pytest.raises(ZeError) as info:
        ctx.create_module(dev, BAD_BODY)
    err = info.value
    assert isinstance(err, core.ModuleBuildError)
    assert err.code == T.ZE_RESULT_ERROR_MODULE_BUILD_FAILURE == err.error.code
    assert err.routine == "zeModuleCreate"
    assert "module build failed" in str(err) and "\n" not in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, core.ModuleBuildError)
    assert again.build_log == err.build_log and str(again) == str(err)


def test_owner_accessors(ctx, driver, dev):
    assert ctx.driver is driver
    cl = ctx.immediate_command_list(dev)
    reg = ctx.command_list(dev)
    for lst in (cl, reg):
        assert lst.device is dev and lst.context is ctx
    q = ctx.command_queue(dev)
    assert q.device is dev
    m = ctx.create_module(dev, spirv_bytes())
    assert m.device is dev
    k = m.kernel("l0mem_f32_add")
    k.close()
    assert k.closed and not m.closed
    k.close()  # idempotent
    assert m.kernel("l0mem_f32_add").name == "l0mem_f32_add"  # the module still serves kernels
