"""One ``l0mem p2p`` run: the peer matrix, the copy timings and the byte-for-byte checks.

:func:`run_p2p` reads the peer matrix (:func:`l0mem.bench.copies.peer_matrix`),
times every copy route (:func:`l0mem.bench.copies.measure_copies`) and checks
every route with a seeded pattern (:func:`l0mem.bench.integrity.verify_copies`),
all under the watchdog: a copy that hangs is reported, and its two devices are
left out of the rest of the run. :class:`P2PResult` is what the command shows
and writes (docs/p2p-json.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from l0mem import __version__
from l0mem.backends import HANG_BASE_S, Backend
from l0mem.bench.copies import (
    DEFAULT_SIZES,
    DEVICE_TIMED_KINDS,
    SCHEMA,
    CopyKind,
    CopyTiming,
    PeerInfo,
    measure_copies,
    peer_matrix,
)
from l0mem.bench.integrity import CopyCheck, verification_sizes, verify_copies
from l0mem.bench.timing import MeasurementInterrupted, TimingRequest, with_partial
from l0mem.driverenv import recorded_environment


@dataclass(frozen=True)
class StagingRatio:
    """A host-staged copy held against the slower of its legs (pinned download, pinned upload)."""

    src: int
    dst: int
    nbytes: int
    gbps: float  # the staged copy's median bandwidth
    download_gbps: float  # device src to pinned host memory, same run
    upload_gbps: float  # pinned host memory to device dst, same run
    together_gbps: float | None = None  # both legs submitted at once (bytes of one), same run

    @property
    def leg_gbps(self) -> float:
        """Return the bandwidth of the slower leg: what a staged copy could reach at best."""
        return min(self.download_gbps, self.upload_gbps)

    @property
    def ratio(self) -> float:
        """Return the staged copy's bandwidth over the slower leg's (1.0: the link's speed)."""
        return self.gbps / self.leg_gbps if self.leg_gbps > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (keys of docs/p2p-json.md ``staging[]``)."""
        return {
            "src": self.src,
            "dst": self.dst,
            "nbytes": self.nbytes,
            "gbps": self.gbps,
            "download_gbps": self.download_gbps,
            "upload_gbps": self.upload_gbps,
            "leg_gbps": self.leg_gbps,
            "together_gbps": self.together_gbps,
            "ratio": self.ratio,
        }


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
    no_hardware: str | None = (
        None  # why nothing was measured: no GPU executes (Backend.no_hardware)
    )
    complete: bool = True  # False: interrupted, ``copies`` holds the timings that finished
    checks: tuple[CopyCheck, ...] = ()  # every route verified byte for byte (l0mem.bench.integrity)
    seed: int = 0  # the seed of the checks' pattern
    verify_only: bool = False  # --verify-only: nothing was timed
    # What changes driver behaviour (l0mem.driverenv), as the environment was when measured.
    environment: dict[str, str] = field(default_factory=lambda: recorded_environment(os.environ))

    def timing(self, kind: CopyKind, src: int, dst: int, nbytes: int) -> CopyTiming | None:
        """Return the timing of one copy kind, pair and size, or None if not part of the run."""
        for c in self.copies:
            if (c.kind, c.src, c.dst, c.nbytes) == (kind, src, dst, nbytes):
                return c
        return None

    @property
    def staging(self) -> list[StagingRatio]:
        """Return every measured staged copy against its legs measured in the same run."""
        measured = {(c.kind, c.src, c.dst, c.nbytes): c.measured for c in self.copies}
        out = []
        for c in self.copies:
            if c.kind != "staged" or c.measured is None:
                continue
            down = measured.get(("download", c.src, c.src, c.nbytes))
            up = measured.get(("upload", c.dst, c.dst, c.nbytes))
            if down is None or up is None:
                continue
            legs = measured.get(("legs", c.src, c.dst, c.nbytes))
            together = legs.gbps if legs is not None else None
            out.append(
                StagingRatio(
                    c.src,
                    c.dst,
                    c.nbytes,
                    c.measured.gbps,
                    down.gbps,
                    up.gbps,
                    together,
                )
            )
        return out

    @property
    def failures(self) -> list[str]:
        """Return one line per copy that corrupted data or hung (timed or checked)."""
        out = [c.describe() for c in self.checks if not c.ok]
        out += [
            f"{c.src}>{c.dst} {c.kind} {c.nbytes:,} bytes: did not complete (a hang, while timed)"
            for c in self.copies
            if c.hung
        ]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Return the run as a JSON-ready dict (schema ``l0mem.p2p/1.1``, see docs/p2p-json.md)."""
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
            "staging": [r.to_dict() for r in self.staging],
            "notes": list(self.notes),
            "complete": self.complete,
            "verify_only": self.verify_only,
            "seed": self.seed,
            "checks": [c.to_dict() for c in self.checks],
            "ok": not self.failures,
        }


