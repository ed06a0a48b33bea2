"""l0mem's kernels on the SYCL backend: programs built once per context, work-group sizes, launches.

:class:`SyclKernels` is the part of :class:`l0mem.backends.SyclBackend` that
builds the shipped SPIR-V, chooses each launch's work-group size and
enqueues the kernels; the backend's queues, contexts and buffer checks stay
in :mod:`l0mem.backends.sycl`.

What it may import: dpctl through :mod:`l0mem.sycl`; the backend's other
modules (:mod:`.base`, :mod:`.kernels`, :mod:`.sycl_buffers`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from l0mem.backends.base import DeviceBuffer, Event
from l0mem.backends.common import one_at_a_time
from l0mem.backends.kernels import (
    KERNELS,
    SPIRV_RESOURCE,
    KernelArgumentError,
    check_launch_args,
    check_module_kernels,
    spirv_bytes,
)
from l0mem.backends.sycl_buffers import SyclBuffer, SyclEvent
from l0mem.sycl import load_dpctl

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


def check_group_size_type(size: object) -> None:
    """Raise unless ``size`` is None or a positive int (TypeError for another type)."""
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"work-group size must be an int, got {type(size).__name__}")
    if size < 1:
        raise ValueError(f"work-group size must be positive, got {size}")


class SyclKernels:
    """The kernel half of :class:`l0mem.backends.SyclBackend`, a mixin over its devices and queues."""

    if TYPE_CHECKING:
        _devices: list[Any]
        _contexts: list[Any]
        _queues: list[Any]

        def _index(self, device: int) -> int: ...
        def _buffer(self, buf: object, what: str) -> SyclBuffer: ...
        def _deps(self, device: int, wait_for: Sequence[Event]) -> list[Any]: ...
        def _marker(self, device: int, wait_for: Sequence[Event]) -> SyclEvent: ...
        def _event(self, device: int, events: Sequence[Any]) -> SyclEvent: ...
        def _keep(self, device: int, event: Any, refs: tuple[object, ...]) -> None: ...
        def device_name(self, index: int) -> str: ...

    def _start_kernels(self) -> None:
        """Start with nothing built and each device's default work-group size."""
        self._work_group_size: int | None = None
        self._programs: list[tuple[Any, Any]] = []  # (context, program): one build per context
        self._kernels: dict[tuple[int, str], Any] = {}

    def _drop_kernels(self) -> None:
        """Forget every kernel and program (the backend is closing)."""
        self._kernels.clear()
        self._programs.clear()

    def _kernel(self, device: int, name: str) -> Any:
        """Return the dpctl kernel ``name`` for ``device``, building the program once per context."""
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
                check_module_kernels(SPIRV_RESOURCE, program.has_sycl_kernel)
                self._programs.append((ctx, program))
            k = program.get_sycl_kernel(name)
            self._kernels[(i, name)] = k
        return k

    def work_group_limit(self, device: int) -> int:
        """Return the largest work-group size every l0mem kernel accepts on ``device``."""
        return min(int(self._kernel(device, name).work_group_size) for name in KERNELS)

    def set_work_group_size(self, size: int | None) -> None:
        """Use ``size`` for every launch (None: the per-device default); ValueError if a kernel cannot."""
        check_group_size_type(size)
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

    @one_at_a_time
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
