"""l0mem's kernels on the Level Zero backend: modules built once per device, group sizes, launches.

:class:`L0Kernels` is the part of :class:`l0mem.backends.LevelZeroBackend`
that builds the shipped SPIR-V, sizes each launch and appends it to the
device's immediate command list; the contexts, lists and buffer checks stay
in :mod:`l0mem.backends.levelzero`.

What it may import: :mod:`l0mem.core`; the backend's other modules
(:mod:`.base`, :mod:`.kernels`, :mod:`.l0_buffers`, :mod:`.l0_events`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from l0mem.backends.base import DeviceBuffer, Event
from l0mem.backends.common import one_at_a_time
from l0mem.backends.kernels import (
    SPIRV_RESOURCE,
    check_launch_args,
    check_module_kernels,
    spirv_bytes,
)
from l0mem.backends.l0_buffers import L0Buffer
from l0mem.backends.l0_events import L0Event
from l0mem.core import Context, Device, ImmediateCommandList, Kernel, Module
from l0mem.core import Event as CoreEvent
from l0mem.core.commands import UINT32_MAX

# Kernels launch over a global size rounded up to this, so the group size the
# driver suggests is a full work-group even for prime element counts.
_GROUP_ROUNDING = 256


class L0Kernels:
    """The kernel half of :class:`l0mem.backends.LevelZeroBackend`, a mixin over its contexts and lists."""

    if TYPE_CHECKING:
        _devices: list[Device]
        _ctx_of: list[Context]
        _lists: list[ImmediateCommandList]

        def _index(self, device: int) -> int: ...
        def _buffer(self, buf: DeviceBuffer, what: str = "buffer") -> L0Buffer: ...
        def _event(self, device: int) -> L0Event: ...
        def _waits(
            self, device: int, wait_for: Sequence[Event], ev: L0Event
        ) -> list[CoreEvent]: ...

    def _start_kernels(self) -> None:
        """Start with no module built."""
        self._modules: dict[int, Module] = {}
        self._kernels: dict[tuple[int, str], Kernel] = {}

    def _drop_kernels(self) -> None:
        """Forget every kernel and module (their context is being released)."""
        self._kernels.clear()
        self._modules.clear()

    @one_at_a_time
    def kernel(self, name: str, device: int) -> Kernel:
        """Return l0mem's kernel ``name`` built for ``device`` (built once per device)."""
        i = self._index(device)
        k = self._kernels.get((i, name))
        if k is None:
            module = self._modules.get(i)
            if module is None:
                module = self._ctx_of[i].create_module(self._devices[i], spirv_bytes())
                try:
                    names = set(module.kernel_names())
                    check_module_kernels(SPIRV_RESOURCE, names.__contains__)
                except BaseException:
                    module.close()
                    raise
                self._modules[i] = module
            k = module.kernel(name)
            self._kernels[(i, name)] = k
        return k

    @one_at_a_time
    def launch(
        self,
        kernel: str,
        device: int,
        args: Sequence[DeviceBuffer | int],
        global_size: int,
        *,
        wait_for: Sequence[Event] = (),
    ) -> L0Event:
        """Run one of l0mem's kernels over ``global_size`` work-items; return its event.

        ``args`` must match the kernel's layout in :data:`l0mem.backends.kernels.KERNELS`:
        buffers of this backend on ``device`` holding the elements the kernel
        touches, and ints for the scalars. The group size is the driver's
        suggestion for ``global_size`` rounded up to a multiple of 256, and
        enough groups are launched to cover ``global_size`` (the kernels skip
        ids at or past their element count). ``global_size`` must fit a uint32.
        """
        i = self._index(device)
        values = self._kernel_args(kernel, i, args)
        if isinstance(global_size, bool) or not isinstance(global_size, int):
            raise ValueError(f"global size must be an int, got {global_size!r}")
        if not 0 <= global_size <= UINT32_MAX:
            raise ValueError(
                f"global size {global_size} is outside 0 to 2**32 - 1 (Level Zero counts "
                "work-items in uint32); split the work into several launches"
            )
        if global_size == 0:
            ev = self._event(i)
            waits = self._waits(i, wait_for, ev)
            self._lists[i].barrier(wait_for=waits, signal=ev.core)
            return ev.submitted(waits)
        k = self.kernel(kernel, i)
        ev = self._event(i)
        padded = min(-(-global_size // _GROUP_ROUNDING) * _GROUP_ROUNDING, UINT32_MAX)
        group = k.suggest_group_size(padded)[0] or 1
        groups = -(-global_size // group)
        k.set_group_size(group)
        for index, value in enumerate(values):
            k.set_arg(index, value)
        waits = self._waits(i, wait_for, ev)
        self._lists[i].launch(k, groups, wait_for=waits, signal=ev.core)
        return ev.submitted(waits)

    def _kernel_args(
        self, kernel: str, device: int, args: Sequence[DeviceBuffer | int]
    ) -> list[Any]:
        """Return ``args`` as C values after checking them against ``kernel``'s layout."""
        info = check_launch_args(kernel, args, self, device=device)
        values: list[Any] = []
        for spec, value in zip(info.args, args, strict=True):
            if spec.kind == "buffer":
                if not isinstance(value, L0Buffer):
                    raise ValueError(
                        f"{kernel} argument '{spec.name}' must be a buffer of this Level Zero "
                        f"backend, got {type(value).__name__}"
                    )
                values.append(ctypes.c_void_p(self._buffer(value, spec.name).address))
            else:
                values.append(ctypes.c_uint64(int(value)))  # type: ignore[arg-type]
        return values
