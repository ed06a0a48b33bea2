"""The audit's child process: discovers devices or runs one set-up, reporting JSON lines.

Run as ``python -m l0mem.audit.child MODE`` with MODE one of:

- ``run``: reads a set-up spec (:meth:`SetupPlan.to_spec`) as JSON on stdin,
  allocates device memory in steps, fills every allocation on the device,
  samples every memory signal after each step, then frees and samples again.
- ``discover-l0``: describes the Level Zero loader, drivers and devices.
- ``discover-sycl [FILTER]``: describes the SYCL runtime and devices.

Output is one JSON object per line on stdout, each with an ``event`` key:
``ready`` (run mode: the stop handlers are installed, ``pid``), ``devices``
(what the run uses), ``sample`` (``t``, ``phase``, ``device_bytes``,
``values``, ``unavailable``: streamed as taken, so data survives a crash),
``freed`` (``allocations``, ``bytes``: what was freed at the end), ``end``
(``status``: ok, stopped-early, interrupted or failed; ``reason``), and
``inventory`` for the discovery modes. Anything libraries print goes to
stderr, never into this stream.

Before each step the child checks the safety guard itself (MemAvailable minus
the step, assumed mirrored 1:1, must stay above ``floor_bytes``). SIGINT and
SIGTERM stop it at the next safe point: it frees everything, takes the freed
samples and reports what it freed (the discovery modes keep the default
handlers: they hold no device memory). If the parent dies, the kernel sends
SIGTERM (PR_SET_PDEATHSIG), so an orphan never keeps device memory.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import IO, Any, Literal

from l0mem.audit.guard import Guard
from l0mem.probe import MeminfoError, mem_available

_PR_SET_PDEATHSIG = 1


class _Stop:
    """Which signal asked the child to stop (None while running)."""

    signum: int | None = None


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _Stop.signum is None:
        _Stop.signum = signum


def _install_handlers() -> None:
    """Turn SIGINT and SIGTERM into a stop request the run checks at every safe point."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


@functools.lru_cache(maxsize=1)
def _prctl() -> Any:
    """Return libc's prctl with its C signature declared, or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    # int prctl(int option, unsigned long arg2, ...): undeclared, ctypes would pass
    # every argument as a C int, which is only right by luck of the calling convention.
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def _die_with_parent() -> None:
    """Ask the kernel to send SIGTERM when the parent dies, so an orphan frees its memory."""
    prctl = _prctl()
    if prctl is not None:
        # On failure (not Linux) the broken pipe on the next write ends an orphan instead.
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _protocol_stream() -> IO[str]:
    """Return a private copy of stdout for the protocol; point fd 1 at stderr."""
    # Drivers and runtimes may print to fd 1; the protocol must stay parseable.
    sys.stdout.flush()
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return proto


class _Emitter:
    """Writes protocol events, one JSON object per line."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, **fields}, allow_nan=False) + "\n")
        self.stream.flush()


def _wait(seconds: float) -> None:
    """Sleep up to ``seconds``, returning early once a stop signal arrived."""
    end = time.monotonic() + seconds
    while _Stop.signum is None:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


# ---------------------------------------------------------------- experiments


