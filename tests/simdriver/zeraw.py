"""A minimal raw ctypes harness over the Level Zero loader, for testing the simulated driver.

Independent of l0mem's own binding on purpose: the simulator's tests must not
depend on the code they are used to test. Struct layouts follow the API 1.4
headers in /usr/include/level_zero; test_simdriver checks them against the C sizes.
"""

from __future__ import annotations

import ctypes
import os
import struct
import time
from collections.abc import Callable, Iterable
from ctypes import (
    Structure,
    byref,
    c_char,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)

SUCCESS = 0
NOT_READY = 1
DEVICE_LOST = 0x70000001
OUT_OF_HOST_MEMORY = 0x70000002
OUT_OF_DEVICE_MEMORY = 0x70000003
MODULE_BUILD_FAILURE = 0x70000004
UNINITIALIZED = 0x78000001
UNSUPPORTED_FEATURE = 0x78000003
INVALID_ARGUMENT = 0x78000004
INVALID_NULL_HANDLE = 0x78000005
INVALID_NULL_POINTER = 0x78000007
INVALID_SIZE = 0x78000008
INVALID_KERNEL_NAME = 0x78000011
INVALID_GROUP_SIZE_DIMENSION = 0x78000013
INVALID_KERNEL_ARGUMENT_INDEX = 0x78000015
INVALID_KERNEL_ARGUMENT_SIZE = 0x78000016

ST_DRIVER_PROPERTIES = 0x1
ST_DEVICE_PROPERTIES = 0x3
ST_DEVICE_MEMORY_PROPERTIES = 0x7
ST_DEVICE_P2P_PROPERTIES = 0xB
ST_CONTEXT_DESC = 0xD
ST_COMMAND_QUEUE_DESC = 0xE
ST_COMMAND_LIST_DESC = 0xF
ST_EVENT_POOL_DESC = 0x10
ST_EVENT_DESC = 0x11
ST_FENCE_DESC = 0x12
ST_DEVICE_MEM_ALLOC_DESC = 0x15
ST_HOST_MEM_ALLOC_DESC = 0x16
ST_MEMORY_ALLOCATION_PROPERTIES = 0x17
ST_EXTERNAL_MEMORY_EXPORT_DESC = 0x18
ST_EXTERNAL_MEMORY_EXPORT_FD = 0x1A
ST_MODULE_DESC = 0x1B
ST_KERNEL_DESC = 0x1D
ST_KERNEL_PROPERTIES = 0x1E
ST_PCI_EXT_PROPERTIES = 0x10008
ST_DEVICE_PROPERTIES_1_2 = 0x20006
ST_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES = 0x2000A
ZES_ST_DEVICE_PROPERTIES = 0x1
ZES_ST_PCI_PROPERTIES = 0x2
ZES_ST_MEM_PROPERTIES = 0xB
ZES_ST_MEM_STATE = 0x1E

DEVICE_PROPERTY_FLAG_SUBDEVICE = 2

MEMORY_TYPE_UNKNOWN = 0
MEMORY_TYPE_HOST = 1
MEMORY_TYPE_DEVICE = 2
MEMORY_TYPE_SHARED = 3
EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF = 2
EVENT_POOL_FLAG_HOST_VISIBLE = 1
EVENT_POOL_FLAG_KERNEL_TIMESTAMP = 4
MODULE_FORMAT_IL_SPIRV = 0
P2P_FLAG_ACCESS = 1
P2P_FLAG_ATOMICS = 2


class ZeError(RuntimeError):
    """A Level Zero call returned something other than ZE_RESULT_SUCCESS."""

    def __init__(self, what: str, code: int) -> None:
        """Record the failing call and its result code."""
        super().__init__(f"{what} returned 0x{code:08x}")
        self.code = code


class DeviceProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("type", c_int),
        ("vendorId", c_uint32),
        ("deviceId", c_uint32),
        ("flags", c_uint32),
        ("subdeviceId", c_uint32),
        ("coreClockRate", c_uint32),
        ("maxMemAllocSize", c_uint64),
        ("maxHardwareContexts", c_uint32),
        ("maxCommandQueuePriority", c_uint32),
        ("numThreadsPerEU", c_uint32),
        ("physicalEUSimdWidth", c_uint32),
        ("numEUsPerSubslice", c_uint32),
        ("numSubslicesPerSlice", c_uint32),
        ("numSlices", c_uint32),
        ("timerResolution", c_uint64),
        ("timestampValidBits", c_uint32),
        ("kernelTimestampValidBits", c_uint32),
        ("uuid", c_uint8 * 16),
        ("name", c_char * 256),
    ]


class DriverProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("uuid", c_uint8 * 16),
        ("driverVersion", c_uint32),
    ]


class DeviceMemoryProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("maxClockRate", c_uint32),
        ("maxBusWidth", c_uint32),
        ("totalSize", c_uint64),
        ("name", c_char * 256),
    ]


class P2PProperties(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32)]


class P2PBandwidthProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("logicalBandwidth", c_uint32),
        ("physicalBandwidth", c_uint32),
        ("bandwidthUnit", c_int),
        ("logicalLatency", c_uint32),
        ("physicalLatency", c_uint32),
        ("latencyUnit", c_int),
    ]


class PciAddress(Structure):
    _fields_ = [
        ("domain", c_uint32),
        ("bus", c_uint32),
        ("device", c_uint32),
        ("function", c_uint32),
    ]


class PciSpeed(Structure):
    _fields_ = [("gen", c_int32), ("width", c_int32), ("maxBandwidth", c_int64)]


class PciExtProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("address", PciAddress),
        ("maxSpeed", PciSpeed),
    ]


class ContextDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32)]


class DeviceMemAllocDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32), ("ordinal", c_uint32)]


class HostMemAllocDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32)]


class ExportDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32)]


class ExportFd(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32), ("fd", c_int)]


class AllocProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("type", c_int),
        ("id", c_uint64),
        ("pageSize", c_uint64),
    ]


class CommandQueueDesc(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("ordinal", c_uint32),
        ("index", c_uint32),
        ("flags", c_uint32),
        ("mode", c_int),
        ("priority", c_int),
    ]


class CommandListDesc(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("commandQueueGroupOrdinal", c_uint32),
        ("flags", c_uint32),
    ]


class EventPoolDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32), ("count", c_uint32)]


class EventDesc(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("index", c_uint32),
        ("signal", c_uint32),
        ("wait", c_uint32),
    ]


class FenceDesc(Structure):
    _fields_ = [("stype", c_int), ("pNext", c_void_p), ("flags", c_uint32)]


class TimestampData(Structure):
    _fields_ = [("kernelStart", c_uint64), ("kernelEnd", c_uint64)]


class KernelTimestampResult(Structure):
    _fields_ = [("global_", TimestampData), ("context", TimestampData)]


class ModuleDesc(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("format", c_int),
        ("inputSize", c_size_t),
        ("pInputModule", c_void_p),
        ("pBuildFlags", c_char_p),
        ("pConstants", c_void_p),
    ]


class KernelDesc(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("flags", c_uint32),
        ("pKernelName", c_char_p),
    ]


class GroupCount(Structure):
    _fields_ = [("x", c_uint32), ("y", c_uint32), ("z", c_uint32)]


class KernelProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("numKernelArgs", c_uint32),
        ("requiredGroupSizeX", c_uint32),
        ("requiredGroupSizeY", c_uint32),
        ("requiredGroupSizeZ", c_uint32),
        ("requiredNumSubGroups", c_uint32),
        ("requiredSubgroupSize", c_uint32),
        ("maxSubgroupSize", c_uint32),
        ("maxNumSubgroups", c_uint32),
        ("localMemSize", c_uint32),
        ("privateMemSize", c_uint32),
        ("spillMemSize", c_uint32),
        ("kid", c_uint8 * 16),
        ("mid", c_uint8 * 16),
    ]


