"""The child side of the conformance suite: each probe drives l0mem against NEO and prints facts.

``python -m tests.conformance.probe NAME [ARGS]`` runs probe ``NAME`` in this
process and prints one line, ``RESULT <json>``, as its last output. A step
that raises is recorded as ``{"error": class, "message": ...}`` (with the
driver's ``code`` for a ZeError), so the tests can assert on failures too.
Nothing here asserts: the parent (tests/conformance/test_*.py) does.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import l0mem.core as core
from l0mem._ze import api, init_path, loader_versions
from l0mem._ze.enums import ze_external_memory_type_flag_t
from l0mem._ze.errors import ZeError
from l0mem._ze.structs import ze_external_memory_export_fd_t, ze_memory_allocation_properties_t

RESULT = "RESULT "
SUBDEVICE_FLAG = 2  # ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE
EXTERNAL_MEMORY_DMA_BUF = ze_external_memory_type_flag_t.ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF
PATTERN = bytes((i * 7 + 3) % 251 for i in range(1 << 20))


def attempt(step: Callable[..., Any], *args: Any) -> Any:
    """Return ``step(*args)``, or a description of what it raised."""
    try:
        return step(*args)
    except Exception as exc:
        out: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, ZeError):
            out["code"] = int(exc.code)
        return out


def _plain(value: Any) -> Any:
    """Return dataclasses and tuples as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _device(d: core.Device) -> dict[str, Any]:
    props = d.properties
    return {
        "name": d.name,
        "type": d.type,
        "vendor_id": d.vendor_id,
        "device_id": d.device_id,
        "uuid": d.uuid,
        "flags": props.flags,
        "subdevice": bool(props.flags & SUBDEVICE_FLAG),
        "subdevice_id": props.subdevice_id,
        "total_memory": d.total_memory,
        "sub_devices": [_device(s) for s in d.sub_devices()],
    }


def enumeration() -> dict[str, Any]:
    """Drivers, devices, tiles, peer access; l0mem's flat inventory and the init path."""
    from l0mem.backends import level_zero_devices

    out: dict[str, Any] = {"drivers": []}
    for drv in core.drivers():
        devs = drv.devices()
        out["drivers"].append(
            {
                "api_version": list(drv.properties.api_version),
                "version": drv.properties.version,
                "devices": [_device(d) for d in devs],
                "peer": [[a.can_access_peer(b) for b in devs] for a in devs],
                "p2p": [
                    [None if a is b else _plain(a.p2p_properties(b)) for b in devs] for a in devs
                ],
            }
        )
    out["init_path"] = init_path()
    out["loader"] = [[name, list(v)] for name, v in loader_versions()]
    out["flat"] = [d.name for d in level_zero_devices()]
    return out


def _ordinals(d: core.Device) -> list[int]:
    return list(d.queue_group_ordinals())


def _dmabuf(d: core.Device) -> bool:
    return d.supports_dmabuf_export


def _sysman(d: core.Device) -> Any:
    return _plain(d.sysman_memory())


def properties() -> dict[str, Any]:
    """What ``l0mem info`` collects, and the properties behind it, for every device."""
    from l0mem.cli.info import collect

    out: dict[str, Any] = {"info": collect(), "devices": []}
    for drv in core.drivers():
        for d in drv.devices():
            out["devices"].append(
                {
                    "properties": _plain(d.properties),
                    "memory": _plain(d.memory_properties()),
                    "compute": _plain(d.compute_properties),
                    "ordinals": attempt(_ordinals, d),
                    "dmabuf": attempt(_dmabuf, d),
                    "sysman": attempt(_sysman, d),
                    "pci_address": d.pci_address,
                    "kernel_driver": d.kernel_driver,
                }
            )
    return out


def _allocation(ctx: core.Context, dev: core.Device, kind: str, nbytes: int) -> dict[str, Any]:
    if kind == "device":
        a: core.Allocation = ctx.allocate_device(dev, nbytes)
    elif kind == "host":
        a = ctx.allocate_host(nbytes)
    else:
        a = ctx.allocate_shared(dev, nbytes)
    with a:
        props = a.properties()
        base, size = a.address_range()
        return {
            "type": props.type,
            "page_size": props.page_size,
            "on_device": props.device_handle == dev.handle,
            "no_device": props.device_handle == 0,
            "in_range": base <= a.address and a.address + nbytes <= base + size,
            "nbytes": a.nbytes,
        }


