"""The tracer's binary records (layout kept equal to ``tracer.c``) and their decoding.

Every record starts with a 64-byte header, little-endian::

    u16 kind, u16 flags, u32 result, u64 time_ns (CLOCK_MONOTONIC), u64 ptr, u64 size,
    u64 context, i32 owner, i32 target, i16 owner_sub, i16 target_sub,
    u32 lost (records this process failed to write so far), u64 aux

A ``DEVICE`` record is followed by 288 more bytes (UUID, PCI address, name);
every other kind is the header alone. A file may end in zeros: room the
tracer took for records it has not written yet. Devices are numbered as ``zeDeviceGet``
lists them in the traced process (over all driver handles of the real driver);
a sub-device carries its root's index and its own id in ``*_sub``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

HEADER = struct.Struct("<HHIQQQQiihhIQ")
DEVICE_TAIL = struct.Struct("<16s4I256s")
assert HEADER.size == 64 and DEVICE_TAIL.size == 288

FLAG_SKIPPED = 1
FLAG_HAS_PCI = 2
FORMAT = 1


class Kind(IntEnum):
    """What a record describes; the names of the traced entry points are in ENTRY_POINTS."""

    PROCESS = 1
    DEVICE = 2
    ALLOC_DEVICE = 3
    ALLOC_HOST = 4
    ALLOC_SHARED = 5
    FREE = 6
    FREE_EXT = 7
    RESIDENT = 8
    EVICT = 9
    CONTEXT_CREATE = 10
    CONTEXT_CREATE_EX = 11
    CONTEXT_DESTROY = 12
    CAN_ACCESS_PEER = 13
    BEGIN = 14  # a call that moves memory starts; ``aux`` is its kind, its own record ends it


ENTRY_POINTS = {
    Kind.ALLOC_DEVICE: "zeMemAllocDevice",
    Kind.ALLOC_HOST: "zeMemAllocHost",
    Kind.ALLOC_SHARED: "zeMemAllocShared",
    Kind.FREE: "zeMemFree",
    Kind.FREE_EXT: "zeMemFreeExt",
    Kind.RESIDENT: "zeContextMakeMemoryResident",
    Kind.EVICT: "zeContextEvictMemory",
    Kind.CONTEXT_CREATE: "zeContextCreate",
    Kind.CONTEXT_CREATE_EX: "zeContextCreateEx",
    Kind.CONTEXT_DESTROY: "zeContextDestroy",
    Kind.CAN_ACCESS_PEER: "zeDeviceCanAccessPeer",
}


@dataclass(frozen=True)
class Record:
    """One decoded record (``uuid``, ``pci`` and ``name`` only for DEVICE records)."""

    kind: int
    flags: int
    result: int
    time_ns: int
    ptr: int
    size: int
    context: int
    owner: int
    target: int
    owner_sub: int
    target_sub: int
    lost: int
    aux: int
    uuid: str = ""
    pci: str | None = None
    name: str = ""

    @property
    def skipped(self) -> bool:
        """Whether the tracer skipped this call (peer residency under no_peer_residency)."""
        return bool(self.flags & FLAG_SKIPPED)


def uuid_text(raw: bytes) -> str:
    """Format 16 UUID bytes as 8-4-4-4-12 hex, as l0mem shows device UUIDs elsewhere."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def record_size(kind: int) -> int:
    """Return the size in bytes of a record of `kind`."""
    return HEADER.size + (DEVICE_TAIL.size if kind == Kind.DEVICE else 0)


def _record(fields: tuple[int, ...], **device: Any) -> Record:
    (kind, flags, result, time_ns, ptr, size, context, owner, target, osub, tsub, lost, aux) = (
        fields
    )
    return Record(
        kind,
        flags,
        result,
        time_ns,
        ptr,
        size,
        context,
        owner,
        target,
        osub,
        tsub,
        lost,
        aux,
        **device,
    )


def decode(buffer: bytes | memoryview) -> tuple[list[Record], int]:
    """Decode the whole records at the start of `buffer`; return them and the bytes used.

    A kind of 0 is a record not written yet (the tracer grows its file ahead of
    its records and writes each record's kind last): decoding stops there.
    """
    records: list[Record] = []
    offset = 0
    end = len(buffer)
    while end - offset >= HEADER.size:
        fields = HEADER.unpack_from(buffer, offset)
        if fields[0] == 0:
            break
        size = record_size(fields[0])
        if end - offset < size:
            break
        if fields[0] == Kind.DEVICE:
            uuid, domain, bus, dev, fn, name = DEVICE_TAIL.unpack_from(buffer, offset + HEADER.size)
            pci = f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}" if fields[1] & FLAG_HAS_PCI else None
            text = name.split(b"\0", 1)[0].decode("utf-8", "replace")
            records.append(_record(fields, uuid=uuid_text(uuid), pci=pci, name=text))
        else:
            records.append(_record(fields))
        offset += size
    return records, offset


# Every record's size is a multiple of this, and so is every record's offset in a file.
_ALIGN = 32


def _written(buffer: bytes, offset: int) -> bool:
    """Return whether a whole record header that looks written starts at ``offset``."""
    if offset + HEADER.size > len(buffer):
        return False
    kind, flags = struct.unpack_from("<HH", buffer, offset)
    return kind in Kind._value2member_map_ and flags <= FLAG_SKIPPED | FLAG_HAS_PCI


def past_unwritten(buffer: bytes, offset: int) -> int:
    """Return where the next written record after the unfinished one at ``offset`` starts."""
    for size in (HEADER.size, record_size(Kind.DEVICE)):
        if _written(buffer, offset + size):
            return offset + size
    offset += HEADER.size
    while offset < len(buffer) and not _written(buffer, offset):
        offset += _ALIGN
    return offset