class ZesMemState(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("health", c_int),
        ("free", c_uint64),
        ("size", c_uint64),
    ]


class ZesMemProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("type", c_int),
        ("onSubdevice", c_uint8),
        ("subdeviceId", c_uint32),
        ("location", c_int),
        ("physicalSize", c_uint64),
        ("busWidth", c_int32),
        ("numChannels", c_int32),
    ]


class ZesDeviceProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("core", DeviceProperties),
        ("numSubdevices", c_uint32),
        ("serialNumber", c_char * 64),
        ("boardNumber", c_char * 64),
        ("brandName", c_char * 64),
        ("modelName", c_char * 64),
        ("vendorName", c_char * 64),
        ("driverVersion", c_char * 64),
    ]


class ZesPciProperties(Structure):
    _fields_ = [
        ("stype", c_int),
        ("pNext", c_void_p),
        ("address", PciAddress),
        ("maxSpeed", PciSpeed),
        ("haveBandwidthCounters", c_uint8),
        ("havePacketCounters", c_uint8),
        ("haveReplayCounters", c_uint8),
    ]


class IpcMemHandle(Structure):
    _fields_ = [("data", c_char * 64)]


# C type name -> ctypes class, for the layout check in test_simdriver.
LAYOUTS: dict[str, type[Structure]] = {
    "ze_device_properties_t": DeviceProperties,
    "ze_driver_properties_t": DriverProperties,
    "ze_device_memory_properties_t": DeviceMemoryProperties,
    "ze_device_p2p_properties_t": P2PProperties,
    "ze_device_p2p_bandwidth_exp_properties_t": P2PBandwidthProperties,
    "ze_pci_ext_properties_t": PciExtProperties,
    "ze_context_desc_t": ContextDesc,
    "ze_device_mem_alloc_desc_t": DeviceMemAllocDesc,
    "ze_host_mem_alloc_desc_t": HostMemAllocDesc,
    "ze_external_memory_export_desc_t": ExportDesc,
    "ze_external_memory_export_fd_t": ExportFd,
    "ze_memory_allocation_properties_t": AllocProperties,
    "ze_command_queue_desc_t": CommandQueueDesc,
    "ze_command_list_desc_t": CommandListDesc,
    "ze_event_pool_desc_t": EventPoolDesc,
    "ze_event_desc_t": EventDesc,
    "ze_fence_desc_t": FenceDesc,
    "ze_kernel_timestamp_result_t": KernelTimestampResult,
    "ze_module_desc_t": ModuleDesc,
    "ze_kernel_desc_t": KernelDesc,
    "ze_group_count_t": GroupCount,
    "ze_kernel_properties_t": KernelProperties,
    "zes_mem_state_t": ZesMemState,
    "zes_mem_properties_t": ZesMemProperties,
    "zes_device_properties_t": ZesDeviceProperties,
    "zes_pci_properties_t": ZesPciProperties,
    "ze_ipc_mem_handle_t": IpcMemHandle,
}


