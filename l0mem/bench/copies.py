"""Peer access between devices and measured copy bandwidth (pure: returns data, prints nothing).

:func:`peer_matrix` reads, for every ordered device pair, whether the first
device can access the second one's memory, whether atomics work across, and
the P2P bandwidth and latency where the driver reports them (Level Zero's
``ZE_experimental_bandwidth_properties``). :meth:`Backend.copy_route` decides how
l0mem copies between two devices: ``direct`` (one device-to-device copy on the
source device's queue) or ``staged`` (device to host, then host to device).
:func:`measure_copies` times the same-device copy (the reference), the direct
copy and the host-staged copy for every ordered pair over a size sweep.

Timing: the same-device and the direct copy are one operation each, timed with
the backend's device events when they carry timestamps (``Event.elapsed_ns()``
is not None) and with the host clock around enqueue plus wait otherwise. A
host-staged copy is always timed with the host clock from its first enqueue to
the completion of its last leg, so the host's wait between the download and
the upload counts (the sum of the two legs' device times would leave it out
and overstate the bandwidth). Every measurement has warm-up rounds and
repetitions and keeps all samples, so the spread is reported along with the
median; the timing and the summary are :mod:`l0mem.bench.timing`'s.

SYCL CPU sub-devices (what ``l0mem ... --sub-devices N`` makes on a machine
without a GPU), measured with the pinned 2025.3 OpenCL CPU runtime:

- ``dpctl.SyclQueue(sub_device)`` gives every sub-device a context of its own
  (also the same sub-device twice). A direct ``memcpy`` between device USM of
  two such contexts completed and copied correctly in every try, but USM of one
  context used on a queue of another is outside the SYCL specification, and
  :class:`l0mem.backends.SyclBackend` refuses it; l0mem stages these copies
  (route reason "separate contexts").
- One context over both sub-devices (``dpctl.SyclContext([s0, s1])``): a
  device-to-device ``memcpy``/``memcpy_async`` of device or shared USM hangs
  in most runs (4 to 6 of 6, any size from 64 bytes up), on in-order and
  out-of-order queues, issued on the source's or the destination's queue.
  Host USM in the same context copies fine every time, and so does
  ``dpctl.tensor``'s cross-queue array copy.
- A queue for a sub-device in its parent's context cannot be created
  (``SyclQueueCreationError``); two queues on the root device copy fine.
- dpctl exposes ``memcpy`` only (no ``queue.copy``).

:class:`l0mem.backends.SyclBackend` never puts two sub-devices in one context, so
with it the route is "separate contexts". :func:`l0mem.backends.sycl.direct_copy_hazard`
guards the other case: a backend whose devices share a context (one built over
a user-made ``dpctl.SyclContext``) routes copies between CPU sub-devices
through the host (``copy_route`` says "staged"). tests/test_p2p_sycl_shared.py
runs that set-up, and the raw hanging copy, in subprocesses with a timeout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from l0mem import __version__
from l0mem.backends import (
    Backend,
    DeviceBuffer,
    Event,
    PeerAccess,
    RouteKind,
    cleanup,
    staged_copy,
)
from l0mem.bench.fit import check_fits
from l0mem.bench.timing import (
    Measurement,
    MeasurementInterrupted,
    TimingRequest,
    time_op,
    unmeasured_dict,
)
from l0mem.driverenv import recorded_environment

SCHEMA = "l0mem.p2p/1"
DEFAULT_SIZES = (1 << 20, 16 << 20, 64 << 20)
CopyKind = Literal["same_device", "direct", "staged"]

# ------------------------------------------------------------------ peer matrix


@dataclass(frozen=True)
class PeerInfo(PeerAccess):
    """A pair's :class:`~l0mem.backends.PeerAccess` and how l0mem copies from ``src`` to ``dst``."""

    route: RouteKind = "staged"
    route_reason: str = ""

    @property
    def can_access(self) -> bool | None:
        """Return whether ``src`` can access ``dst``'s memory (the JSON's ``can_access``)."""
        return self.access

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this pair (keys of docs/p2p-json.md ``peers[]``)."""
        # PeerAccess.access is written under the name the l0mem.p2p/1 schema gave it.
        return {("can_access" if k == "access" else k): v for k, v in asdict(self).items()}


def peer_matrix(backend: Backend, devices: Sequence[int] | None = None) -> list[PeerInfo]:
    """Return a :class:`PeerInfo` for every ordered pair of distinct ``devices`` (default: all)."""
    idx = list(range(backend.device_count())) if devices is None else list(devices)
    out: list[PeerInfo] = []
    for s in idx:
        for d in idx:
            if s != d:
                route, why = backend.copy_route(s, d)
                out.append(
                    PeerInfo(**asdict(backend.peer_access(s, d)), route=route, route_reason=why)
                )
    return out


# ------------------------------------------------------------------ bandwidth


@dataclass(frozen=True)
class CopyTiming:
    """One copy kind between two devices at one size: its measurement, or why it was skipped."""

    kind: CopyKind
    src: int
    dst: int
    nbytes: int
    measured: Measurement | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the copy and its measurement (all null when skipped)."""
        summary = unmeasured_dict() if self.measured is None else self.measured.to_dict()
        return {
            "kind": self.kind,
            "src": self.src,
            "dst": self.dst,
            "nbytes": self.nbytes,
            "skipped": self.skipped,
            **summary,
        }


