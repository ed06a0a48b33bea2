"""What devices report: the frozen dataclasses :class:`~l0mem.core.Device` returns.

Each ``from_c`` builds one from the filled C struct, naming enumerated values
through the checked enums of :mod:`l0mem._ze.enums`.
"""

from __future__ import annotations

from dataclasses import dataclass

from l0mem._ze.enums import (
    ze_bandwidth_unit_t,
    ze_device_p2p_property_flag_t,
    ze_device_property_flag_t,
    ze_device_type_t,
    ze_latency_unit_t,
    zes_mem_health_t,
    zes_mem_loc_t,
)
from l0mem._ze.structs import (
    ze_device_compute_properties_t,
    ze_device_memory_properties_t,
    ze_device_p2p_bandwidth_exp_properties_t,
    ze_device_p2p_properties_t,
    ze_device_properties_t,
    zes_mem_properties_t,
    zes_mem_state_t,
)
from l0mem.core import _raw

_DEVICE_TYPES: dict[int, str] = {
    ze_device_type_t.ZE_DEVICE_TYPE_GPU: "GPU",
    ze_device_type_t.ZE_DEVICE_TYPE_CPU: "CPU",
    ze_device_type_t.ZE_DEVICE_TYPE_FPGA: "FPGA",
    ze_device_type_t.ZE_DEVICE_TYPE_MCA: "MCA",
    ze_device_type_t.ZE_DEVICE_TYPE_VPU: "VPU",
}
_BANDWIDTH_UNITS: dict[int, str] = {
    ze_bandwidth_unit_t.ZE_BANDWIDTH_UNIT_UNKNOWN: "unknown",
    ze_bandwidth_unit_t.ZE_BANDWIDTH_UNIT_BYTES_PER_NANOSEC: "bytes/ns",
    ze_bandwidth_unit_t.ZE_BANDWIDTH_UNIT_BYTES_PER_CLOCK: "bytes/clock",
}
_LATENCY_UNITS: dict[int, str] = {
    ze_latency_unit_t.ZE_LATENCY_UNIT_UNKNOWN: "unknown",
    ze_latency_unit_t.ZE_LATENCY_UNIT_NANOSEC: "ns",
    ze_latency_unit_t.ZE_LATENCY_UNIT_CLOCK: "clock",
    ze_latency_unit_t.ZE_LATENCY_UNIT_HOP: "hop",
}
_MEM_HEALTH: dict[int, str] = {
    zes_mem_health_t.ZES_MEM_HEALTH_UNKNOWN: "unknown",
    zes_mem_health_t.ZES_MEM_HEALTH_OK: "ok",
    zes_mem_health_t.ZES_MEM_HEALTH_DEGRADED: "degraded",
    zes_mem_health_t.ZES_MEM_HEALTH_CRITICAL: "critical",
    zes_mem_health_t.ZES_MEM_HEALTH_REPLACE: "replace",
}
_MEM_LOC: dict[int, str] = {
    zes_mem_loc_t.ZES_MEM_LOC_SYSTEM: "system",
    zes_mem_loc_t.ZES_MEM_LOC_DEVICE: "device",
}
_P2P_ACCESS = ze_device_p2p_property_flag_t.ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS
_P2P_ATOMICS = ze_device_p2p_property_flag_t.ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS


@dataclass(frozen=True)
class DeviceProperties:
    """Core properties of a device (``ze_device_properties_t``)."""

    name: str
    type: str
    vendor_id: int
    device_id: int
    flags: int
    subdevice_id: int
    core_clock_mhz: int
    max_mem_alloc_size: int
    timer_resolution_ns: int
    timestamp_valid_bits: int
    kernel_timestamp_valid_bits: int
    uuid: str

    @property
    def integrated(self) -> bool:
        """Return True for a device integrated with the host (shares system RAM)."""
        return bool(self.flags & ze_device_property_flag_t.ZE_DEVICE_PROPERTY_FLAG_INTEGRATED)

    @classmethod
    def from_c(cls, p: ze_device_properties_t) -> DeviceProperties:
        """Return the properties a filled ``ze_device_properties_t`` holds."""
        return cls(
            name=_raw.cstr(p.name),
            type=_DEVICE_TYPES.get(int(p.type), f"type {int(p.type)}"),
            vendor_id=int(p.vendorId),
            device_id=int(p.deviceId),
            flags=int(p.flags),
            subdevice_id=int(p.subdeviceId),
            core_clock_mhz=int(p.coreClockRate),
            max_mem_alloc_size=int(p.maxMemAllocSize),
            timer_resolution_ns=int(p.timerResolution),
            timestamp_valid_bits=int(p.timestampValidBits),
            kernel_timestamp_valid_bits=int(p.kernelTimestampValidBits),
            uuid=_raw.uuid_str(p.uuid.id),
        )


