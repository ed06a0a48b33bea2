"""l0mem's compiled kernels: the shipped SPIR-V, their argument layouts, and launchers.

The three kernels (sources in ``native_kernels/l0mem_kernels.cl``) run one
work-item per element over ``n`` elements:

- ``l0mem_f32_to_bf16(src f32*, dst u16*, n)``: BF16 compress, round to nearest even;
- ``l0mem_bf16_add_to_f32(src u16*, acc f32*, n)``: ``acc[i] += bf16 src[i]``;
- ``l0mem_f32_add(src f32*, acc f32*, n)``: ``acc[i] += src[i]``.

The launchers below take buffers of any :class:`l0mem.backends.Backend`, check
sizes and devices, and call ``backend.launch``; :func:`check_launch_args` is
the argument check every backend's ``launch`` applies as well, so a bad call
fails the same way on either. NumPy is not needed here.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from l0mem.backends.base import Backend, DeviceBuffer, Event

SPIRV_RESOURCE = "_spirv/l0mem_kernels.spv"


@dataclass(frozen=True)
class KernelArg:
    """One kernel argument: a global buffer of ``elem_size``-byte elements, or a u64 scalar."""

    name: str
    kind: Literal["buffer", "u64"]
    elem_size: int
    access: Literal["read", "write", "read_write", "value"]


@dataclass(frozen=True)
class KernelInfo:
    """A kernel's name, its arguments in order, and the bytes it moves per element."""

    name: str
    args: tuple[KernelArg, ...]

    def bytes_per_element(self) -> int:
        """Return bytes read plus bytes written per element."""
        total = 0
        for arg in self.args:
            if arg.kind == "buffer":
                total += arg.elem_size * (2 if arg.access == "read_write" else 1)
        return total


_N = KernelArg("n", "u64", 8, "value")

KERNELS: dict[str, KernelInfo] = {
    "l0mem_f32_to_bf16": KernelInfo(
        "l0mem_f32_to_bf16",
        (KernelArg("src", "buffer", 4, "read"), KernelArg("dst", "buffer", 2, "write"), _N),
    ),
    "l0mem_bf16_add_to_f32": KernelInfo(
        "l0mem_bf16_add_to_f32",
        (KernelArg("src", "buffer", 2, "read"), KernelArg("acc", "buffer", 4, "read_write"), _N),
    ),
    "l0mem_f32_add": KernelInfo(
        "l0mem_f32_add",
        (KernelArg("src", "buffer", 4, "read"), KernelArg("acc", "buffer", 4, "read_write"), _N),
    ),
}


@lru_cache(maxsize=1)
def spirv_bytes() -> bytes:
    """Return the shipped SPIR-V module holding all of l0mem's kernels."""
    return importlib.resources.files("l0mem").joinpath(SPIRV_RESOURCE).read_bytes()