def memory() -> dict[str, Any]:
    """Contexts, every allocation kind and size, their properties, residency, the error paths."""
    drv = core.drivers()[0]
    dev = drv.devices()[0]
    out: dict[str, Any] = {"allocations": {}}
    with drv.create_context() as whole:
        out["default_context_devices"] = len(whole.devices)
    with drv.create_context([dev]) as ctx:
        for kind in ("device", "host", "shared"):
            for nbytes in (1, 4096, (1 << 20) + 3, 64 << 20):
                out["allocations"][f"{kind}:{nbytes}"] = attempt(
                    _allocation, ctx, dev, kind, nbytes
                )
        too_big = dev.properties.max_mem_alloc_size + 1
        out["too_big"] = attempt(lambda: ctx.allocate_device(dev, too_big).close())
        out["zero"] = attempt(lambda: ctx.allocate_device(dev, 0).close())
        with ctx.allocate_device(dev, 1 << 20) as a:
            out["resident"] = attempt(lambda: ctx.make_resident(dev, a))
            out["evict"] = attempt(lambda: ctx.evict(dev, a))
        out["live_after"] = ctx.live_handles
    return out


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def dmabuf() -> dict[str, Any]:
    """A device allocation made dma-buf exportable; its descriptor asked of l0mem and of the driver."""
    drv = core.drivers()[0]
    dev = drv.devices()[0]
    out: dict[str, Any] = {
        "export_types": dev.external_memory_export_types,
        "supports": dev.supports_dmabuf_export,
        "stdin_open_before": _fd_open(0),
    }
    with drv.create_context([dev]) as ctx:
        a = ctx.allocate_device(dev, 1 << 20, export_dmabuf=True)
        out["allocation"] = _plain(a.properties())["type"]
        out["l0mem_fd"] = attempt(a.dmabuf_fd)
        # The driver itself, asked as dmabuf_fd() would ask it.
        export = ze_external_memory_export_fd_t(flags=EXTERNAL_MEMORY_DMA_BUF, fd=-1)
        props = ze_memory_allocation_properties_t()
        props.pNext = ctypes.cast(ctypes.pointer(export), ctypes.c_void_p)
        rc = api().zeMemGetAllocProperties(ctx.handle, a.address, ctypes.byref(props), None)
        out["driver"] = {"rc": int(rc), "fd": int(export.fd)}
        a.close()
    out["stdin_open_after"] = _fd_open(0)
    return out


def _moved(cl: core.ImmediateCommandList, n: int, ctx: core.Context, dev: core.Device) -> Any:
    """Copy ``n`` bytes along every leg between memory kinds; return which legs moved them."""
    data = PATTERN[:n]
    with (
        ctx.allocate_device(dev, n) as a,
        ctx.allocate_device(dev, n) as b,
        ctx.allocate_shared(dev, n) as s,
        ctx.allocate_host(n) as h,
    ):

        def arrived(mem: core.Allocation) -> bool:
            back = bytearray(n)
            cl.copy_to_host(mem, back)
            return bytes(back) == data

        cl.copy_from_host(a, data)
        out = {"host_to_device": arrived(a)}
        cl.copy(b, a, n)
        out["device_to_device"] = arrived(b)
        cl.copy_from_host(b, data)
        cl.copy(s, b, n)
        out["device_to_shared"] = arrived(s)
        out["shared_seen_by_cpu"] = bytes(s.memoryview()[:n]) == data
        cl.copy(h, s, n)
        out["shared_to_host"] = bytes(h.memoryview()[:n]) == data
        return out


def copies() -> dict[str, Any]:
    """Copies of several sizes through every memory kind, checked byte for byte; a fill."""
    drv = core.drivers()[0]
    dev = drv.devices()[0]
    out: dict[str, Any] = {}
    with drv.create_context([dev]) as ctx:
        cl = ctx.immediate_command_list(dev)
        for n in (1, 4097, (1 << 20)):
            out[str(n)] = attempt(_moved, cl, n, ctx, dev)
        with ctx.allocate_host(4096) as h:
            cl.fill(h, b"\x5a", 4096)
            out["fill_wrote"] = bytes(h.memoryview()[:16]) == b"\x5a" * 16
        cl.close()
    return out