@dataclass(frozen=True)
class MemoryProperties:
    """One memory of a device (``ze_device_memory_properties_t``)."""

    name: str
    total_size: int
    max_clock_rate: int
    max_bus_width: int

    @classmethod
    def from_c(cls, m: ze_device_memory_properties_t) -> MemoryProperties:
        """Return the properties a filled ``ze_device_memory_properties_t`` holds."""
        return cls(
            name=_raw.cstr(m.name),
            total_size=int(m.totalSize),
            max_clock_rate=int(m.maxClockRate),
            max_bus_width=int(m.maxBusWidth),
        )


@dataclass(frozen=True)
class ComputeProperties:
    """Work-group limits of a device (``ze_device_compute_properties_t``)."""

    max_total_group_size: int
    max_group_size: tuple[int, int, int]
    max_group_count: tuple[int, int, int]
    max_shared_local_memory: int
    subgroup_sizes: tuple[int, ...]

    @classmethod
    def from_c(cls, p: ze_device_compute_properties_t) -> ComputeProperties:
        """Return the limits a filled ``ze_device_compute_properties_t`` holds."""
        return cls(
            max_total_group_size=int(p.maxTotalGroupSize),
            max_group_size=(int(p.maxGroupSizeX), int(p.maxGroupSizeY), int(p.maxGroupSizeZ)),
            max_group_count=(int(p.maxGroupCountX), int(p.maxGroupCountY), int(p.maxGroupCountZ)),
            max_shared_local_memory=int(p.maxSharedLocalMemory),
            subgroup_sizes=tuple(int(p.subGroupSizes[i]) for i in range(int(p.numSubGroupSizes))),
        )


@dataclass(frozen=True)
class P2PProperties:
    """Peer-to-peer capabilities from one device to another."""

    access: bool
    atomics: bool
    logical_bandwidth: int | None = None
    physical_bandwidth: int | None = None
    bandwidth_unit: str | None = None
    logical_latency: int | None = None
    physical_latency: int | None = None
    latency_unit: str | None = None

    @classmethod
    def from_c(
        cls, p: ze_device_p2p_properties_t, bw: ze_device_p2p_bandwidth_exp_properties_t | None
    ) -> P2PProperties:
        """Return the peer flags of ``p`` and, when the driver filled ``bw``, the bandwidth."""
        flags = int(p.flags)
        access, atomics = bool(flags & _P2P_ACCESS), bool(flags & _P2P_ATOMICS)
        if bw is None:
            return cls(access=access, atomics=atomics)
        # A figure in an unknown unit says nothing (Intel's driver reports 0 "unknown"
        # for a pair without peer access): it is left out, not shown as 0.
        bw_unit = _BANDWIDTH_UNITS.get(int(bw.bandwidthUnit), "unknown")
        lat_unit = _LATENCY_UNITS.get(int(bw.latencyUnit), "unknown")
        known_bw, known_lat = bw_unit != "unknown", lat_unit != "unknown"
        return cls(
            access=access,
            atomics=atomics,
            logical_bandwidth=int(bw.logicalBandwidth) if known_bw else None,
            physical_bandwidth=int(bw.physicalBandwidth) if known_bw else None,
            bandwidth_unit=bw_unit if known_bw else None,
            logical_latency=int(bw.logicalLatency) if known_lat else None,
            physical_latency=int(bw.physicalLatency) if known_lat else None,
            latency_unit=lat_unit if known_lat else None,
        )


@dataclass(frozen=True)
class MemoryState:
    """One Sysman memory module: where it is, its size and what is free."""

    location: str
    health: str
    size: int
    free: int
    physical_size: int
    on_subdevice: bool
    subdevice_id: int

    @property
    def used(self) -> int:
        """Return bytes in use (size minus free)."""
        return self.size - self.free

    @classmethod
    def from_c(cls, props: zes_mem_properties_t, state: zes_mem_state_t) -> MemoryState:
        """Return one module's state from its filled Sysman properties and state."""
        return cls(
            location=_MEM_LOC.get(int(props.location), f"location {int(props.location)}"),
            health=_MEM_HEALTH.get(int(state.health), "unknown"),
            size=int(state.size),
            free=int(state.free),
            physical_size=int(props.physicalSize),
            on_subdevice=bool(props.onSubdevice),
            subdevice_id=int(props.subdeviceId),
        )