class _NoWorkEvent:
    """The event of a launch over zero elements: complete once its dependencies are."""

    def __init__(self, wait_for: Sequence[Event]) -> None:
        self._wait_for = tuple(wait_for)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every event this one depends on has finished (CopyTimeout past ``timeout``)."""
        for ev in self._wait_for:
            ev.wait(timeout)

    def elapsed_ns(self) -> int | None:
        """Return 0: nothing ran on the device."""
        return 0


class MissingKernelsError(RuntimeError):
    """A SPIR-V module that built but lacks some of the kernels in ``KERNELS``."""

    def __init__(self, module: str, missing: Sequence[str]) -> None:
        """Name the module and the kernels it lacks."""
        self.module = module
        self.missing = tuple(missing)
        super().__init__(
            f"SPIR-V module {module} built but lacks l0mem's kernel(s) {', '.join(self.missing)}; "
            "reinstall l0mem or rebuild native_kernels/ (clang-15, llvm-spirv-15)"
        )


def check_module_kernels(module: str, has: Callable[[str], bool]) -> None:
    """Raise MissingKernelsError naming every kernel of ``KERNELS`` for which ``has`` is False.

    A module that builds proves nothing about its contents (issue 9): each
    backend checks, once per build, that all of l0mem's kernels are there.
    """
    missing = [name for name in KERNELS if not has(name)]
    if missing:
        raise MissingKernelsError(module, missing)


class KernelArgumentError(ValueError, TypeError):
    """Arguments that do not fit a kernel's layout in ``KERNELS``.

    A ValueError, and also a TypeError for callers that catch a wrong type as one.
    """


_U64_MAX = (1 << 64) - 1


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True as an element count is a bug.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_count(n: int) -> None:
    if not _is_int(n):
        raise KernelArgumentError(f"element count must be an int, got {type(n).__name__}")
    if n < 0:
        raise KernelArgumentError(f"element count must be >= 0, got {n}")


def _owner(buf: object) -> object:
    try:
        return getattr(buf, "backend", None)
    except ValueError:
        # A closed buffer may refuse every attribute; its owner is still unknown here.
        return None


def check_launch_args(
    kernel: str,
    args: Sequence[object],
    backend: object | None = None,
    *,
    device: int | None = None,
) -> KernelInfo:
    """Return ``kernel``'s KernelInfo after checking ``args`` against its layout; KernelArgumentError if not.

    Buffers must not be ints and must carry ``nbytes`` and ``device``; a buffer
    that names its backend (a ``backend`` attribute) must name ``backend`` when
    one is given, and lie on ``device`` when one is given. Scalars must be ints
    (not bools) in the u64 range. With an element count ``n`` among the scalars,
    every buffer must hold ``n`` elements: the kernels touch ``[0, n)``.
    """
    info = KERNELS.get(kernel)
    if info is None:
        raise KernelArgumentError(f"unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    if len(args) != len(info.args):
        raise KernelArgumentError(f"{kernel} takes {len(info.args)} arguments, got {len(args)}")
    for spec, value in zip(info.args, args, strict=True):
        where = f"{kernel} argument '{spec.name}'"
        if spec.kind == "buffer":
            if isinstance(value, int) or not all(
                hasattr(value, attr) for attr in ("nbytes", "device")
            ):
                raise KernelArgumentError(
                    f"{where} must be a device buffer, got {type(value).__name__}"
                )
            owner = _owner(value)
            if backend is not None and owner is not None and owner is not backend:
                raise KernelArgumentError(f"{where} belongs to another backend")
            on = getattr(value, "device", None)
            if device is not None and on != device:
                raise KernelArgumentError(f"{where} is on device {on}, the launch on device {device}")
        else:
            if not _is_int(value):
                raise KernelArgumentError(f"{where} must be an int, got {type(value).__name__}")
            if not 0 <= value <= _U64_MAX:  # type: ignore[operator]
                raise KernelArgumentError(f"{where} must be in 0..2**64-1, got {value}")
    n = next((v for spec, v in zip(info.args, args, strict=True) if spec.name == "n"), None)
    if isinstance(n, int):
        for spec, value in zip(info.args, args, strict=True):
            size = getattr(value, "nbytes", None) if spec.kind == "buffer" else None
            if isinstance(size, int) and size < n * spec.elem_size:
                raise KernelArgumentError(
                    f"{kernel} argument '{spec.name}' holds {size} bytes, "
                    f"{n} elements need {n * spec.elem_size}"
                )
    return info


def launch_elementwise(
    backend: Backend,
    kernel: str,
    buffers: Sequence[DeviceBuffer],
    n: int,
    *,
    wait_for: Sequence[Event] = (),
) -> Event:
    """Validate ``buffers`` against ``kernel``'s layout and run it over ``n`` elements; return its event."""
    info = KERNELS.get(kernel)
    if info is None:
        raise KernelArgumentError(f"unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    _check_count(n)
    buffer_args = [a for a in info.args if a.kind == "buffer"]
    if len(buffers) != len(buffer_args):
        raise KernelArgumentError(f"{kernel} takes {len(buffer_args)} buffers, got {len(buffers)}")
    check_launch_args(kernel, [*buffers, n], backend)
    devices = {buf.device for buf in buffers}
    if len(devices) != 1:
        raise KernelArgumentError(
            f"{kernel}: buffers are on different devices ({', '.join(map(str, sorted(devices)))})"
        )
    if n == 0:
        return _NoWorkEvent(wait_for)
    return backend.launch(kernel, buffers[0].device, [*buffers, n], n, wait_for=wait_for)


def compress_bf16(
    backend: Backend,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    n: int,
    *,
    wait_for: Sequence[Event] = (),
) -> Event:
    """Write the BF16 of ``n`` FP32 values of ``src`` into ``dst``; return the launch event."""
    return launch_elementwise(backend, "l0mem_f32_to_bf16", [src, dst], n, wait_for=wait_for)


def decompress_add_bf16(
    backend: Backend,
    src: DeviceBuffer,
    acc: DeviceBuffer,
    n: int,
    *,
    wait_for: Sequence[Event] = (),
) -> Event:
    """Add ``n`` BF16 values of ``src`` into the FP32 ``acc``; return the launch event."""
    return launch_elementwise(backend, "l0mem_bf16_add_to_f32", [src, acc], n, wait_for=wait_for)


def add_f32(
    backend: Backend,
    src: DeviceBuffer,
    acc: DeviceBuffer,
    n: int,
    *,
    wait_for: Sequence[Event] = (),
) -> Event:
    """Add ``n`` FP32 values of ``src`` into ``acc``; return the launch event."""
    return launch_elementwise(backend, "l0mem_f32_add", [src, acc], n, wait_for=wait_for)


__all__ = [
    "KERNELS",
    "KernelArg",
    "KernelArgumentError",
    "KernelInfo",
    "MissingKernelsError",
    "add_f32",
    "check_launch_args",
    "check_module_kernels",
    "compress_bf16",
    "decompress_add_bf16",
    "launch_elementwise",
    "spirv_bytes",
]
