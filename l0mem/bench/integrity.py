"""Copies checked byte for byte: does each route between two devices move the right bytes?

Peer copies have been reported to corrupt data and to hang on multi-GPU Intel
machines, and a fast copy that writes wrong bytes is worse than a slow one.
:func:`verify_copies` copies a seeded pseudo-random pattern over every route
(same device, direct, host-staged) of every ordered pair, at sizes that
include odd sizes and the boundaries corruption likes (a page, 2 MiB, 4 GiB
where it fits), from and to unaligned offsets, and reads the destination back
to compare it with the pattern, byte for byte. The destination first holds
the pattern's complement, so a copy that writes nothing is caught too.

Large copies are written and read back in chunks of :data:`CHUNK`: the host
holds a few chunks, never a copy's size. Every wait has the watchdog's bound
(:func:`l0mem.backends.copy_deadline`): a copy past it is a hang
(:attr:`CopyCheck.hung`), and the two devices of that pair are not used again
in the run: work queued behind a hung copy never runs.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from l0mem.backends import (
    HANG_BASE_S,
    Backend,
    CopyTimeout,
    DeviceBuffer,
    Event,
    NoDeviceError,
    cleanup,
    copy_deadline,
)
from l0mem.bench.fit import HostTooSmall, check_fits

Route = Literal["same_device", "direct", "staged"]
ROUTES: tuple[Route, ...] = ("same_device", "direct", "staged")
PAGE = 4096
HUGE_PAGE = 2 << 20
FOUR_GIB = 4 << 30
# Odd sizes and the bytes around a page and a 2 MiB boundary.
BOUNDARY_SIZES = (1, 3, PAGE - 1, PAGE + 1, HUGE_PAGE - 1, HUGE_PAGE + 3)
# (source offset, destination offset): aligned, then neither aligned nor equal.
OFFSETS = ((0, 0), (1, 3))
CHUNK = 64 << 20


@dataclass(frozen=True)
class CopyCheck:
    """One copy checked: the route, size and offsets, and what came out wrong (or that it hung)."""

    src: int
    dst: int
    route: Route
    nbytes: int
    src_offset: int
    dst_offset: int
    seed: int
    mismatches: int | None = None  # bytes that differ; None when hung or skipped
    first_mismatch: int | None = None  # offset of the first wrong byte from the copy's start
    hung: bool = False
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        """Return False when the copy corrupted data or hung (a skipped one is not a failure)."""
        return not self.hung and not self.mismatches

    def describe(self) -> str:
        """Return one line naming the copy and, for a failure, what went wrong."""
        where = f"{self.src}>{self.dst} {self.route} {self.nbytes:,} bytes"
        if self.src_offset or self.dst_offset:
            where += f" (source offset {self.src_offset}, destination offset {self.dst_offset})"
        if self.hung:
            return f"{where}: did not complete (a hang; seed {self.seed})"
        if self.skipped:
            return f"{where}: skipped ({self.skipped})"
        if self.mismatches:
            return (
                f"{where}: {self.mismatches:,} byte(s) wrong, the first at offset "
                f"{self.first_mismatch:,} (seed {self.seed})"
            )
        return f"{where}: ok"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the check (keys of docs/p2p-json.md ``checks[]``)."""
        return {**asdict(self), "ok": self.ok}


def verification_sizes(
    backend: Backend, devices: Sequence[int], extra: Sequence[int] = ()
) -> tuple[list[int], str | None]:
    """Return the sizes to check (the boundaries, ``extra``, 4 GiB where it fits) and why 4 GiB is not."""
    sizes = sorted({*BOUNDARY_SIZES, *extra})
    big = FOUR_GIB + 5
    if backend.simulated or any(backend.memory(i).host_backed for i in devices):
        # Device memory here is host memory: 4 GiB buffers would take the host's, and
        # the boundary is one of the device's memory and its link, which this has not.
        return (
            sizes,
            "the 4 GiB boundary is checked on GPUs only (device memory here is host memory)",
        )
    try:
        _check_fits(backend, devices, [*sizes, big])
    except (NoDeviceError, HostTooSmall) as exc:
        return sizes, f"the 4 GiB boundary is not checked: {exc}"
    return [*sizes, big], None


def _check_fits(backend: Backend, devices: Sequence[int], sizes: Sequence[int]) -> None:
    biggest = max(sizes) + max(max(o) for o in OFFSETS)
    check_fits(
        backend,
        devices,
        per_device=2 * biggest,
        largest=biggest,
        # the pattern, its complement and the read-back, a chunk each; the staging rings
        host=3 * min(biggest, CHUNK) + len(devices) * backend.staging_ring_bytes,
        what=f"copy checks of {max(sizes):,} bytes",
    )


# Each byte's complement: the destination first holds the pattern's, so a copy that writes nothing shows.
_COMPLEMENT = bytes(b ^ 0xFF for b in range(256))


def pattern(seed: int, src: int, nbytes: int, chunk: int) -> bytes:
    """Return chunk ``chunk`` (of :data:`CHUNK` bytes) of the seeded pattern of one copy."""
    start = chunk * CHUNK
    n = min(CHUNK, nbytes - start)
    return random.Random(f"{seed}:{src}:{nbytes}:{chunk}").randbytes(n)


def differences(got: bytes | bytearray | memoryview, want: bytes) -> tuple[int, int | None]:
    """Return how many bytes of ``got`` differ from ``want`` and the offset of the first (None: none)."""
    if got == want:
        return 0, None
    size = len(want)
    diff = (int.from_bytes(got, "little") ^ int.from_bytes(want, "little")).to_bytes(size, "little")
    return size - diff.count(0), size - len(diff.lstrip(b"\0"))