def run_p2p(
    backend: Backend,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    reps: int = 10,
    warmup: int = 2,
    timing: TimingRequest = "auto",
    simulated: bool | None = None,
    verify: bool = True,
    verify_only: bool = False,
    seed: int = 0,
    watchdog: float = HANG_BASE_S,
) -> P2PResult:
    """Read the peer matrix, time all copies and check every route byte for byte; return the run.

    ``verify_only`` checks without timing; ``verify`` False times without
    checking. The checks cover ``sizes`` plus odd sizes and the page, 2 MiB and
    (where it fits) 4 GiB boundaries. Interrupted (KeyboardInterrupt), it
    raises :class:`MeasurementInterrupted` whose ``partial`` is the run over
    what finished (``complete`` False), once the buffers are freed.
    """
    peers = peer_matrix(backend)
    facts = _Facts.of(backend, simulated)  # read now: a device lost later answers nothing
    done: list[CopyTiming] = []
    checked: list[CopyCheck] = []
    hung: dict[int, str] = {}
    notes: list[str] = []

    def result(complete: bool, stopped: str = "interrupted") -> P2PResult:
        return _p2p_result(
            facts,
            sizes,
            reps,
            warmup,
            peers,
            done,
            complete=complete,
            checks=checked,
            seed=seed,
            verify_only=verify_only,
            extra_notes=notes,
            stopped=stopped,
        )

    try:
        if not verify_only:
            measure_copies(
                backend,
                sizes=sizes,
                reps=reps,
                warmup=warmup,
                timing=timing,
                rows=done,
                watchdog=watchdog,
                hung=hung,
            )
        if verify or verify_only:
            idx = list(range(backend.device_count()))
            check_sizes, skipped_why = verification_sizes(backend, idx, sizes)
            if skipped_why:
                notes.append(skipped_why)
            verify_copies(
                backend,
                idx,
                sizes=check_sizes,
                seed=seed,
                watchdog=watchdog,
                rows=checked,
                hung=hung,
            )
    except KeyboardInterrupt as exc:
        raise MeasurementInterrupted(result(False), exc) from None
    except Exception as exc:
        # A failure after copies finished (a lost device, say): what finished is kept.
        if done or checked:
            raise with_partial(exc, result(False, "stopped by a failure")) from None
        raise
    return result(True)


@dataclass(frozen=True)
class _Facts:
    """What a report says of the backend and its devices, read before anything is measured."""

    backend: str
    devices: tuple[str, ...]
    simulated: bool
    no_hardware: str | None
    host_backed: bool

    @classmethod
    def of(cls, backend: Backend, simulated: bool | None) -> _Facts:
        """Return the facts of ``backend`` now (``simulated`` overrides its own claim)."""
        n = backend.device_count()
        return cls(
            backend=backend.name,
            devices=tuple(backend.device_name(i) for i in range(n)),
            simulated=backend.simulated if simulated is None else simulated,
            no_hardware=backend.no_hardware,
            host_backed=any(backend.memory(i).host_backed for i in range(n)),
        )


def _p2p_result(
    facts: _Facts,
    sizes: Sequence[int],
    reps: int,
    warmup: int,
    peers: list[PeerInfo],
    copies: list[CopyTiming],
    *,
    complete: bool,
    checks: Sequence[CopyCheck] = (),
    seed: int = 0,
    verify_only: bool = False,
    extra_notes: Sequence[str] = (),
    stopped: str = "interrupted",
) -> P2PResult:
    """Return the run of the ``copies`` measured, with the notes that apply to them.

    ``stopped`` says what ended an incomplete run (``complete`` False).
    """
    sim = facts.simulated
    notes: list[str] = list(extra_notes)
    if not complete:
        notes.append(
            f"{stopped}: {len(copies)} copy timing(s) and {len(checks)} check(s) finished; "
            "the others were not made"
        )
    if sim:
        notes.append("simulated driver: these are a simulator's numbers, not hardware results")
    no_hw = facts.no_hardware
    if no_hw:
        notes.append(f"no copy was timed: {no_hw}")
    if facts.host_backed and not sim:
        notes.append("SYCL CPU devices: every copy moves host memory; no GPU link is measured")
    if any(c.kind == "staged" and not c.skipped for c in copies):
        notes.append(
            "host-staged copies and their legs (to and from pinned host memory) are timed with "
            "the host clock, first enqueue to last completion"
        )
    if any(
        c.measured.timing == "host"
        for c in copies
        if c.measured and c.kind in DEVICE_TIMED_KINDS
    ):
        notes.append("host timing: some operations carry no device timestamps")
    # Why device timing fell back, once each (an unready or backward timestamp, say).
    for why in dict.fromkeys(c.measured.note for c in copies if c.measured and c.measured.note):
        notes.append(why)
    return P2PResult(
        backend=facts.backend,
        devices=facts.devices,
        simulated=sim,
        sizes=tuple(sizes),
        reps=reps,
        warmup=warmup,
        peers=tuple(peers),
        copies=tuple(copies),
        notes=tuple(notes),
        no_hardware=no_hw,
        complete=complete,
        checks=tuple(checks),
        seed=seed,
        verify_only=verify_only,
    )


__all__ = ["P2PResult", "StagingRatio", "run_p2p"]
