"""An allocation the runtime refused, named in its error: the size, the memory and the device.

A driver's out-of-memory result names neither the size asked for nor the
device (``zeMemAllocDevice: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY``), and dpctl's
names neither well. :func:`naming_allocation` wraps one allocation call of a
backend: an out-of-memory error leaving it is raised again, of the same class,
with both named in its one line, and carries the :class:`FailedAllocation`
(``failed_allocation``) for a caller that names devices its own way (the audit
names l0mem's device index, not the backend's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from l0mem.units import format_bytes


@dataclass(frozen=True)
class FailedAllocation:
    """An allocation the runtime refused: how much, of which memory, for which device, and its words."""

    nbytes: int
    device: int  # the backend's index of the device
    name: str  # the device's name as the runtime reports it
    memory: Literal["device", "host"]
    cause: str  # the runtime's own line for the failure

    def what(self, device: str | None = None) -> str:
        """Return the allocation as a line names it; ``device`` replaces ``device N (name)``."""
        where = device or f"device {self.device} ({self.name})"
        size = f"{format_bytes(self.nbytes)} ({self.nbytes:,} bytes)"
        if self.memory == "host":
            return f"{size} of host memory for {where}"
        return f"{size} on {where}"


def _named(exc: BaseException, failed: FailedAllocation) -> BaseException:
    """Return an error of ``exc``'s class whose line also names ``failed``."""
    from l0mem._ze.errors import ZeError

    text = f"allocating {failed.what()}"
    if isinstance(exc, ZeError):
        detail = f"{exc.detail}; {text}" if exc.detail else text
        named: BaseException = type(exc)(exc.code, exc.routine, detail)
    else:
        named = MemoryError(f"{text}: {failed.cause}" if failed.cause else text)
    named.failed_allocation = failed  # type: ignore[attr-defined]
    return named


@contextlib.contextmanager
def naming_allocation(
    nbytes: int, device: int, name: str, memory: Literal["device", "host"] = "device"
) -> Iterator[None]:
    """Raise an out-of-memory error of the block again with ``nbytes``, ``memory`` and the device named."""
    from l0mem._ze.errors import OutOfDeviceMemoryError, OutOfHostMemoryError

    try:
        yield
    except (OutOfDeviceMemoryError, OutOfHostMemoryError, MemoryError) as exc:
        cause = str(exc).splitlines()[0] if str(exc) else ""
        raise _named(exc, FailedAllocation(nbytes, device, name, memory, cause)) from exc


def failed_allocation(exc: BaseException) -> FailedAllocation | None:
    """Return the allocation ``exc`` failed, where :func:`naming_allocation` named it, else None."""
    found = getattr(exc, "failed_allocation", None)
    return found if isinstance(found, FailedAllocation) else None


__all__ = ["FailedAllocation", "failed_allocation", "naming_allocation"]