def commands() -> dict[str, Any]:
    """Regular command lists, queues and fences; events and their timestamps; l0mem's timing."""
    from l0mem.backends import LevelZeroBackend
    from l0mem.bench.timing import time_op

    drv = core.drivers()[0]
    dev = drv.devices()[0]
    out: dict[str, Any] = {}
    with drv.create_context([dev]) as ctx:
        pool = ctx.event_pool(4, timestamps=True)
        ev = pool.event(0)
        out["fresh_query"] = ev.query()
        out["fresh_wait_0"] = ev.wait(0)
        ev.signal()
        out["host_signal_query"] = ev.query()
        ev.reset()
        out["host_reset_query"] = ev.query()
        with ctx.allocate_device(dev, 1 << 20) as a, ctx.allocate_device(dev, 1 << 20) as b:
            cl = ctx.command_list(dev)
            done = pool.event(1)
            cl.copy(b, a, 1 << 20, signal=done)
            cl.barrier()
            cl.end()
            q = ctx.command_queue(dev)
            fence = q.fence()
            q.execute([cl], fence)
            out["fence_wait"] = fence.wait()
            out["fence_query"] = fence.query()
            out["queue_sync"] = q.synchronize()
            out["event_wait"] = done.wait()
            out["event_query"] = done.query()
            out["kernel_timestamp"] = attempt(done.kernel_timestamp)
            out["duration_ns"] = attempt(lambda: done.duration_ns(dev))
            cl.reset()
            fence.reset()
            cl.copy(a, b, 4096)
            cl.end()
            q.execute([cl], fence)
            out["second_fence_wait"] = fence.wait()
            imm = ctx.immediate_command_list(dev)
            imm.barrier()
            out["immediate_barrier"] = True
            for obj in (imm, cl, q):
                obj.close()
        pool.close()
    out["timestamp_valid_bits"] = dev.properties.kernel_timestamp_valid_bits
    with LevelZeroBackend([dev]) as b:
        src, dst = b.allocate(0, 1 << 20), b.allocate(0, 1 << 20)
        event = b.copy(dst, src)
        event.wait()
        out["backend_elapsed_ns"] = attempt(event.elapsed_ns)
        m = time_op(lambda: (b.copy(dst, src),), 1 << 20, reps=2, warmup=1)
        out["measurement"] = {"timing": m.timing, "note": m.note, "samples": len(m.samples_ns)}
        out["backend_no_hardware"] = attempt(lambda: b.no_hardware)
        src.close()
        dst.close()
    return out


def modules() -> dict[str, Any]:
    """The shipped SPIR-V built for the device and its kernels; a kernel launched."""
    from l0mem.backends import LevelZeroBackend
    from l0mem.backends.kernels import KERNELS, launch_elementwise, spirv_bytes

    drv = core.drivers()[0]
    dev = drv.devices()[0]
    out: dict[str, Any] = {"device_id": dev.device_id, "kernels": {}}
    with drv.create_context([dev]) as ctx:
        module = ctx.create_module(dev, spirv_bytes())
        out["names"] = sorted(module.kernel_names())
        for name in KERNELS:
            k = module.kernel(name)
            out["kernels"][name] = {
                "num_args": k.properties.num_args,
                "suggested": list(k.suggest_group_size(1 << 16)),
            }
            k.close()
        module.close()
    with LevelZeroBackend([dev]) as b:
        bufs = [b.allocate(0, 4 * 4096) for _ in range(2)]
        launch_elementwise(b, "l0mem_f32_add", bufs, 4096).wait()
        out["backend_launch"] = True
        for buf in bufs:
            buf.close()
    return out


def bad_header() -> dict[str, Any]:
    """A module whose SPIR-V header is garbage, given to l0mem (NEO would end the process)."""
    drv = core.drivers()[0]
    dev = drv.devices()[0]
    with drv.create_context([dev]) as ctx:
        return {"garbage_header": attempt(ctx.create_module, dev, b"\x00" * 64)}


PROBES: dict[str, Callable[[], dict[str, Any]]] = {
    "enumeration": enumeration,
    "properties": properties,
    "memory": memory,
    "dmabuf": dmabuf,
    "copies": copies,
    "commands": commands,
    "modules": modules,
    "bad_header": bad_header,
}


def main(argv: list[str]) -> None:
    """Run the probe named by ``argv[0]`` and print its facts as the last line."""
    facts = PROBES[argv[0]]()
    print(RESULT + json.dumps(facts, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