class _Experiment:
    """A set-up as a backend configuration plus an allocation policy.

    Both kinds of set-up run through :func:`l0mem.backends.open_backend`: the
    configuration is the backend kind, its devices and its context; the policy
    is what happens to each allocation (dma-buf export, residency on peers)
    before it is filled on its device. Device 0 of the backend is the owner.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        from l0mem.backends import open_backend

        self.note: str | None = None
        self.peers: list[int] = []
        self.dmabuf = False
        self.flat_index: list[int] = []
        self.buffers: list[Any] = []
        if spec["backend"] == "l0":
            self.backend: Any = self._open_l0(spec)
        else:
            mode: Literal["default", "single"] = (
                "default" if spec["context"] == "default" else "single"
            )
            self.backend = open_backend("sycl", [spec["sycl_filter"]], context=mode, profiling=False)
            self.devices = [self._sycl_description(mode)]
        self.max_alloc = self.backend.memory(0).max_alloc or (1 << 62)

    def _open_l0(self, spec: dict[str, Any]) -> Any:
        from l0mem.backends import level_zero_devices, open_backend

        flat = level_zero_devices()
        wanted = [int(i) for i in spec["l0_devices"]]
        present = [i for i in wanted if i < len(flat)]
        if not wanted or wanted[0] not in present:
            raise LookupError(
                f"Level Zero device {wanted[0] if wanted else '?'} is not visible "
                f"({len(flat)} device(s) found)"
            )
        if len(present) < len(wanted):
            if not spec.get("allow_fewer_devices"):
                raise LookupError(
                    f"only {len(flat)} Level Zero device(s) visible, the set-up needs {len(wanted)}"
                )
            self.note = f"{len(present)} of {len(wanted)} planned device(s) visible"
        owner = flat[present[0]]
        # A context holds devices of one driver; "single" is the owner alone.
        members = [i for i in present if flat[i].driver is owner.driver]
        if spec["context"] == "single":
            members = members[:1]
        self.flat_index = members
        backend = open_backend("l0", [flat[i] for i in members])
        if spec["peer_resident"]:
            self.peers = [
                i for i in range(1, len(members)) if backend.peer_access(i, 0).access
            ]
        self.dmabuf = bool(spec["dmabuf"])
        self.devices = [
            {
                "backend": "l0",
                "index": flat_i,
                "name": backend.device_name(i),
                "role": "owner" if i == 0 else ("peer-resident" if i in self.peers else "member"),
            }
            for i, flat_i in enumerate(members)
        ]
        return backend

    def _sycl_description(self, mode: str) -> dict[str, Any]:
        from l0mem.sycl import describe

        info = describe(self.backend.device_of(0))
        return {
            "backend": "sycl",
            "filter_string": info.filter_string,
            "name": info.name,
            "device_type": info.device_type,
            "context": mode,
            "context_devices": len(self.backend.context_of(0).get_devices()),
        }

    def allocate(self, nbytes: int, pattern: bytes) -> None:
        """Allocate ``nbytes`` on the owner device, apply the policy, and fill it there."""
        if self.dmabuf:
            buf = self.backend.allocate(0, nbytes, export_dmabuf=True)
        else:
            buf = self.backend.allocate(0, nbytes)
        self.buffers.append(buf)
        if self.dmabuf:
            # The export descriptor alone may never reach a driver's export path
            # (xe_gem_prime_export); asking for the fd does, as an importer would.
            # The allocation owns the new descriptor and closes it when it is freed.
            buf.allocation.dmabuf_fd()
        for peer in self.peers:
            self.backend.make_resident(buf, peer)
        self.backend.fill(buf, pattern).wait()

    def free_all(self) -> tuple[int, int]:
        """Free every allocation; return (allocations, bytes) freed."""
        self.backend.synchronize()
        count, total = 0, 0
        while self.buffers:
            buf = self.buffers.pop()
            total += buf.nbytes
            buf.close()  # closes an allocation's dma-buf descriptor too, once
            count += 1
        return count, total

    def device_values(self) -> dict[str, int]:
        """Return ``sysman.<index>.used`` for the devices of the run (empty without Sysman)."""
        out: dict[str, int] = {}
        for i, flat_i in enumerate(self.flat_index):
            used = self.backend.sysman_used(i)
            if used is not None:
                out[f"sysman.{flat_i}.used"] = used
        return out

    def close(self) -> None:
        """Release the backend and everything it holds."""
        self.backend.close()


# ---------------------------------------------------------------- one run


class _Runner:
    """Runs one set-up spec, emitting samples as it goes."""

    def __init__(self, spec: dict[str, Any], emit: Callable[..., None]) -> None:
        self.spec = spec
        self.emit = emit
        self.guard = Guard(floor_bytes=int(spec["floor_bytes"]))
        self.pattern = bytes.fromhex(spec["fill_pattern"])
        self.t0 = time.monotonic()
        self.exp: _Experiment | None = None
        self.device_bytes = 0

    def sample(self, phase: str) -> None:
        """Take one snapshot and emit it as a sample."""
        from l0mem.probe import take_snapshot

        extra = self.exp.device_values() if self.exp is not None else {}
        snap = take_snapshot(extra or None)
        bytes_now = self.device_bytes if phase == "alloc" else 0
        self.emit(
            "sample",
            t=round(snap.t - self.t0, 6),
            phase=phase,
            device_bytes=bytes_now,
            values=dict(snap.values),
            unavailable=dict(snap.unavailable),
        )

    def stopped(self) -> tuple[str, str] | None:
        signum = _Stop.signum
        if signum is None:
            return None
        if signum == signal.SIGINT:
            return "interrupted", "interrupted (SIGINT)"
        return "stopped-early", f"stopped by {signal.Signals(signum).name}"

    def run(self) -> tuple[str, str | None]:
        """Run the set-up; return (status, reason)."""
        self.exp = _Experiment(self.spec)
        self.emit("devices", devices=self.exp.devices, note=self.exp.note)
        status: tuple[str, str | None] = ("ok", None)
        try:
            status = self._measure()
        except Exception as exc:
            status = ("failed", _one_line(exc))
        finally:
            status = self._free(status)
        return status

    def _measure(self) -> tuple[str, str | None]:
        assert self.exp is not None
        settle = float(self.spec["settle_s"])
        for i in range(int(self.spec["idle_samples"])):
            if i:
                _wait(max(settle, 0.02))
            if (stop := self.stopped()) is not None:
                return stop
            self.sample("idle")
        target, step = int(self.spec["target_bytes"]), int(self.spec["step_bytes"])
        while self.device_bytes < target:
            if (stop := self.stopped()) is not None:
                return stop
            nbytes = min(step, target - self.device_bytes)
            try:
                why = self.guard.refuse_step(mem_available(), nbytes)
            except MeminfoError as exc:
                return "failed", str(exc)
            if why is not None:
                return "stopped-early", why
            try:
                self._step(nbytes)
            except Exception as exc:
                from l0mem._ze.errors import OutOfDeviceMemoryError

                if isinstance(exc, (OutOfDeviceMemoryError, MemoryError)):
                    return "stopped-early", f"device memory ran out: {_one_line(exc)}"
                raise
            _wait(settle)
            self.sample("alloc")
        return "ok", None

    def _step(self, nbytes: int) -> None:
        assert self.exp is not None
        left = nbytes
        while left > 0:
            chunk = min(left, self.exp.max_alloc)
            self.exp.allocate(chunk, self.pattern)
            left -= chunk
            self.device_bytes += chunk

    def _free(self, status: tuple[str, str | None]) -> tuple[str, str | None]:
        assert self.exp is not None
        try:
            count, total = self.exp.free_all()
        except Exception as exc:
            self.emit("freed", allocations=0, bytes=0, error=_one_line(exc))
            return "failed", f"freeing device memory failed: {_one_line(exc)}"
        self.device_bytes = 0
        self.emit("freed", allocations=count, bytes=total)
        settle = float(self.spec["settle_s"])
        for _ in range(int(self.spec["freed_samples"])):
            # A second signal must not cost the evidence that memory came back.
            time.sleep(max(settle, 0.02))
            self.sample("freed")
        return status


def run(spec: dict[str, Any], emit: Callable[..., None]) -> int:
    """Run one set-up spec, emitting events; return the process exit code (2: bad spec)."""
    try:
        runner = _Runner(spec, emit)
    except (KeyError, TypeError, ValueError) as exc:
        emit("end", status="failed", reason=f"bad set-up spec: {_one_line(exc)}")
        return 2
    try:
        status, reason = runner.run()
    except Exception as exc:
        emit("end", status="failed", reason=_one_line(exc))
        return 0
    finally:
        if runner.exp is not None:
            try:
                runner.exp.close()
            except Exception as exc:
                print(f"l0mem audit child: closing failed: {_one_line(exc)}", file=sys.stderr)
    emit("end", status=status, reason=reason)
    return 0


# ---------------------------------------------------------------- discovery


def discover_l0() -> dict[str, Any]:
    """Return the Level Zero loader, drivers and devices as JSON data (error set on failure)."""
    os.environ.setdefault("ZES_ENABLE_SYSMAN", "1")
    from l0mem._ze import loader_path, loader_versions
    from l0mem._ze.errors import LoaderError, UninitializedError, ZeError
    from l0mem.core import drivers
    from l0mem.probe.fingerprint import kernel_module_version

    alt = [p for p in os.environ.get("ZE_ENABLE_ALT_DRIVERS", "").split(",") if p.strip()]
    out: dict[str, Any] = {"error": None, "devices": [], "drivers": [], "alt_drivers": alt}
    try:
        found = drivers()
    except LoaderError as exc:
        out["error"] = f"no usable Level Zero loader: {exc}"
        return out
    except UninitializedError as exc:
        out["error"] = f"no Level Zero driver found ({exc})"
        return out
    except ZeError as exc:
        out["error"] = f"Level Zero initialization failed: {exc}"
        return out
    out["loader"] = {
        "path": loader_path(),
        "components": [{"name": n, "version": ".".join(map(str, v))} for n, v in loader_versions()],
    }
    flat = 0
    all_devices = []
    for drv in found:
        props = drv.properties
        out["drivers"].append(
            {
                "index": drv.index,
                "version": props.version,
                "driver_version": props.driver_version,
                "api_version": f"{props.api_version[0]}.{props.api_version[1]}",
                "uuid": props.uuid,
            }
        )
        devs = drv.devices()
        for dev in devs:
            all_devices.append((flat, drv, dev, devs))
            flat += 1
    index_of = {dev: i for i, _, dev, _ in all_devices}
    for i, drv, dev, devs in all_devices:
        kd = dev.kernel_driver
        states = dev.sysman_memory()
        free = sum(s.free for s in states if s.location == "device") if states else None
        try:
            dmabuf = dev.supports_dmabuf_export
        except ZeError:
            dmabuf = False
        out["devices"].append(
            {
                "index": i,
                "driver": drv.index,
                "driver_version": drv.properties.version,
                "name": dev.name,
                "type": dev.type,
                "pci_id": f"{dev.vendor_id:04x}:{dev.device_id:04x}",
                "pci_address": dev.pci_address,
                "uuid": dev.uuid,
                "memory_bytes": dev.total_memory,
                "free_bytes": free,
                "integrated": dev.properties.integrated,
                "kernel_driver": kd,
                "kernel_driver_version": kernel_module_version(kd) if kd else None,
                "dmabuf_export": dmabuf,
                "peer_access": [
                    index_of[o] for o in devs if o is not dev and dev.can_access_peer(o)
                ],
            }
        )
    if not out["devices"]:
        out["error"] = "the Level Zero drivers report no device"
    return out


def discover_sycl(filter_text: str | None) -> dict[str, Any]:
    """Return the SYCL runtime versions and devices (matching ``filter_text``) as JSON data."""
    import importlib.metadata

    out: dict[str, Any] = {"error": None, "devices": [], "runtime": {}}
    for pkg in ("dpctl", "intel-sycl-rt", "intel-cmplr-lib-ur", "intel-opencl-rt"):
        try:
            out["runtime"][pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        from l0mem.sycl import describe, find_devices

        found = find_devices(filter_text)
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    except Exception as exc:
        out["error"] = f"SYCL unavailable: {_one_line(exc)}"
        return out
    for dev in found:
        info = describe(dev)
        out["devices"].append(
            {
                "filter_string": info.filter_string,
                "name": info.name,
                "backend": info.backend,
                "device_type": info.device_type,
                "vendor": info.vendor,
                "driver_version": info.driver_version,
                "platform": info.platform,
                "platform_version": str(dev.sycl_platform.version),
                "global_mem_size": info.global_mem_size,
                "max_mem_alloc_size": int(dev.max_mem_alloc_size),
            }
        )
    if not out["devices"]:
        out["error"] = (
            f"no SYCL device matches {filter_text!r}" if filter_text else "no SYCL device found"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the child in the mode named by ``argv[0]``; return the exit code."""
    _die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    mode = args[0] if args else ""
    if mode == "run":
        # Discovery holds no device memory: there SIGINT and SIGTERM simply end it.
        _install_handlers()
    emit = _Emitter(_protocol_stream())
    try:
        if mode == "run":
            # From here a stop signal is handled: the parent may now police the run.
            emit("ready", pid=os.getpid())
            try:
                spec = json.loads(sys.stdin.read())
            except ValueError as exc:
                emit("end", status="failed", reason=f"bad set-up spec: {_one_line(exc)}")
                return 2
            if not isinstance(spec, dict):
                emit("end", status="failed", reason="bad set-up spec: not a JSON object")
                return 2
            return run(spec, emit)
        if mode == "discover-l0":
            emit("inventory", **discover_l0())
            return 0
        if mode == "discover-sycl":
            emit("inventory", **discover_sycl(args[1] if len(args) > 1 else None))
            return 0
    except BrokenPipeError:
        return 1
    print(
        f"l0mem audit child: unknown mode {mode!r} (run, discover-l0, discover-sycl)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
