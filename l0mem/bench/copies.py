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

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from l0mem.backends import (
    HANG_BASE_S,
    Backend,
    CopyTimeout,
    DeviceBuffer,
    Event,
    HostMemory,
    PeerAccess,
    RouteKind,
    cleanup,
)
from l0mem.bench.fit import check_fits
from l0mem.bench.timing import (
    Measurement,
    TimingRequest,
    time_op,
    unmeasured_dict,
)

SCHEMA = "l0mem.p2p/1.1"
DEFAULT_SIZES = (1 << 20, 16 << 20, 64 << 20)
CopyKind = Literal["same_device", "direct", "staged", "download", "upload", "legs"]
COPY_KINDS: tuple[CopyKind, ...] = (
    "same_device",
    "direct",
    "staged",
    "download",
    "upload",
    "legs",
)
# The legs of a host-staged copy, each between one device and pinned host memory.
HOST_LEGS: tuple[CopyKind, ...] = ("download", "upload")
# What runs on pinned host memory: the legs alone, and both at once ("legs").
PINNED_KINDS: tuple[CopyKind, ...] = (*HOST_LEGS, "legs")
# The kinds of one device (src == dst); the others are of a pair of devices.
ONE_DEVICE_KINDS: tuple[CopyKind, ...] = ("same_device", *HOST_LEGS)
# The kinds timed with device timestamps where events carry them; the others always
# with the host clock.
DEVICE_TIMED_KINDS: tuple[CopyKind, ...] = ("same_device", "direct")

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
    hung: bool = False  # it did not complete within the watchdog's bound

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the copy and its measurement (all null when skipped)."""
        summary = unmeasured_dict() if self.measured is None else self.measured.to_dict()
        return {
            "kind": self.kind,
            "src": self.src,
            "dst": self.dst,
            "nbytes": self.nbytes,
            "skipped": self.skipped,
            "hung": self.hung,
            **summary,
        }


def check_sizes(backend: Backend, sizes: Sequence[int]) -> None:
    """Raise NoDeviceError (a device too small) or HostTooSmall before any buffer is made."""
    biggest = max(sizes)
    # A source and a destination buffer per device; pinned host memory per device
    # for the legs, and a staging ring per context (at most one per device).
    n = backend.device_count()
    check_fits(
        backend,
        range(n),
        per_device=2 * biggest,
        largest=biggest,
        host=n * (biggest + backend.staging_ring_bytes),
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
    kinds: Sequence[CopyKind] = COPY_KINDS,
    rows: list[CopyTiming] | None = None,
    watchdog: float = HANG_BASE_S,
    hung: dict[int, str] | None = None,
) -> list[CopyTiming]:
    """Time same-device, direct and host-staged copies for every ordered pair and size; return them.

    ``download`` and ``upload`` time each device's copies to and from pinned
    host memory of its context (:meth:`Backend.allocate_host`): the legs of a
    staged copy at the host link's speed, what a staged copy is held against.
    ``legs`` times, per pair, the download from ``src`` and an upload to
    ``dst`` submitted together (independent bytes): how far this driver or
    runtime runs the two legs at once, the ceiling of any staging pipeline.

    Each timing is also appended to ``rows`` as soon as it is finished, so a
    caller keeps what was measured when the sweep is interrupted. A copy that
    does not complete within :func:`~l0mem.backends.copy_deadline` (base
    ``watchdog``) is a hang: its row has ``hung`` set, and the two devices
    go into ``hung`` (device -> the copy), so that nothing more is sent to them.
    """
    idx = list(range(backend.device_count())) if devices is None else list(devices)
    if not idx:
        raise ValueError("no devices to measure")
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be >= 1 and warmup >= 0")
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError("sizes must be a non-empty list of positive byte counts")
    for k in kinds:
        if k not in COPY_KINDS:
            raise ValueError(f"unknown copy kind {k!r}")
    # Without hardware the copies are still made (the driver's answers are what
    # is tested) but once only, and no time is reported: none would be true.
    withheld = backend.no_hardware
    if withheld:
        reps, warmup = 1, 0
    biggest = max(sizes)
    srcs: dict[int, DeviceBuffer] = {}
    dsts: dict[int, DeviceBuffer] = {}
    pinned: dict[int, HostMemory] = {}
    results: list[CopyTiming] = [] if rows is None else rows
    out_of_run: dict[int, str] = {} if hung is None else hung
    ok = False
    try:
        for i in idx:
            srcs[i] = backend.allocate(i, biggest)
            dsts[i] = backend.allocate(i, biggest)
            backend.fill(srcs[i], b"\x5a")
            backend.fill(dsts[i], b"\x00")
            if any(k in PINNED_KINDS for k in kinds):
                pinned[i] = backend.allocate_host(i, biggest)
        backend.synchronize()
        for n in sizes:
            for s in idx:
                for d in idx:
                    src, dst = srcs[s].view(0, n), dsts[d].view(0, n)
                    for kind in kinds:
                        gone = [
                            f"device {x} hung earlier (copy {out_of_run[x]})"
                            for x in (s, d)
                            if x in out_of_run
                        ]
                        if gone and (kind in ONE_DEVICE_KINDS) == (s == d):
                            results.append(CopyTiming(kind, s, d, n, skipped=gone[0]))
                            continue
                        try:
                            host = (
                                (pinned[s].view(0, n), pinned[d].view(0, n)) if pinned else None
                            )
                            row = _measure_one(
                                backend, kind, (s, d), (src, dst, host), reps, warmup, timing, watchdog
                            )
                        except CopyTimeout:
                            row = CopyTiming(kind, s, d, n, skipped="hung", hung=True)
                            out_of_run.setdefault(s, f"{s}>{d} {kind}")
                            out_of_run.setdefault(d, f"{s}>{d} {kind}")
                        if row is not None and withheld and not row.skipped:
                            row = CopyTiming(
                                row.kind, row.src, row.dst, row.nbytes, skipped=withheld
                            )
                        if row is not None:
                            results.append(row)
        ok = True
    finally:
        buffers = (*srcs.values(), *dsts.values())
        # A device behind a hung copy is not waited for: it would never finish.
        waits = (
            [backend.synchronize]
            if not out_of_run
            else [lambda i=i: backend.synchronize(i) for i in idx if i not in out_of_run]
        )
        releases = [*(b.close for b in buffers), *(p.close for p in pinned.values())]
        cleanup([*waits, *releases], strict=ok and not out_of_run)
    return list(results)


def _measure_one(
    backend: Backend,
    kind: CopyKind,
    pair: tuple[int, int],
    ends: tuple[DeviceBuffer, DeviceBuffer, tuple[HostMemory, HostMemory] | None],
    reps: int,
    warmup: int,
    timing: TimingRequest,
    watchdog: float,
) -> CopyTiming | None:
    s, d = pair
    src, dst, host = ends
    n = src.nbytes
    if (kind in ONE_DEVICE_KINDS) != (s == d):
        return None
    if kind == "direct":
        route, why = backend.copy_route(s, d)
        if route != "direct":
            return CopyTiming(kind, s, d, n, skipped=why)

    def op() -> Sequence[Event]:
        if kind == "staged":
            return backend.staged_copy(dst, src, n, watchdog=watchdog)
        if kind in PINNED_KINDS:
            assert host is not None
            down = backend.download(src, host[0]) if kind != "upload" else None
            up = backend.upload(dst, host[1]) if kind != "download" else None
            return [ev for ev in (down, up) if ev is not None]
        return (backend.copy(dst, src, n),)

    if kind not in DEVICE_TIMED_KINDS:
        # Device time of the two legs would leave out the host wait between them;
        # the legs alone are timed the same way, so that the ratio compares like.
        timing = "host"
    measured = time_op(op, n, reps=reps, warmup=warmup, timing=timing, watchdog=watchdog)
    return CopyTiming(kind, s, d, n, measured)


__all__ = [
    "COPY_KINDS",
    "DEFAULT_SIZES",
    "DEVICE_TIMED_KINDS",
    "HOST_LEGS",
    "ONE_DEVICE_KINDS",
    "PINNED_KINDS",
    "SCHEMA",
    "CopyTiming",
    "PeerInfo",
    "check_sizes",
    "measure_copies",
    "peer_matrix",
]
