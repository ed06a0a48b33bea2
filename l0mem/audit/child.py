"""The audit's child process: discovers devices or runs one set-up, reporting JSON lines.

Run as ``python -m l0mem.audit.child MODE`` with MODE one of:

- ``run``: reads a set-up spec (:meth:`SetupPlan.to_spec`) as JSON on stdin,
  allocates device memory in steps, fills every allocation on the device,
  then frees it a step at a time; every step is a *step window*, a sample of
  every memory signal right before it and one right after, with a random
  pause around the settle time between windows. While the slope's interval
  still spans two verdicts or is wider than 10% of the slope (50 MiB/GiB at
  least) on either side (:mod:`l0mem.estimate`: a busy machine), it
  allocates and frees one step again, window by window, until it is not or
  ``budget_s`` is spent (judged as the audit will judge it, for the GPU
  drivers the spec's ``stacks`` names). Then it frees what is left and
  samples again.
- ``discover-l0``: describes the Level Zero loader, drivers and devices.
- ``discover-sycl [FILTER]``: describes the SYCL runtime and devices.

Output is one JSON object per line on stdout, each with an ``event`` key:
``ready`` (run mode: the stop handlers are installed, ``pid``), ``devices``
(what the run uses), ``sample`` (``t``, ``phase``, ``device_bytes``,
``values``, ``unavailable``, and ``step``, ``edge`` on a window's two samples:
streamed as taken, so data survives a crash), ``freed`` (``allocations``,
``bytes``: everything freed, step by step and at the end), ``end``
(``status``: ok, stopped-early, interrupted or failed; ``reason``;
``untouched_allocations``: how many allocations did not read back the fill
pattern, so their memory may never have been touched), and
``inventory`` for the discovery modes. Anything libraries print goes to
stderr, never into this stream.

Before each driver allocation the child checks the safety guard itself
(MemAvailable minus the predicted host cost of the rest of the step, at least
1:1 and at least the slope measured so far, must stay above ``floor_bytes``;
until a slope is measured, one allocation may take no more than the room
above the floor over :data:`~l0mem.audit.guard.MAX_RATIO`, and the first
allocation measures the slope), and after every driver call of a step it
checks MemAvailable against the floor (:meth:`Runner.checkpoint`). SIGINT, SIGTERM and SIGHUP stop it at the end
of the step: it takes that step's sample, frees everything, takes the freed
samples and reports what it freed (the discovery modes keep the default
handlers: they hold no device memory). If the parent dies, the kernel sends
SIGTERM (PR_SET_PDEATHSIG), so an orphan never keeps device memory.

This module is the process side (protocol, signals, modes); the run's loop
is :mod:`l0mem.audit.stepping`, what a set-up allocates with
:mod:`l0mem.audit.experiment`, what the discovery modes report
:mod:`l0mem.audit.discovery`.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

from l0mem.audit.discovery import discover_l0, discover_sycl, one_line
from l0mem.audit.stepping import Runner, Stop

_PR_SET_PDEATHSIG = 1


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if Stop.signum is None:
        Stop.signum = signum


def _install_handlers() -> None:
    """Turn SIGINT, SIGTERM and SIGHUP into a stop request the run checks at every safe point."""
    # The parent stops the child with SIGINT and SIGTERM: those are always handled.
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    # A hangup reaches the whole process group; under nohup it stays ignored here too.
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _on_signal)


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


def run(spec: dict[str, Any], emit: Callable[..., None]) -> int:
    """Run one set-up spec, emitting events; return the process exit code (2: bad spec)."""
    try:
        runner = Runner(spec, emit)
    except (KeyError, TypeError, ValueError) as exc:
        emit("end", status="failed", reason=f"bad set-up spec: {one_line(exc)}")
        return 2
    try:
        status, reason = runner.run()
    except Exception as exc:
        emit("end", status="failed", reason=one_line(exc))
        return 0
    finally:
        if runner.exp is not None:
            try:
                runner.exp.close()
            except Exception as exc:
                print(f"l0mem audit child: closing failed: {one_line(exc)}", file=sys.stderr)
    emit("end", status=status, reason=reason, untouched_allocations=runner.untouched)
    return 0


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
                emit("end", status="failed", reason=f"bad set-up spec: {one_line(exc)}")
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
