"""A small object layer over the Level Zero binding (modelled on cuda.core).

Objects come from their parents' factories: :func:`drivers` gives
:class:`Driver` objects, a driver gives :class:`Device` objects and
:class:`Context` objects, a context gives allocations, command lists, queues,
event pools and modules. Each object frees its handle on ``close()``, on
leaving a ``with`` block, when its context closes, or when it is garbage
collected (then failures are reported as :class:`ReleaseWarning`). Using an
object after it was closed raises ValueError; no released handle reaches the
driver. Closing a context waits for the allocations and appends other threads
have under way in it, and refuses new ones; closing one object while another
thread uses it stays the caller's business, as in Level Zero. The first :func:`drivers` call sets ``ZES_ENABLE_SYSMAN=1`` unless the
environment sets it already, so Sysman queries work for library users.

What it may import: only :mod:`l0mem._ze` and the standard library, nothing of
the tools above it.

C routines are reached as the typed attributes of ``_ze.api()``; structs,
enumerations and handle types through their classes in ``_ze.structs``,
``enums`` and ``scalars``, never by a name string, so a type checker follows
every one. The backend over this layer is ``backends.levelzero``.

Between its modules (and for code building on the layer) objects talk through
public methods, never each other's private attributes: ``register_release``
on a context or an object hands a new object's release call to its owner;
``live_handle()`` gives an object's raw handle for a driver call after
checking it is still open; ``Event.hold()`` keeps host buffers until the
event is waited on; ``Context.live_handles`` counts what a context still owns.
"""

from l0mem.core._lifetime import ReleaseWarning
from l0mem.core.commands import CommandList, CommandQueue, Fence, ImmediateCommandList
from l0mem.core.context import Context
from l0mem.core.device import (
    ComputeProperties,
    Device,
    DeviceProperties,
    MemoryProperties,
    MemoryState,
    P2PProperties,
    kernel_driver_of,
)
from l0mem.core.driver import Driver, DriverProperties, decode_driver_version, drivers
from l0mem.core.events import Event, EventPool
from l0mem.core.memory import (
    Allocation,
    AllocationProperties,
    DeviceAllocation,
    HostAllocation,
    IpcMapping,
    SharedAllocation,
)
from l0mem.core.module import Kernel, KernelProperties, Module, ModuleBuildError

__all__ = [
    "Allocation",
    "AllocationProperties",
    "CommandList",
    "CommandQueue",
    "ComputeProperties",
    "Context",
    "Device",
    "DeviceAllocation",
    "DeviceProperties",
    "Driver",
    "DriverProperties",
    "Event",
    "EventPool",
    "Fence",
    "HostAllocation",
    "ImmediateCommandList",
    "IpcMapping",
    "Kernel",
    "KernelProperties",
    "MemoryProperties",
    "MemoryState",
    "Module",
    "ModuleBuildError",
    "P2PProperties",
    "ReleaseWarning",
    "SharedAllocation",
    "decode_driver_version",
    "drivers",
    "kernel_driver_of",
]
