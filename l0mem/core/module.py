"""SPIR-V modules and their kernels.

A module's SPIR-V header is checked before the driver sees it
(:func:`check_spirv`): Intel's driver ends the whole process (exit status 10)
on a header it cannot read instead of returning an error.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from l0mem._ze import api
from l0mem._ze.enums import ze_module_format_t
from l0mem._ze.errors import ZeError
from l0mem._ze.structs import ze_kernel_desc_t, ze_kernel_properties_t, ze_module_desc_t
from l0mem.core import _raw
from l0mem.core._lifetime import OwnedHandle, discard
from l0mem.core._raw import UINT32_MAX, check_uint32
from l0mem.core.memory import Allocation, IpcMapping

if TYPE_CHECKING:
    from l0mem.core.context import Context
    from l0mem.core.device import Device


SPIRV_MAGIC = 0x07230203
_HEADER_WORDS = 5
# SPIR-V 1.0 to 1.6, the versions a Level Zero driver may take.
_MAX_MINOR = 6


def check_spirv(spirv: bytes) -> None:
    """Raise ValueError (one line) unless ``spirv`` starts with a well-formed SPIR-V header.

    The header is five 32-bit words in the module's byte order (told by the
    magic number): magic, version (1.0 to 1.6, bytes ``0 minor major 0``
    little end first), generator, id bound (at least 1) and schema (0). The
    whole module is a whole number of words.
    """
    data = bytes(spirv)
    if not data:
        raise ValueError("SPIR-V module is empty")
    if len(data) < 4 * _HEADER_WORDS or len(data) % 4:
        raise ValueError(
            f"not a SPIR-V module: {len(data)} bytes is not a whole number of 32-bit words "
            f"holding the {_HEADER_WORDS}-word header"
        )
    for order in "<>":
        magic, version, _generator, bound, schema = struct.unpack_from(f"{order}5I", data)
        if magic == SPIRV_MAGIC:
            break
    else:
        raise ValueError(f"not a SPIR-V module: magic number {data[:4].hex()} is not 07230203")
    major, minor = (version >> 16) & 0xFF, (version >> 8) & 0xFF
    if version & 0xFF0000FF or major != 1 or minor > _MAX_MINOR:
        raise ValueError(f"not a SPIR-V module: version word {version:#010x} is not 1.0 to 1.6")
    if bound < 1:
        raise ValueError("not a SPIR-V module: the id bound is 0")
    if schema != 0:
        raise ValueError(f"not a SPIR-V module: schema word {schema:#x} is not 0")


class ModuleBuildError(ZeError):
    """A module failed to build; ``build_log`` holds the compiler's output.

    A :class:`ZeError` carrying the driver's result code and routine, so code
    catching ZeError sees build failures too; ``error`` is the original one.
    """

    def __init__(self, error: ZeError, build_log: str) -> None:
        """Record the driver's ``error`` and the compiler's ``build_log``."""
        first = build_log.strip().splitlines()[0] if build_log.strip() else "no build log"
        super().__init__(error.code, error.routine, f"build log: {first}")
        self.explanation = f"module build failed ({error.explanation})"
        self.error = error
        self.build_log = build_log

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the original error and the whole build log."""
        return (type(self), (self.error, self.build_log))


@dataclass(frozen=True)
class KernelProperties:
    """Compile-time facts about a kernel (``ze_kernel_properties_t``)."""

    num_args: int
    required_group_size: tuple[int, int, int]
    required_subgroup_size: int
    max_subgroup_size: int
    max_num_subgroups: int
    local_mem_size: int
    private_mem_size: int
    spill_mem_size: int


class Module(OwnedHandle):
    """A SPIR-V module built for one device."""

    def __init__(
        self, context: Context, device: Device, spirv: bytes, build_flags: str = ""
    ) -> None:
        """Build ``spirv`` for ``device`` (use Context.create_module)."""
        check_spirv(spirv)
        data = ctypes.create_string_buffer(bytes(spirv), len(spirv))
        flags = build_flags.encode()
        desc = ze_module_desc_t(
            format=ze_module_format_t.ZE_MODULE_FORMAT_IL_SPIRV,
            inputSize=len(spirv),
            pInputModule=ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8)),
            pBuildFlags=flags,
        )
        h = ctypes.c_void_p()
        log = ctypes.c_void_p()
        try:
            _raw.call(
                api().zeModuleCreate,
                context.handle,
                device.handle,
                ctypes.byref(desc),
                ctypes.byref(h),
                ctypes.byref(log),
            )
        except ZeError as err:
            try:
                text = _take_log(log)
            except ZeError as log_err:
                # The build failure is the error to report, not the log's.
                text = f"(the build log could not be read: {log_err})"
            if h.value:
                discard(api().zeModuleDestroy, h)
            raise ModuleBuildError(err, text) from err
        self.build_log = _take_log(log)
        self._context = context
        self._device = device
        self._own_handle(context, _raw.address(h), api().zeModuleDestroy)

    @property
    def device(self) -> Device:
        """Return the device the module was built for."""
        return self._device

    def kernel_names(self) -> list[str]:
        """Return the names of the module's kernels."""
        handle = self.live_handle()
        count = ctypes.c_uint32(0)
        _raw.call(api().zeModuleGetKernelNames, handle, ctypes.byref(count), None)
        names = (ctypes.c_char_p * count.value)()
        _raw.call(api().zeModuleGetKernelNames, handle, ctypes.byref(count), names)
        return [n.decode() for n in names[: count.value] if n is not None]

    def kernel(self, name: str) -> Kernel:
        """Return a new kernel object for the kernel ``name``."""
        self._check_open()
        return Kernel(self, name)


