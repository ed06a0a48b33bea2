"""The SYCL implementation of :class:`l0mem.backends.Backend`, through dpctl.

Every device gets one in-order queue. ``context="default"`` puts each queue in
the context a plain ``sycl::queue(device)`` gets (for root devices, the
platform's default context holding every root device: the layout in which the
SYCL runtime makes allocations resident on peers); ``context="single"`` gives
each device index a fresh context holding that device alone. Memory of one
context cannot be addressed from another, so a copy between contexts is staged
through host memory.

dpctl runs work asynchronously and does not keep host buffers or device
allocations alive for it, so the backend holds a reference to everything an
enqueued operation touches until its event has completed (one
:class:`l0mem.keepalive.KeepAlive` per queue, the mechanism the Level Zero
backend's event recycler uses too).
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from typing import Any, Literal

from typing_extensions import Self

from l0mem.backends.base import (
    BackendClosedError,
    DeviceBuffer,
    DeviceMemory,
    Event,
    HostBuffer,
    PeerAccess,
    RouteKind,
    check_fill,
    is_simulator_name,
)
from l0mem.backends.kernels import KERNELS, KernelArgumentError, check_launch_args, spirv_bytes
from l0mem.backends.sycl_buffers import SyclBuffer, SyclEvent
from l0mem.keepalive import KeepAlive
from l0mem.sycl import SyclNoDeviceError, load_dpctl, resolve_device

# Work-group sizes from benchmarks/bench_kernels.py: on the OpenCL CPU device
# groups of 1024 or more beat 256 by about 10 % for every kernel (fewer,
# larger tasks), and large launches gain a few percent more from groups of up
# to 8192 (compress most: see native_kernels/README.md) as long as every
# compute unit still gets several groups; 256 is the usual choice for Intel
# GPUs. All are capped by the kernel's own limit.
CPU_WORK_GROUP_SIZE = 1024
CPU_MAX_WORK_GROUP_SIZE = 8192
CPU_GROUPS_PER_UNIT = 4
GPU_WORK_GROUP_SIZE = 256
_FILL_SEED_BYTES = 1 << 16


def _check_group_size_type(size: object) -> None:
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"work-group size must be an int, got {type(size).__name__}")
    if size < 1:
        raise ValueError(f"work-group size must be positive, got {size}")


def direct_copy_hazard(src: Any, dst: Any) -> bool:
    """Return True when a direct copy between these dpctl devices is known to hang (CPU sub-devices).

    One context over two CPU sub-devices of the pinned 2025.3 OpenCL CPU
    runtime: a device-to-device ``memcpy`` of device USM hangs in most runs;
    tests/test_p2p_sycl_shared.py records whether it still does.
    """
    if src == dst:
        return False
    try:
        cpu = bool(src.is_cpu) and bool(dst.is_cpu)
        sub = src.parent_device is not None or dst.parent_device is not None
    except Exception:
        return False
    return cpu and sub


def _default_context(dpctl: Any, device: Any) -> Any:
    """Return the context a plain ``sycl::queue(device)`` would use."""
    platform_ctx = device.sycl_platform.default_context
    if any(d == device for d in platform_ctx.get_devices()):
        return platform_ctx
    # Sub-devices are not in the platform's default context.
    return dpctl.SyclQueue(device).sycl_context


class SyclBackend:
    """l0mem's backend protocol over SYCL devices, with dpctl doing the work."""

    name = "sycl"

    def __init__(
        self,
        devices: Sequence[str | Any] | None = None,
        *,
        context: Literal["default", "single"] = "default",
        profiling: bool = False,
        work_group_size: int | None = None,
    ) -> None:
        dpctl = load_dpctl()
        if context not in ("default", "single"):
            raise ValueError(f"context must be 'default' or 'single', got {context!r}")
        _check_group_size_type(work_group_size)
        # dpctl reports a missing device or runtime as its own creation errors;
        # every l0mem caller knows them as SyclNoDeviceError.
        creation_errors = (
            dpctl.SyclDeviceCreationError,
            dpctl.SyclContextCreationError,
            dpctl.SyclQueueCreationError,
        )
        self._closed = False
        self._work_group_size: int | None = None
        self._programs: list[tuple[Any, Any]] = []
        self._kernels: dict[tuple[int, str], Any] = {}
        self._contexts: list[Any] = []
        self._queues: list[Any] = []
        try:
            if devices is None:
                gpus = dpctl.get_devices(backend="level_zero", device_type="gpu")
                devices = gpus or [dpctl.select_default_device()]
            self._devices = [resolve_device(d) for d in devices]
            if not self._devices:
                raise ValueError("the backend needs at least one device")
            props = ["in_order", "enable_profiling"] if profiling else ["in_order"]
            for dev in self._devices:
                # A list argument makes dpctl build a new context instead of
                # returning its cached per-device (platform default) one.
                ctx = _default_context(dpctl, dev) if context == "default" else dpctl.SyclContext([dev])
                self._contexts.append(ctx)
                self._queues.append(dpctl.SyclQueue(ctx, dev, property=props))
        except creation_errors as err:
            raise SyclNoDeviceError(f"no usable SYCL device: {err}") from None
        self.context_mode = context
        self.profiling = profiling
        self._pending = [KeepAlive() for _ in self._devices]
        self._complete = dpctl.event_status_type.complete
        self._buffers: weakref.WeakSet[SyclBuffer] = weakref.WeakSet()
        if work_group_size is not None:
            self.set_work_group_size(work_group_size)

    # -- introspection -----------------------------------------------------

    def _index(self, device: int) -> int:
        self._check_open()
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"device index must be an int, got {type(device).__name__}")
        if not 0 <= device < len(self._devices):
            raise IndexError(f"device index {device} out of range 0..{len(self._devices) - 1}")
        return device

    def _check_open(self) -> None:
        if self._closed:
            raise BackendClosedError("the SYCL backend is closed")

    def device_count(self) -> int:
        """Return how many devices this backend drives."""
        return len(self._devices)

    def device_name(self, index: int) -> str:
        """Return a human-readable name of device ``index``."""
        dev = self._devices[self._index(index)]
        try:
            where = str(dev.filter_string)
        except ValueError:
            where = f"sub-device of {dev.parent_device.filter_string}"
        return f"{str(dev.name).strip()} [{where}]"

    def device_of(self, index: int) -> Any:
        """Return the ``dpctl.SyclDevice`` of device ``index``."""
        return self._devices[self._index(index)]

    def context_of(self, index: int) -> Any:
        """Return the ``dpctl.SyclContext`` holding device ``index``."""
        return self._contexts[self._index(index)]

    def queue_of(self, index: int) -> Any:
        """Return the in-order ``dpctl.SyclQueue`` of device ``index``."""
        return self._queues[self._index(index)]

    @property
    def simulated(self) -> bool:
        """Return True when a device is l0mem's simulated driver (by the name the driver reports)."""
        return any(is_simulator_name(str(d.name)) for d in self._devices)

    def memory(self, device: int) -> DeviceMemory:
        """Return device ``device``'s global memory and largest allocation (free bytes unknown)."""
        dev = self._devices[self._index(device)]
        return DeviceMemory(
            total=int(dev.global_mem_size) or None,
            max_alloc=int(dev.max_mem_alloc_size) or None,
            free=None,
            host_backed=bool(dev.is_cpu) or is_simulator_name(str(dev.name)),
        )

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        """Return what ``ext_oneapi_can_access_peer`` reports for the pair (None if it cannot say)."""
        a, b = self._devices[self._index(src)], self._devices[self._index(dst)]
        if src == dst or a == b:
            return PeerAccess(src, dst, True, True)
        try:
            return PeerAccess(
                src,
                dst,
                bool(a.can_access_peer(b, value="access_supported")),
                bool(a.can_access_peer(b, value="atomics_supported")),
            )
        except Exception:
            return PeerAccess(src, dst, None, None)

    def copy_route(self, src: int, dst: int) -> tuple[RouteKind, str]:
        """Return "direct" within one context (unless known to hang), else "staged", and why."""
        if self._index(src) == self._index(dst):
            return "direct", "same device"
        if not self.same_context(src, dst):
            return "staged", "separate contexts"
        if direct_copy_hazard(self._devices[src], self._devices[dst]):
            return "staged", "CPU sub-devices: direct copies hang"
        return "direct", "one context"

    def work_group_limit(self, device: int) -> int:
        """Return the largest work-group size every l0mem kernel accepts on ``device``."""
        return min(int(self._kernel(device, name).work_group_size) for name in KERNELS)

    def set_work_group_size(self, size: int | None) -> None:
        """Use ``size`` for every launch (None: the per-device default); ValueError if a kernel cannot."""
        _check_group_size_type(size)
        if size is not None:
            for i in range(len(self._devices)):
                limit = self.work_group_limit(i)
                if size > limit:
                    raise ValueError(
                        f"work-group size {size} exceeds the kernels' limit {limit} "
                        f"on {self.device_name(i)}"
                    )
        self._work_group_size = size

    def work_group_size(self, device: int, kernel: str, global_size: int | None = None) -> int:
        """Return the work-group size a launch of ``kernel`` over ``global_size`` items on ``device`` uses."""
        k = self._kernel(device, kernel)
        limit = int(k.work_group_size)
        if self._work_group_size is not None:
            if self._work_group_size > limit:
                raise ValueError(
                    f"work-group size {self._work_group_size} exceeds {kernel}'s limit {limit}"
                )
            return self._work_group_size
        preferred = int(k.preferred_work_group_size_multiple)
        dev = self._devices[device]
        size = CPU_WORK_GROUP_SIZE if dev.is_cpu else GPU_WORK_GROUP_SIZE
        size = max(1, min(limit, max(size, preferred)))
        if dev.is_cpu and global_size is not None:
            # Grow by powers of two (so a power-of-two count still needs no
            # padding) while every compute unit keeps several groups.
            enough = CPU_GROUPS_PER_UNIT * int(dev.max_compute_units)
            cap = min(limit, CPU_MAX_WORK_GROUP_SIZE)
            while size * 2 <= cap and global_size >= size * 2 * enough:
                size *= 2
        return size

    # -- bookkeeping -------------------------------------------------------

    def _buffer(self, buf: object, what: str) -> SyclBuffer:
        if not isinstance(buf, SyclBuffer):
            raise TypeError(f"{what}: expected a SyclBuffer, got {type(buf).__name__}")
        if buf.backend is not self:
            raise ValueError(f"{what}: the buffer belongs to another SYCL backend")
        buf.check_open()
        return buf

    def _keep(self, device: int, event: Any, refs: tuple[object, ...]) -> None:
        """Keep ``refs`` (memory, host buffers) until the dpctl ``event`` has completed."""
        complete = self._complete
        self._pending[device].add(lambda: event.execution_status == complete, refs)

    def _deps(self, device: int, wait_for: Sequence[Event]) -> list[Any]:
        """Return the dpctl events ``device``'s queue can wait on; host-wait the rest."""
        ctx = self._contexts[device]
        deps: list[Any] = []
        for ev in wait_for:
            if isinstance(ev, SyclEvent) and ev.context == ctx:
                deps.extend(ev.dpctl_events)
            elif callable(getattr(ev, "wait", None)):
                ev.wait()
            else:
                raise TypeError(f"cannot wait for {type(ev).__name__}")
        return deps

    def _event(self, device: int, events: Sequence[Any]) -> SyclEvent:
        return SyclEvent(events, self._contexts[device], self.profiling)

    def _marker(self, device: int, wait_for: Sequence[Event]) -> SyclEvent:
        """Return an event that completes once ``wait_for`` has, without doing work."""
        ev = self._queues[device].submit_barrier(self._deps(device, wait_for))
        return self._event(device, [ev])

    # -- memory ------------------------------------------------------------

    def allocate(self, device: int, nbytes: int) -> SyclBuffer:
        """Return a new USM device allocation (``malloc_device``) of ``nbytes`` on ``device``."""
        i = self._index(device)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise ValueError(f"allocation size must be a positive int, got {nbytes!r}")
        dpctl = load_dpctl()
        try:
            mem = dpctl.memory.MemoryUSMDevice(nbytes, queue=self._queues[i])
        except dpctl.memory.USMAllocationError as exc:
            raise MemoryError(f"cannot allocate {nbytes} bytes on {self.device_name(i)}: {exc}") from exc
        buf = SyclBuffer(self, i, mem)
        self._buffers.add(buf)
        return buf

    @staticmethod
    def _host_view(data: object, *, writable: bool, what: str) -> memoryview:
        try:
            view = memoryview(data)  # type: ignore[arg-type]
        except TypeError as exc:
            raise TypeError(f"{what} must support the buffer protocol") from exc
        if not view.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous")
        if writable and view.readonly:
            raise ValueError(f"{what} must be writable")
        return view.cast("B") if view.format != "B" or view.ndim != 1 else view

    def upload(
        self, dst: DeviceBuffer, data: HostBuffer, *, wait_for: Sequence[Event] = ()
    ) -> SyclEvent:
        """Copy host ``data`` into the start of ``dst``; return its event."""
        d = self._buffer(dst, "upload destination")
        host = self._host_view(data, writable=False, what="upload source")
        if host.nbytes > d.nbytes:
            raise ValueError(f"upload of {host.nbytes} bytes into a buffer of {d.nbytes} bytes")
        if host.nbytes == 0:
            return self._marker(d.device, wait_for)
        mem = d.memory()
        ev = self._queues[d.device].memcpy_async(
            mem, host, host.nbytes, self._deps(d.device, wait_for)
        )
        self._keep(d.device, ev, (mem, host))
        return self._event(d.device, [ev])

    def download(
        self, src: DeviceBuffer, out: HostBuffer, *, wait_for: Sequence[Event] = ()
    ) -> SyclEvent:
        """Copy the start of ``src`` into the writable host buffer ``out``; return its event."""
        s = self._buffer(src, "download source")
        host = self._host_view(out, writable=True, what="download destination")
        if host.nbytes > s.nbytes:
            raise ValueError(f"download of {host.nbytes} bytes from a buffer of {s.nbytes} bytes")
        if host.nbytes == 0:
            return self._marker(s.device, wait_for)
        mem = s.memory()
        ev = self._queues[s.device].memcpy_async(
            host, mem, host.nbytes, self._deps(s.device, wait_for)
        )
        self._keep(s.device, ev, (mem, host))
        return self._event(s.device, [ev])

    def same_context(self, a: int, b: int) -> bool:
        """Return whether devices ``a`` and ``b`` share a context (so direct copies are possible)."""
        return bool(self._contexts[self._index(a)] == self._contexts[self._index(b)])

    def copy(
        self,
        dst: DeviceBuffer,
        src: DeviceBuffer,
        nbytes: int | None = None,
        *,
        queue_device: int | None = None,
        wait_for: Sequence[Event] = (),
        staged: bool | None = None,
    ) -> SyclEvent:
        """Copy ``nbytes`` (default: all of ``src``) device to device; return its event.

        ``staged=None`` copies directly on the queue of ``queue_device`` (default
        ``src.device``) when both buffers share its context and
        :meth:`copy_route` allows it, and through host memory otherwise; ``True`` forces the host-staged (legacy) path,
        ``False`` forbids it.
        """
        d = self._buffer(dst, "copy destination")
        s = self._buffer(src, "copy source")
        n = s.nbytes if nbytes is None else nbytes
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValueError(f"copy size must be an int >= 0, got {n!r}")
        if n < 0 or n > s.nbytes or n > d.nbytes:
            raise ValueError(f"copy of {n} bytes does not fit the buffers ({s.nbytes}, {d.nbytes})")
        q = s.device if queue_device is None else self._index(queue_device)
        direct_ok = self.same_context(d.device, s.device) and self.same_context(q, s.device)
        if staged is None and direct_ok and d.device != s.device:
            direct_ok = self.copy_route(s.device, d.device)[0] == "direct"
        if staged is False and not direct_ok:
            raise ValueError(
                "direct copy needs both buffers and the queue in one context; use staged=True"
            )
        if n == 0:
            return self._marker(q, wait_for)
        if staged is None:
            staged = not direct_ok
        if not staged:
            dmem, smem = d.view(0, n).memory(), s.view(0, n).memory()
            ev = self._queues[q].memcpy_async(dmem, smem, n, self._deps(q, wait_for))
            self._keep(q, ev, (dmem, smem))
            return self._event(q, [ev])
        return self._copy_staged(d, s, n, wait_for)

    def _copy_staged(
        self, d: SyclBuffer, s: SyclBuffer, n: int, wait_for: Sequence[Event]
    ) -> SyclEvent:
        staging = bytearray(n)
        smem = s.view(0, n).memory()
        first = self._queues[s.device].memcpy_async(
            staging, smem, n, self._deps(s.device, wait_for)
        )
        self._keep(s.device, first, (smem, staging))
        if self.same_context(s.device, d.device):
            deps = [first]
        else:
            # Events of another context cannot gate this queue: wait on the host.
            first.wait()
            deps = []
        dmem = d.view(0, n).memory()
        second = self._queues[d.device].memcpy_async(dmem, staging, n, deps)
        self._keep(d.device, second, (dmem, staging))
        return self._event(d.device, [first, second])

    def fill(
        self,
        dst: DeviceBuffer,
        pattern: bytes,
        nbytes: int | None = None,
        *,
        wait_for: Sequence[Event] = (),
    ) -> SyclEvent:
        """Fill ``nbytes`` (default: all) of ``dst`` with the repeated ``pattern``; return its event."""
        d = self._buffer(dst, "fill destination")
        pattern = bytes(pattern)
        if not pattern:
            raise ValueError("fill pattern must not be empty")
        n = d.nbytes if nbytes is None else nbytes
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValueError(f"fill size must be an int >= 0, got {n!r}")
        if n < 0 or n > d.nbytes:
            raise ValueError(f"fill of {n} bytes does not fit the buffer of {d.nbytes} bytes")
        # The Level Zero rule, so that code tested here also runs there.
        check_fill(pattern, n)
        if n == 0:
            return self._marker(d.device, wait_for)
        if pattern.count(pattern[0]) == len(pattern):
            # One repeated byte: the runtime's own fill (zeCommandListAppendMemoryFill
            # on Level Zero). dpctl's memset blocks, so the waits happen first.
            for ev in wait_for:
                ev.wait()
            d.view(0, n).memory().memset(pattern[0])
            return self._marker(d.device, ())
        # dpctl's memset is blocking and byte-only: upload one seed block,
        # then double the filled prefix with in-queue copies.
        seed_len = min(n, max(len(pattern), _FILL_SEED_BYTES // len(pattern) * len(pattern)))
        seed = pattern * (seed_len // len(pattern))
        events = [self.upload(d, seed, wait_for=wait_for).dpctl_events[-1]]
        filled = seed_len
        queue = self._queues[d.device]
        while filled < n:
            step = min(filled, n - filled)
            dmem, smem = d.view(filled, step).memory(), d.view(0, step).memory()
            ev = queue.memcpy_async(dmem, smem, step)
            self._keep(d.device, ev, (dmem, smem))
            events.append(ev)
            filled += step
        return self._event(d.device, events)

    # -- kernels -----------------------------------------------------------

    def _kernel(self, device: int, name: str) -> Any:
        i = self._index(device)
        if name not in KERNELS:
            raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
        k = self._kernels.get((i, name))
        if k is None:
            ctx = self._contexts[i]
            program = next((p for c, p in self._programs if c == ctx), None)
            if program is None:
                dpctl = load_dpctl()
                program = dpctl.program.create_program_from_spirv(self._queues[i], spirv_bytes())
                self._programs.append((ctx, program))
            k = program.get_sycl_kernel(name)
            self._kernels[(i, name)] = k
        return k

    def launch(
        self,
        kernel: str,
        device: int,
        args: Sequence[DeviceBuffer | int],
        global_size: int,
        *,
        wait_for: Sequence[Event] = (),
    ) -> SyclEvent:
        """Run one of l0mem's kernels over ``global_size`` work-items; return its event."""
        i = self._index(device)
        info = check_launch_args(kernel, args, self, device=i)
        if isinstance(global_size, bool) or not isinstance(global_size, int) or global_size < 0:
            raise KernelArgumentError(f"global size must be an int >= 0, got {global_size!r}")
        kargs: list[object] = []
        for spec, value in zip(info.args, args, strict=True):
            where = f"{kernel} argument '{spec.name}'"
            if spec.kind == "buffer":
                if not isinstance(value, SyclBuffer):
                    raise KernelArgumentError(
                        f"{where} belongs to another backend ({type(value).__name__})"
                    )
                kargs.append(self._buffer(value, where).memory())
            else:
                kargs.append(ctypes.c_uint64(value))  # type: ignore[arg-type]
        if global_size == 0:
            return self._marker(i, wait_for)
        k = self._kernel(i, kernel)
        group = self.work_group_size(i, kernel, global_size)
        padded = -(-global_size // group) * group
        ev = self._queues[i].submit_async(k, kargs, [padded], [group], self._deps(i, wait_for))
        self._keep(i, ev, tuple(kargs))
        return self._event(i, [ev])

    # -- lifetime ----------------------------------------------------------

    def synchronize(self, device: int | None = None) -> None:
        """Wait until all work on ``device`` (default: every device) has finished."""
        targets = range(len(self._queues)) if device is None else [self._index(device)]
        for i in targets:
            self._queues[i].wait()
            self._pending[i].clear()

    @property
    def closed(self) -> bool:
        """Return whether :meth:`close` has run."""
        return self._closed

    def close(self) -> None:
        """Wait for outstanding work, free every allocation and drop queues and programs."""
        if self._closed:
            return
        try:
            for q in self._queues:
                q.wait()
        finally:
            for buf in list(self._buffers):
                buf.close()
            for pending in self._pending:
                pending.clear()
            self._kernels.clear()
            self._programs.clear()
            self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._devices)} device(s)"
        return f"<SyclBackend context={self.context_mode} {state}>"