def check_sizes(backend: Backend, sizes: Sequence[int]) -> None:
    """Raise NoDeviceError (a device too small) or HostTooSmall before any buffer is made."""
    biggest = max(sizes)
    # A source and a destination buffer per device; the staged copy's host buffer.
    check_fits(
        backend,
        range(backend.device_count()),
        per_device=2 * biggest,
        largest=biggest,
        host=2 * biggest,
        what=f"--sizes {biggest:,} bytes",
    )


def measure_copies(
    backend: Backend,
    devices: Sequence[int] | None = None,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    reps: int = 10,
    warmup: int = 2,
    timing: TimingRequest = "auto",
    kinds: Sequence[CopyKind] = ("same_device", "direct", "staged"),
    rows: list[CopyTiming] | None = None,
) -> list[CopyTiming]:
    """Time same-device, direct and host-staged copies for every ordered pair and size; return them.

    Each timing is also appended to ``rows`` as soon as it is finished, so a
    caller keeps what was measured when the sweep is interrupted.
    """
    idx = list(range(backend.device_count())) if devices is None else list(devices)
    if not idx:
        raise ValueError("no devices to measure")
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be >= 1 and warmup >= 0")
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError("sizes must be a non-empty list of positive byte counts")
    for k in kinds:
        if k not in ("same_device", "direct", "staged"):
            raise ValueError(f"unknown copy kind {k!r}")
    # Without hardware the copies are still made (the driver's answers are what
    # is tested) but once only, and no time is reported: none would be true.
    withheld = backend.no_hardware
    if withheld:
        reps, warmup = 1, 0
    biggest = max(sizes)
    srcs: dict[int, DeviceBuffer] = {}
    dsts: dict[int, DeviceBuffer] = {}
    results: list[CopyTiming] = [] if rows is None else rows
    ok = False
    try:
        for i in idx:
            srcs[i] = backend.allocate(i, biggest)
            dsts[i] = backend.allocate(i, biggest)
            backend.fill(srcs[i], b"\x5a")
            backend.fill(dsts[i], b"\x00")
        backend.synchronize()
        for n in sizes:
            for s in idx:
                for d in idx:
                    src, dst = srcs[s].view(0, n), dsts[d].view(0, n)
                    for kind in kinds:
                        row = _measure_one(backend, kind, s, d, src, dst, n, reps, warmup, timing)
                        if row is not None and withheld and not row.skipped:
                            row = CopyTiming(row.kind, row.src, row.dst, row.nbytes, skipped=withheld)
                        if row is not None:
                            results.append(row)
        ok = True
    finally:
        buffers = (*srcs.values(), *dsts.values())
        cleanup([backend.synchronize, *(b.close for b in buffers)], strict=ok)
    return list(results)


def _measure_one(
    backend: Backend,
    kind: CopyKind,
    s: int,
    d: int,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    n: int,
    reps: int,
    warmup: int,
    timing: TimingRequest,
) -> CopyTiming | None:
    if (kind == "same_device") != (s == d):
        return None
    if kind == "direct":
        route, why = backend.copy_route(s, d)
        if route != "direct":
            return CopyTiming(kind, s, d, n, skipped=why)

    if kind == "staged":

        def op() -> Sequence[Event]:
            return staged_copy(backend, dst, src, n)

        # Device time of the two legs would leave out the host wait between them.
        timing = "host"
    else:

        def op() -> Sequence[Event]:
            return (backend.copy(dst, src, n),)

    measured = time_op(op, n, reps=reps, warmup=warmup, timing=timing)
    return CopyTiming(kind, s, d, n, measured)


# -------------------------------------------------------------------- the run


