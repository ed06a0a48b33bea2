"""The audit child's experiment: a set-up as an open backend plus an allocation policy.

Both kinds of set-up run through :func:`l0mem.backends.open_backend`: the
configuration is the backend kind, its devices and its context; the policy
is what happens to each allocation (dma-buf export, residency on peers)
before it is filled on its device. Device 0 of the backend owns every
allocation. A Level Zero set-up holds a :class:`LevelZeroBackend` and a SYCL
set-up a :class:`SyclBackend`, so every call beyond the :class:`Backend`
protocol (dma-buf export, residency, Sysman, the SYCL context) is typed.
:func:`open_experiment` opens the experiment a set-up spec
(:meth:`l0mem.audit.setups.SetupPlan.to_spec`) describes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from l0mem.backends import (
    Backend,
    DeviceBuffer,
    LevelZeroBackend,
    SyclBackend,
    level_zero_devices,
    open_backend,
)

BackendT = TypeVar("BackendT", bound=Backend)

# A backend that cannot tell its largest allocation: allocate each step in one piece.
_NO_LIMIT = 1 << 62

Checkpoint = Callable[[], None]


def _go_on() -> None:
    """The default checkpoint between driver calls: nothing stops an allocation."""


def _sample_offsets(nbytes: int, size: int) -> list[int]:
    """Return the start, middle and last whole-pattern offsets of ``nbytes`` (``size`` each)."""
    last = (nbytes // size - 1) * size
    return list(dict.fromkeys((0, (last // 2) // size * size, last)))


def fill_proved(backend: Backend, buf: DeviceBuffer, pattern: bytes) -> bool:
    """Fill ``buf`` with ``pattern``; return True when the fill is seen at start, middle and end.

    The audit fills every allocation so that lazily backed memory is committed;
    a fill that did not happen leaves memory untouched and a "clean" verdict
    would mean nothing (issue 9). Reading the pattern back alone proves
    nothing when it is zeros (fresh memory reads zero), so a canary (the
    pattern's complement, different in every byte) is written first at three
    places, each a whole pattern at a multiple of its length; the fill must
    replace all three. Those few bytes are all that is read or written besides.
    """
    size = len(pattern)
    if not size or buf.nbytes < size:
        backend.fill(buf, pattern).wait()
        return False
    offsets = _sample_offsets(buf.nbytes, size)
    canary = bytes(b ^ 0xFF for b in pattern)
    for offset in offsets:
        backend.upload(buf.view(offset, size), canary).wait()
    backend.fill(buf, pattern).wait()
    for offset in offsets:
        # Starts as the canary: a read-back that moves no byte (a driver whose copies
        # do not execute) must not pass for the pattern, least of all a zero pattern.
        out = bytearray(canary)
        backend.download(buf.view(offset, size), out).wait()
        if bytes(out) != pattern:
            return False
    return True


class Experiment(Generic[BackendT]):
    """An open backend and the allocations made on its device 0."""

    def __init__(
        self, backend: BackendT, devices: list[dict[str, Any]], note: str | None = None
    ) -> None:
        """Take ``backend`` (open) with the descriptions of the devices the run uses."""
        self.backend = backend
        self.devices = devices
        self.note = note  # e.g. fewer devices visible than planned
        self.buffers: list[DeviceBuffer] = []
        self.max_alloc = backend.memory(0).max_alloc or _NO_LIMIT

    def allocate(self, nbytes: int, pattern: bytes, between: Checkpoint = _go_on) -> bool:
        """Allocate ``nbytes`` on the owner device and fill it; return whether the fill shows.

        ``between`` runs after each driver call that may take host memory but
        the last; it raises to abandon the allocation (which stays in
        ``buffers``, so it is freed with the others).
        """
        buf = self.backend.allocate(0, nbytes)
        self.buffers.append(buf)
        between()
        return fill_proved(self.backend, buf, pattern)

    def free_all(self) -> tuple[int, int]:
        """Free every allocation; return (allocations, bytes) freed."""
        return self.free_newest(len(self.buffers))

    def free_newest(self, count: int) -> tuple[int, int]:
        """Free the ``count`` newest allocations; return (allocations, bytes) freed."""
        self.backend.synchronize()
        count, total = min(count, len(self.buffers)), 0
        for _ in range(count):
            buf = self.buffers.pop()
            total += buf.nbytes
            buf.close()  # closes an allocation's dma-buf descriptor too, once
        return count, total

    def device_values(self) -> dict[str, int]:
        """Return device-side memory values for the samples (none by default)."""
        return {}

    def device_label(self, index: int) -> str:
        """Return how a line names the backend's device ``index``: l0mem's index or SYCL filter, and name."""
        d = self.devices[index] if 0 <= index < len(self.devices) else {}
        name = d.get("name") or self.backend.device_name(index)
        if "index" in d:
            return f"device {d['index']} ({name})"
        return f"SYCL device {d.get('filter_string') or index} ({name})"

    def close(self) -> None:
        """Release the backend and everything it holds."""
        self.backend.close()


class L0Experiment(Experiment[LevelZeroBackend]):
    """A Level Zero set-up: one context, optional dma-buf export and residency on peers."""

    def __init__(
        self,
        backend: LevelZeroBackend,
        devices: list[dict[str, Any]],
        *,
        flat_index: list[int],
        peers: list[int],
        dmabuf: bool,
        note: str | None = None,
    ) -> None:
        """Take ``backend`` over the devices ``flat_index`` names (l0mem's device indices)."""
        super().__init__(backend, devices, note)
        self.flat_index = flat_index
        self.peers = peers  # backend indices each allocation is made resident on
        self.dmabuf = dmabuf

    def allocate(self, nbytes: int, pattern: bytes, between: Checkpoint = _go_on) -> bool:
        """Allocate ``nbytes`` on the owner device, apply the policy, and fill it; return whether it shows."""
        buf = self.backend.allocate(0, nbytes, export_dmabuf=self.dmabuf)
        self.buffers.append(buf)  # first, so that a failure below still frees it
        between()
        if self.dmabuf:
            # The export descriptor alone may never reach a driver's export path
            # (xe_gem_prime_export); asking for the fd does, as an importer would.
            # The allocation owns the new descriptor and closes it when it is freed.
            buf.allocation.dmabuf_fd()
            between()
        for peer in self.peers:
            self.backend.make_resident(buf, peer)
            between()
        return fill_proved(self.backend, buf, pattern)

    def device_values(self) -> dict[str, int]:
        """Return ``sysman.<index>.used`` for the devices of the run (empty without Sysman)."""
        out: dict[str, int] = {}
        for i, flat_i in enumerate(self.flat_index):
            used = self.backend.sysman_used(i)
            if used is not None:
                out[f"sysman.{flat_i}.used"] = used
        return out


class SyclExperiment(Experiment[SyclBackend]):
    """A SYCL set-up: ``malloc_device`` in the default context or a context of its own."""


def open_experiment(spec: dict[str, Any]) -> L0Experiment | SyclExperiment:
    """Return the open experiment of a set-up spec; LookupError when its devices are not visible."""
    if spec["backend"] == "l0":
        return _open_l0(spec)
    return _open_sycl(spec)


def _close_after_failure(backend: Backend) -> None:
    # The failure that brought us here is the one to report, not a release error.
    with contextlib.suppress(Exception):
        backend.close()


def _open_l0(spec: dict[str, Any]) -> L0Experiment:
    flat = level_zero_devices()
    wanted = [int(i) for i in spec["l0_devices"]]
    present = [i for i in wanted if i < len(flat)]
    if not wanted or wanted[0] not in present:
        raise LookupError(
            f"Level Zero device {wanted[0] if wanted else '?'} is not visible "
            f"({len(flat)} device(s) found)"
        )
    note = None
    if len(present) < len(wanted):
        if not spec.get("allow_fewer_devices"):
            raise LookupError(
                f"only {len(flat)} Level Zero device(s) visible, the set-up needs {len(wanted)}"
            )
        note = f"{len(present)} of {len(wanted)} planned device(s) visible"
    owner = flat[present[0]]
    # A context holds devices of one driver; "single" is the owner alone.
    members = [i for i in present if flat[i].driver is owner.driver]
    if spec["context"] == "single":
        members = members[:1]
    backend = open_backend("l0", [flat[i] for i in members])
    try:
        if not isinstance(backend, LevelZeroBackend):
            raise TypeError(f"expected the Level Zero backend, got {type(backend).__name__}")
        peers = (
            [i for i in range(1, len(members)) if backend.peer_access(i, 0).access]
            if spec["peer_resident"]
            else []
        )
        devices = [
            {
                "backend": "l0",
                "index": flat_i,
                "name": backend.device_name(i),
                "role": "owner" if i == 0 else ("peer-resident" if i in peers else "member"),
            }
            for i, flat_i in enumerate(members)
        ]
        return L0Experiment(
            backend,
            devices,
            flat_index=members,
            peers=peers,
            dmabuf=bool(spec["dmabuf"]),
            note=note,
        )
    except BaseException:
        _close_after_failure(backend)
        raise


def _open_sycl(spec: dict[str, Any]) -> SyclExperiment:
    from l0mem.sycl import describe

    mode: Literal["default", "single"] = "default" if spec["context"] == "default" else "single"
    backend = open_backend("sycl", [spec["sycl_filter"]], context=mode, profiling=False)
    try:
        if not isinstance(backend, SyclBackend):
            raise TypeError(f"expected the SYCL backend, got {type(backend).__name__}")
        info = describe(backend.device_of(0))
        device = {
            "backend": "sycl",
            "filter_string": info.filter_string,
            "name": info.name,
            "device_type": info.device_type,
            "context": mode,
            "context_devices": len(backend.context_of(0).get_devices()),
        }
        return SyclExperiment(backend, [device])
    except BaseException:
        _close_after_failure(backend)
        raise


__all__ = ["Experiment", "L0Experiment", "SyclExperiment", "fill_proved", "open_experiment"]