class Kernel(OwnedHandle):
    """One kernel of a module, with its group size and arguments."""

    def __init__(self, module: Module, name: str) -> None:
        """Create kernel ``name`` of ``module`` (use Module.kernel)."""
        desc = ze_kernel_desc_t(pKernelName=name.encode())
        h = _raw.create(api().zeKernelCreate, module.live_handle(), ctypes.byref(desc))
        self._module = module
        self._name = name
        self._own_handle(module, h, api().zeKernelDestroy)
        self.group_size: tuple[int, int, int] | None = None

    @property
    def name(self) -> str:
        """Return the kernel's name."""
        return self._name

    @property
    def module(self) -> Module:
        """Return the module the kernel comes from."""
        return self._module

    @property
    def properties(self) -> KernelProperties:
        """Return the kernel's argument count and group-size requirements."""
        p = ze_kernel_properties_t()
        _raw.call(api().zeKernelGetProperties, self.live_handle(), ctypes.byref(p))
        return KernelProperties(
            num_args=int(p.numKernelArgs),
            required_group_size=(
                int(p.requiredGroupSizeX),
                int(p.requiredGroupSizeY),
                int(p.requiredGroupSizeZ),
            ),
            required_subgroup_size=int(p.requiredSubgroupSize),
            max_subgroup_size=int(p.maxSubgroupSize),
            max_num_subgroups=int(p.maxNumSubgroups),
            local_mem_size=int(p.localMemSize),
            private_mem_size=int(p.privateMemSize),
            spill_mem_size=int(p.spillMemSize),
        )

    def set_group_size(self, x: int, y: int = 1, z: int = 1) -> None:
        """Set the work-group size used by later launches (each dimension 1 to 2**32 - 1)."""
        handle = self.live_handle()
        check_uint32("group size", (x, y, z), 1)
        _raw.call(api().zeKernelSetGroupSize, handle, x, y, z)
        self.group_size = (x, y, z)

    def suggest_group_size(self, global_size: int | tuple[int, ...]) -> tuple[int, int, int]:
        """Return the driver's suggested group size for ``global_size`` work-items."""
        handle = self.live_handle()
        g = list(global_size) if isinstance(global_size, (tuple, list)) else [global_size]
        if not 1 <= len(g) <= 3:
            raise ValueError(f"global size must be 1 to 3 positive ints, got {global_size!r}")
        g = check_uint32("global size", g, 1)
        g += [1] * (3 - len(g))
        out = [ctypes.c_uint32(0) for _ in range(3)]
        _raw.call(
            api().zeKernelSuggestGroupSize,
            handle,
            g[0],
            g[1],
            g[2],
            *(ctypes.byref(o) for o in out),
        )
        return int(out[0].value), int(out[1].value), int(out[2].value)

    def set_arg(self, index: int, value: Any) -> None:
        """Set argument ``index``: an allocation (its address), a ctypes scalar, bytes, or None."""
        handle = self.live_handle()
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= UINT32_MAX:
            raise ValueError(
                f"kernel argument index must be an int from 0 to 2**32 - 1, got {index!r}"
            )
        if isinstance(value, (Allocation, IpcMapping)):
            if value.closed:
                raise ValueError("cannot pass a closed allocation as a kernel argument")
            arg: Any = ctypes.c_void_p(value.address)
        elif isinstance(value, (ctypes._SimpleCData, ctypes.Structure)):
            arg = value
        elif isinstance(value, (bytes, bytearray)):
            arg = ctypes.create_string_buffer(bytes(value), len(value))
        elif value is None:
            arg = ctypes.c_void_p(0)
        elif isinstance(value, int):
            raise TypeError(
                f"kernel argument {index}: give ints a C type, e.g. ctypes.c_uint64({value})"
            )
        else:
            raise TypeError(f"kernel argument {index}: unsupported type {type(value).__name__}")
        _raw.call(
            api().zeKernelSetArgumentValue, handle, index, ctypes.sizeof(arg), ctypes.byref(arg)
        )


def _take_log(log: ctypes.c_void_p) -> str:
    """Return the text of a build log and destroy it (empty when there is none)."""
    if not log.value:
        return ""
    try:
        size = ctypes.c_size_t(0)
        _raw.call(api().zeModuleBuildLogGetString, log, ctypes.byref(size), None)
        buf = ctypes.create_string_buffer(max(size.value, 1))
        _raw.call(api().zeModuleBuildLogGetString, log, ctypes.byref(size), buf)
        return buf.value.decode("utf-8", "replace")
    finally:
        _raw.call(api().zeModuleBuildLogDestroy, log)