@dataclass(frozen=True)
class P2PResult:
    """One ``l0mem p2p`` run: the peer matrix and every copy timing."""

    backend: str
    devices: tuple[str, ...]
    simulated: bool
    sizes: tuple[int, ...]
    reps: int
    warmup: int
    peers: tuple[PeerInfo, ...]
    copies: tuple[CopyTiming, ...]
    notes: tuple[str, ...] = field(default=())
    no_hardware: str | None = None  # why nothing was measured: no GPU executes (Backend.no_hardware)
    complete: bool = True  # False: interrupted, ``copies`` holds the timings that finished
    # What changes driver behaviour (l0mem.driverenv), as the environment was when measured.
    environment: dict[str, str] = field(default_factory=lambda: recorded_environment(os.environ))

    def timing(self, kind: CopyKind, src: int, dst: int, nbytes: int) -> CopyTiming | None:
        """Return the timing of one copy kind, pair and size, or None if not part of the run."""
        for c in self.copies:
            if (c.kind, c.src, c.dst, c.nbytes) == (kind, src, dst, nbytes):
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return the run as a JSON-ready dict (schema ``l0mem.p2p/1``, see docs/p2p-json.md)."""
        return {
            "schema": SCHEMA,
            "l0mem_version": __version__,
            "backend": self.backend,
            "simulated": self.simulated,
            "no_hardware": self.no_hardware,
            "environment": dict(self.environment),
            "devices": [{"index": i, "name": n} for i, n in enumerate(self.devices)],
            "sizes": list(self.sizes),
            "reps": self.reps,
            "warmup": self.warmup,
            "peers": [p.to_dict() for p in self.peers],
            "copies": [c.to_dict() for c in self.copies],
            "notes": list(self.notes),
            "complete": self.complete,
        }


def run_p2p(
    backend: Backend,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    reps: int = 10,
    warmup: int = 2,
    timing: TimingRequest = "auto",
    simulated: bool | None = None,
) -> P2PResult:
    """Read the peer matrix and measure all copies over every device of ``backend``; return the run.

    Interrupted (KeyboardInterrupt), it raises :class:`MeasurementInterrupted`
    whose ``partial`` is the run over the copies that finished (``complete``
    False), once the buffers are freed.
    """
    peers = peer_matrix(backend)
    done: list[CopyTiming] = []
    try:
        measure_copies(backend, sizes=sizes, reps=reps, warmup=warmup, timing=timing, rows=done)
    except KeyboardInterrupt as exc:
        partial = _p2p_result(backend, sizes, reps, warmup, peers, done, simulated, complete=False)
        raise MeasurementInterrupted(partial, exc) from None
    return _p2p_result(backend, sizes, reps, warmup, peers, done, simulated, complete=True)


def _p2p_result(
    backend: Backend,
    sizes: Sequence[int],
    reps: int,
    warmup: int,
    peers: list[PeerInfo],
    copies: list[CopyTiming],
    simulated: bool | None,
    *,
    complete: bool,
) -> P2PResult:
    """Return the run of the ``copies`` measured, with the notes that apply to them."""
    n = backend.device_count()
    sim = backend.simulated if simulated is None else simulated
    notes: list[str] = []
    if not complete:
        notes.append(
            f"interrupted: {len(copies)} copy timing(s) finished; the others were not measured"
        )
    if sim:
        notes.append("simulated driver: these are a simulator's numbers, not hardware results")
    no_hw = backend.no_hardware
    if no_hw:
        notes.append(f"no copy was timed: {no_hw}")
    if any(backend.memory(i).host_backed for i in range(n)) and not sim:
        notes.append("SYCL CPU devices: every copy moves host memory; no GPU link is measured")
    if any(c.kind == "staged" and not c.skipped for c in copies):
        notes.append(
            "host-staged copies are timed with the host clock, first enqueue to last completion"
        )
    if any(c.measured.timing == "host" for c in copies if c.measured and c.kind != "staged"):
        notes.append("host timing: some operations carry no device timestamps")
    # Why device timing fell back, once each (an unready or backward timestamp, say).
    for why in dict.fromkeys(c.measured.note for c in copies if c.measured and c.measured.note):
        notes.append(why)
    return P2PResult(
        backend=backend.name,
        devices=tuple(backend.device_name(i) for i in range(n)),
        simulated=sim,
        sizes=tuple(sizes),
        reps=reps,
        warmup=warmup,
        peers=tuple(peers),
        copies=tuple(copies),
        notes=tuple(notes),
        no_hardware=no_hw,
        complete=complete,
    )


__all__ = [
    "DEFAULT_SIZES",
    "SCHEMA",
    "CopyTiming",
    "P2PResult",
    "PeerInfo",
    "check_sizes",
    "measure_copies",
    "peer_matrix",
    "run_p2p",
]