def _chunks(nbytes: int) -> Iterator[tuple[int, int, int]]:
    for i, start in enumerate(range(0, nbytes, CHUNK)):
        yield i, start, min(CHUNK, nbytes - start)


def _copy(
    backend: Backend, route: Route, dst: DeviceBuffer, src: DeviceBuffer, n: int, watchdog: float
) -> Sequence[Event]:
    if route == "staged":
        return backend.staged_copy(dst, src, n, watchdog=watchdog)
    return (backend.copy(dst, src, n),)


def check_copy(
    backend: Backend,
    route: Route,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    nbytes: int,
    offsets: tuple[int, int] = (0, 0),
    *,
    seed: int = 0,
    watchdog: float = HANG_BASE_S,
) -> CopyCheck:
    """Copy the pattern from ``src`` to ``dst`` (at ``offsets``) by ``route``; return what came out."""
    so, do = offsets
    check = CopyCheck(src.device, dst.device, route, nbytes, so, do, seed)
    bound = copy_deadline(min(nbytes, CHUNK), watchdog)
    try:
        for i, start, n in _chunks(nbytes):
            data = pattern(seed, src.device, nbytes, i)
            backend.upload(src.view(so + start, n), data).wait(bound)
            backend.upload(dst.view(do + start, n), data.translate(_COMPLEMENT)).wait(bound)
        for ev in _copy(
            backend, route, dst.view(do, nbytes), src.view(so, nbytes), nbytes, watchdog
        ):
            ev.wait(copy_deadline(nbytes, watchdog))
        wrong, first = 0, None
        out = memoryview(bytearray(min(nbytes, CHUNK)))
        for i, start, n in _chunks(nbytes):
            backend.download(dst.view(do + start, n), out[:n]).wait(bound)
            count, at = differences(out[:n], pattern(seed, src.device, nbytes, i))
            if at is not None and first is None:
                first = start + at
            wrong += count
    except CopyTimeout:
        return CopyCheck(src.device, dst.device, route, nbytes, so, do, seed, hung=True)
    return CopyCheck(check.src, check.dst, route, nbytes, so, do, seed, wrong, first)


def verify_copies(
    backend: Backend,
    devices: Sequence[int] | None = None,
    *,
    sizes: Sequence[int] = BOUNDARY_SIZES,
    routes: Sequence[Route] = ROUTES,
    offsets: Sequence[tuple[int, int]] = OFFSETS,
    seed: int = 0,
    watchdog: float = HANG_BASE_S,
    rows: list[CopyCheck] | None = None,
    hung: dict[int, str] | None = None,
) -> list[CopyCheck]:
    """Check every route of every ordered pair at every size and offset; return the checks.

    Each check is also appended to ``rows`` as soon as it is done, so a caller
    keeps what was checked when the run is interrupted. Sizes that do not fit
    raise NoDeviceError or HostTooSmall before any buffer is made. ``hung``
    (device -> the copy that hung on it) holds devices left out of the run; a
    hang here adds its two devices.
    """
    idx = list(range(backend.device_count())) if devices is None else list(devices)
    if not idx or not sizes or any(n < 1 for n in sizes):
        raise ValueError("verify_copies needs devices and positive sizes")
    unknown = [r for r in routes if r not in ROUTES]
    if unknown:
        raise ValueError(f"unknown route(s) {unknown}")
    _check_fits(backend, idx, sizes)
    span = max(sizes) + max(max(o) for o in offsets)
    out: list[CopyCheck] = [] if rows is None else rows
    hung = {} if hung is None else hung
    bufs: dict[tuple[int, str], DeviceBuffer] = {}
    ok = False
    try:
        for i in idx:
            if i not in hung:
                bufs[(i, "src")] = backend.allocate(i, span)
                bufs[(i, "dst")] = backend.allocate(i, span)
        for n in sizes:
            for s in idx:
                for d in idx:
                    for route in routes:
                        if (route == "same_device") != (s == d):
                            continue
                        for so, do in offsets:
                            base = CopyCheck(s, d, route, n, so, do, seed)
                            why = _skip(backend, route, s, d, hung)
                            if why is not None:
                                out.append(CopyCheck(**{**asdict(base), "skipped": why}))
                                continue
                            got = check_copy(
                                backend,
                                route,
                                bufs[(s, "src")],
                                bufs[(d, "dst")],
                                n,
                                (so, do),
                                seed=seed,
                                watchdog=watchdog,
                            )
                            if got.hung:
                                hung.setdefault(s, f"{s}>{d} {route}")
                                hung.setdefault(d, f"{s}>{d} {route}")
                            out.append(got)
        ok = True
    finally:
        # A device behind a hung copy is not waited for: it would never finish.
        waits = (
            [backend.synchronize]
            if not hung
            else [lambda i=i: backend.synchronize(i) for i in idx if i not in hung]
        )
        cleanup([*waits, *(b.close for b in bufs.values())], strict=ok and not hung)
    return list(out)


def _skip(backend: Backend, route: Route, s: int, d: int, hung: dict[int, str]) -> str | None:
    """Return why the check cannot run, or None."""
    for dev in (s, d):
        if dev in hung:
            return f"device {dev} hung earlier (copy {hung[dev]})"
    if backend.no_hardware:
        return backend.no_hardware
    if route == "direct":
        kind, why = backend.copy_route(s, d)
        if kind != "direct":
            return why
    return None


__all__ = [
    "BOUNDARY_SIZES",
    "CHUNK",
    "OFFSETS",
    "ROUTES",
    "CopyCheck",
    "check_copy",
    "differences",
    "pattern",
    "verification_sizes",
    "verify_copies",
]
