"""The argument checks every backend applies the same way: device indices, sizes, fill patterns.

Both backends check their arguments by these rules, so that a bad index, size
or pattern fails alike on Level Zero and SYCL, and code tested on one runs on
the other.

What it may import: :mod:`.base`.
"""

from __future__ import annotations

from l0mem.backends.base import DeviceBuffer

MAX_FILL_PATTERN = 128


def check_fill(pattern: bytes, nbytes: int) -> None:
    """Raise ValueError unless ``pattern`` can fill ``nbytes`` on every backend.

    Level Zero takes patterns whose size is a power of two up to the device's
    limit (128 bytes on Intel GPUs) and sizes that are a multiple of it; both
    backends apply the same rule so that code written for one runs on the other.
    """
    size = len(pattern)
    if size == 0:
        raise ValueError("fill pattern must not be empty")
    if size & (size - 1) or size > MAX_FILL_PATTERN:
        raise ValueError(
            f"fill pattern size must be a power of two from 1 to {MAX_FILL_PATTERN}, got {size}"
        )
    if nbytes % size:
        raise ValueError(f"fill size {nbytes} is not a multiple of the {size}-byte pattern")


def fill_size(pattern: bytes, nbytes: int | None, capacity: int) -> int:
    """Return the byte count of a fill (default: ``capacity``), checked by every backend's rules."""
    n = capacity if nbytes is None else nbytes
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"fill size must be an int >= 0, got {n!r}")
    if n > capacity:
        raise ValueError(f"fill of {n} bytes does not fit the buffer of {capacity} bytes")
    check_fill(pattern, n)
    return n


def device_index(device: int, count: int) -> int:
    """Return ``device`` when it indexes one of ``count`` devices; TypeError or IndexError if not."""
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device index must be an int, got {type(device).__name__}")
    if not 0 <= device < count:
        raise IndexError(f"device index {device} out of range 0..{count - 1}")
    return device


# The largest size a runtime's size_t carries: a bigger int would wrap (2**64 + 4096
# allocated 4096 bytes while the buffer said otherwise).
SIZE_MAX = (1 << 64) - 1


def check_allocation_size(nbytes: int) -> None:
    """Raise ValueError unless ``nbytes`` is a positive int a size_t holds (what every backend allocates)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f"allocation size must be a positive int, got {nbytes!r}")
    if nbytes > SIZE_MAX:
        raise ValueError(f"allocation size {nbytes} is past what a size_t holds (2**64 - 1)")


def copy_size(nbytes: int | None, src: DeviceBuffer, dst: DeviceBuffer) -> int:
    """Return the byte count of a device-to-device copy (default: all of ``src``), checked."""
    n = src.nbytes if nbytes is None else nbytes
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"copy size must be an int >= 0, got {n!r}")
    if n > src.nbytes or n > dst.nbytes:
        raise ValueError(f"copy of {n} bytes does not fit the buffers ({src.nbytes}, {dst.nbytes})")
    return n


__all__ = [
    "MAX_FILL_PATTERN",
    "check_allocation_size",
    "check_fill",
    "copy_size",
    "device_index",
    "fill_size",
]