def spirv_module(entries: dict[str, int]) -> bytes:
    """Return a minimal SPIR-V binary declaring kernel entry points with the given parameter counts."""
    words: list[int] = [0x07230203, 0x00010000, 0, 0, 0]
    next_id = 1
    functions: list[tuple[int, int]] = []
    for nparams in entries.values():
        functions.append((next_id, nparams))
        next_id += 1 + nparams
    for (fid, _), name in zip(functions, entries, strict=True):
        raw = name.encode() + b"\0"
        raw += b"\0" * (-len(raw) % 4)
        words.append(((3 + len(raw) // 4) << 16) | 15)  # OpEntryPoint Kernel %fid "name"
        words += [6, fid, *struct.unpack(f"<{len(raw) // 4}I", raw)]
    for fid, nparams in functions:
        words += [(5 << 16) | 54, 0, fid, 0, 0]  # OpFunction
        for p in range(nparams):
            words += [(3 << 16) | 55, 0, fid + 1 + p]  # OpFunctionParameter
        words += [(1 << 16) | 56]  # OpFunctionEnd
    words[3] = next_id  # id bound
    return struct.pack(f"<{len(words)}I", *words)


class Ze:
    """The loader plus the handful of calls the simulator's tests make."""

    def __init__(self) -> None:
        """Load libze_loader.so.1, call zeInit(0) and pick the first driver."""
        self.lib = ctypes.CDLL("libze_loader.so.1")
        self.check("zeInit", self.lib.zeInit(0))
        n = c_uint32(0)
        self.check("zeDriverGet", self.lib.zeDriverGet(byref(n), None))
        drivers = (c_void_p * n.value)()
        self.check("zeDriverGet", self.lib.zeDriverGet(byref(n), drivers))
        self.driver = c_void_p(drivers[0])

    @staticmethod
    def check(what: str, code: int) -> None:
        """Raise ZeError unless `code` is ZE_RESULT_SUCCESS."""
        if code != SUCCESS:
            raise ZeError(what, code & 0xFFFFFFFF)

    def call(self, name: str, *args: object) -> int:
        """Call loader function `name` and return its result code unchanged."""
        return int(getattr(self.lib, name)(*args)) & 0xFFFFFFFF

    def devices(self) -> list[c_void_p]:
        """Return the device handles of the driver."""
        n = c_uint32(0)
        self.check("zeDeviceGet", self.lib.zeDeviceGet(self.driver, byref(n), None))
        arr = (c_void_p * n.value)()
        self.check("zeDeviceGet", self.lib.zeDeviceGet(self.driver, byref(n), arr))
        return [c_void_p(arr[i]) for i in range(n.value)]

    def sub_devices(self, dev: c_void_p) -> list[c_void_p]:
        """Return the sub-device handles of `dev`."""
        n = c_uint32(0)
        self.check("zeDeviceGetSubDevices", self.lib.zeDeviceGetSubDevices(dev, byref(n), None))
        arr = (c_void_p * n.value)()
        if n.value:
            self.check("zeDeviceGetSubDevices", self.lib.zeDeviceGetSubDevices(dev, byref(n), arr))
        return [c_void_p(arr[i]) for i in range(n.value)]

    def sysman_memory(self, dev: c_void_p) -> list[tuple[ZesMemProperties, ZesMemState]]:
        """Return (properties, state) of each Sysman memory module of `dev`."""
        n = c_uint32(0)
        self.check(
            "zesDeviceEnumMemoryModules", self.lib.zesDeviceEnumMemoryModules(dev, byref(n), None)
        )
        mods = (c_void_p * n.value)()
        self.check(
            "zesDeviceEnumMemoryModules", self.lib.zesDeviceEnumMemoryModules(dev, byref(n), mods)
        )
        out = []
        for i in range(n.value):
            props = ZesMemProperties(stype=ZES_ST_MEM_PROPERTIES)
            self.check(
                "zesMemoryGetProperties",
                self.lib.zesMemoryGetProperties(c_void_p(mods[i]), byref(props)),
            )
            state = ZesMemState(stype=ZES_ST_MEM_STATE)
            self.check(
                "zesMemoryGetState", self.lib.zesMemoryGetState(c_void_p(mods[i]), byref(state))
            )
            out.append((props, state))
        return out

    def device_properties(
        self, dev: c_void_p, stype: int = ST_DEVICE_PROPERTIES
    ) -> DeviceProperties:
        """Return zeDeviceGetProperties for `dev`."""
        p = DeviceProperties(stype=stype)
        self.check("zeDeviceGetProperties", self.lib.zeDeviceGetProperties(dev, byref(p)))
        return p

    def memory_total(self, dev: c_void_p) -> int:
        """Return the totalSize of the device's first memory."""
        n = c_uint32(0)
        self.check(
            "zeDeviceGetMemoryProperties", self.lib.zeDeviceGetMemoryProperties(dev, byref(n), None)
        )
        arr = (DeviceMemoryProperties * n.value)()
        for item in arr:
            item.stype = ST_DEVICE_MEMORY_PROPERTIES
        self.check(
            "zeDeviceGetMemoryProperties", self.lib.zeDeviceGetMemoryProperties(dev, byref(n), arr)
        )
        return int(arr[0].totalSize)

    def context(self, devices: Iterable[c_void_p] | None = None) -> c_void_p:
        """Create a context over `devices` (all devices when None)."""
        desc = ContextDesc(stype=ST_CONTEXT_DESC)
        ctx = c_void_p()
        if devices is None:
            self.check(
                "zeContextCreate", self.lib.zeContextCreate(self.driver, byref(desc), byref(ctx))
            )
        else:
            devs = list(devices)
            arr = (c_void_p * len(devs))(*[d.value for d in devs])
            self.check(
                "zeContextCreateEx",
                self.lib.zeContextCreateEx(self.driver, byref(desc), len(devs), arr, byref(ctx)),
            )
        return ctx

    def alloc_device_rc(
        self, ctx: c_void_p, dev: c_void_p, size: int, export: bool = False
    ) -> tuple[int, int]:
        """Return (result, pointer) of zeMemAllocDevice, optionally exportable as dma-buf."""
        desc = DeviceMemAllocDesc(stype=ST_DEVICE_MEM_ALLOC_DESC)
        exp = ExportDesc(
            stype=ST_EXTERNAL_MEMORY_EXPORT_DESC, flags=EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF
        )
        if export:
            desc.pNext = ctypes.addressof(exp)
        ptr = c_void_p()
        rc = self.call(
            "zeMemAllocDevice", ctx, byref(desc), c_size_t(size), c_size_t(0), dev, byref(ptr)
        )
        return rc, int(ptr.value or 0)

    def alloc_device(self, ctx: c_void_p, dev: c_void_p, size: int, export: bool = False) -> int:
        """Return a device allocation of `size` bytes."""
        rc, ptr = self.alloc_device_rc(ctx, dev, size, export)
        self.check("zeMemAllocDevice", rc)
        return ptr

    def alloc_host(self, ctx: c_void_p, size: int) -> int:
        """Return a host allocation of `size` bytes."""
        desc = HostMemAllocDesc(stype=ST_HOST_MEM_ALLOC_DESC)
        ptr = c_void_p()
        self.check(
            "zeMemAllocHost",
            self.lib.zeMemAllocHost(ctx, byref(desc), c_size_t(size), c_size_t(0), byref(ptr)),
        )
        return int(ptr.value or 0)

    def free(self, ctx: c_void_p, ptr: int) -> None:
        """Free an allocation."""
        self.check("zeMemFree", self.lib.zeMemFree(ctx, c_void_p(ptr)))

    def alloc_properties(
        self, ctx: c_void_p, ptr: int, export_fd: bool = False
    ) -> tuple[AllocProperties, c_void_p, int]:
        """Return (properties, device handle, exported fd or -1) for `ptr`."""
        props = AllocProperties(stype=ST_MEMORY_ALLOCATION_PROPERTIES)
        fd = ExportFd(
            stype=ST_EXTERNAL_MEMORY_EXPORT_FD, flags=EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF, fd=-1
        )
        if export_fd:
            props.pNext = ctypes.addressof(fd)
        dev = c_void_p()
        self.check(
            "zeMemGetAllocProperties",
            self.lib.zeMemGetAllocProperties(ctx, c_void_p(ptr), byref(props), byref(dev)),
        )
        return props, dev, int(fd.fd)

    def make_resident(self, ctx: c_void_p, dev: c_void_p, ptr: int, size: int) -> None:
        """Make `ptr` resident on `dev`."""
        self.check(
            "zeContextMakeMemoryResident",
            self.lib.zeContextMakeMemoryResident(ctx, dev, c_void_p(ptr), c_size_t(size)),
        )

    def evict(self, ctx: c_void_p, dev: c_void_p, ptr: int, size: int) -> None:
        """Evict `ptr` from `dev`."""
        self.check(
            "zeContextEvictMemory",
            self.lib.zeContextEvictMemory(ctx, dev, c_void_p(ptr), c_size_t(size)),
        )

    def immediate_list(self, ctx: c_void_p, dev: c_void_p) -> c_void_p:
        """Create an immediate command list on `dev`."""
        desc = CommandQueueDesc(stype=ST_COMMAND_QUEUE_DESC)
        cl = c_void_p()
        self.check(
            "zeCommandListCreateImmediate",
            self.lib.zeCommandListCreateImmediate(ctx, dev, byref(desc), byref(cl)),
        )
        return cl

    def regular_list(self, ctx: c_void_p, dev: c_void_p) -> c_void_p:
        """Create a regular command list on `dev`."""
        desc = CommandListDesc(stype=ST_COMMAND_LIST_DESC)
        cl = c_void_p()
        self.check(
            "zeCommandListCreate", self.lib.zeCommandListCreate(ctx, dev, byref(desc), byref(cl))
        )
        return cl

    def queue(self, ctx: c_void_p, dev: c_void_p) -> c_void_p:
        """Create a command queue on `dev`."""
        desc = CommandQueueDesc(stype=ST_COMMAND_QUEUE_DESC)
        q = c_void_p()
        self.check(
            "zeCommandQueueCreate", self.lib.zeCommandQueueCreate(ctx, dev, byref(desc), byref(q))
        )
        return q

    def copy_rc(
        self, cl: c_void_p, dst: int, src: int, size: int, event: c_void_p | None = None
    ) -> int:
        """Return the result of appending a copy of `size` bytes."""
        return self.call(
            "zeCommandListAppendMemoryCopy",
            cl,
            c_void_p(dst),
            c_void_p(src),
            c_size_t(size),
            event,
            0,
            None,
        )

    def copy(
        self, cl: c_void_p, dst: int, src: int, size: int, event: c_void_p | None = None
    ) -> None:
        """Append a copy of `size` bytes."""
        self.check("zeCommandListAppendMemoryCopy", self.copy_rc(cl, dst, src, size, event))

    def fill(self, cl: c_void_p, ptr: int, pattern: bytes, size: int) -> None:
        """Append a fill of `size` bytes with `pattern`."""
        buf = ctypes.create_string_buffer(pattern, len(pattern))
        self.check(
            "zeCommandListAppendMemoryFill",
            self.lib.zeCommandListAppendMemoryFill(
                cl, c_void_p(ptr), buf, c_size_t(len(pattern)), c_size_t(size), None, 0, None
            ),
        )

    def event_pool(
        self, ctx: c_void_p, count: int, flags: int = EVENT_POOL_FLAG_HOST_VISIBLE
    ) -> c_void_p:
        """Create an event pool of `count` events."""
        desc = EventPoolDesc(stype=ST_EVENT_POOL_DESC, flags=flags, count=count)
        pool = c_void_p()
        self.check(
            "zeEventPoolCreate", self.lib.zeEventPoolCreate(ctx, byref(desc), 0, None, byref(pool))
        )
        return pool

    def event(self, pool: c_void_p, index: int) -> c_void_p:
        """Create event `index` of `pool`."""
        desc = EventDesc(stype=ST_EVENT_DESC, index=index)
        ev = c_void_p()
        self.check("zeEventCreate", self.lib.zeEventCreate(pool, byref(desc), byref(ev)))
        return ev

    def module_rc(self, ctx: c_void_p, dev: c_void_p, spirv: bytes) -> tuple[int, c_void_p, str]:
        """Return (result, module, build log) of zeModuleCreate on `spirv`."""
        buf = ctypes.create_string_buffer(spirv, len(spirv))
        desc = ModuleDesc(
            stype=ST_MODULE_DESC,
            format=MODULE_FORMAT_IL_SPIRV,
            inputSize=len(spirv),
            pInputModule=ctypes.addressof(buf),
            pBuildFlags=b"",
        )
        mod = c_void_p()
        log = c_void_p()
        rc = self.call("zeModuleCreate", ctx, dev, byref(desc), byref(mod), byref(log))
        size = c_size_t(0)
        self.check(
            "zeModuleBuildLogGetString", self.lib.zeModuleBuildLogGetString(log, byref(size), None)
        )
        text = ctypes.create_string_buffer(size.value)
        self.check(
            "zeModuleBuildLogGetString", self.lib.zeModuleBuildLogGetString(log, byref(size), text)
        )
        self.check("zeModuleBuildLogDestroy", self.lib.zeModuleBuildLogDestroy(log))
        return rc, mod, text.value.decode()

    def kernel_rc(self, mod: c_void_p, name: str) -> tuple[int, c_void_p]:
        """Return (result, kernel) of zeKernelCreate."""
        desc = KernelDesc(stype=ST_KERNEL_DESC, pKernelName=name.encode())
        k = c_void_p()
        return self.call("zeKernelCreate", mod, byref(desc), byref(k)), k

    def set_arg(self, kernel: c_void_p, index: int, value: int) -> None:
        """Set 8-byte argument `index` of `kernel` (a pointer or a ulong)."""
        v = c_uint64(value)
        self.check(
            "zeKernelSetArgumentValue",
            self.lib.zeKernelSetArgumentValue(kernel, index, c_size_t(8), byref(v)),
        )

    def launch_rc(
        self,
        cl: c_void_p,
        kernel: c_void_p,
        groups: tuple[int, int, int],
        event: c_void_p | None = None,
    ) -> int:
        """Return the result of appending a launch of `kernel` with `groups` work-groups."""
        count = GroupCount(*groups)
        return self.call(
            "zeCommandListAppendLaunchKernel", cl, kernel, byref(count), event, 0, None
        )


def read(ptr: int, size: int) -> bytes:
    """Return `size` bytes at host-visible address `ptr` (the simulator's memory is host memory)."""
    return ctypes.string_at(ptr, size)


def write(ptr: int, data: bytes) -> None:
    """Write `data` at host-visible address `ptr`."""
    ctypes.memmove(ptr, data, len(data))


def c_ptr(value: int) -> c_void_p:
    """Return `value` as a ctypes pointer."""
    return c_void_p(value)


def meminfo_kib(key: str) -> int:
    """Return field `key` of /proc/meminfo in KiB."""
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0])
    raise KeyError(key)


def pcp_free_kib() -> int:
    """Return the free pages parked in per-CPU page lists, in KiB, from /proc/zoneinfo."""
    # Kernels with per-CPU list auto-tuning (6.7+) can park hundreds of MiB of freed
    # pages there; MemFree and MemAvailable do not count them.
    pages = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            field = line.split()
            if len(field) == 2 and field[0] == "count:":
                pages += int(field[1])
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


def available_kib() -> int:
    """Return MemAvailable plus per-CPU free pages, in KiB: memory the system could hand out."""
    return meminfo_kib("MemAvailable") + pcp_free_kib()


def quiet_kib(read: Callable[[], int], rising_noise: bool, samples: int = 5) -> int:
    """Return `read()` with brief spikes from other processes filtered out.

    Other processes' short-lived allocations raise values like Shmem and lower
    the available memory for a moment; the minimum (rising_noise) or the maximum
    of a few samples is the level this process caused.
    """
    values = []
    for i in range(samples):
        if i:
            time.sleep(0.02)
        values.append(read())
    return min(values) if rising_noise else max(values)


def memfd_kib() -> int:
    """Return the host pages of the memfds this process holds open, in KiB, as the kernel counts them.

    Host memory outside the process's RSS can only be shared memory it holds
    (the simulator's memfd-kind mirrors are unmapped memfds; anon-kind ones are
    the keeper process's memory and never show here): each file's allocated
    blocks, counted once per file however many fds name it. Unlike Shmem or
    MemAvailable, no other process on the machine moves this figure.
    """
    from tests.support.child_site.host_model import memfd_bytes

    return memfd_bytes(["/proc/self/fd"], "/memfd:") // 1024


def rss_kib() -> int:
    """Return this process's VmRSS in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise KeyError("VmRSS")
