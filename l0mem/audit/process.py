"""The audit's child processes: start one, read its JSON lines, signal and reap it; device discovery.

Every discovery and every set-up runs in its own ``python -m l0mem.audit.child``
process (:mod:`l0mem.audit.child`), so a driver crash or an OOM kill costs
one child, not the tool, and the parent never loads a driver itself.
:class:`ChildProcess` is one such process; :func:`discover` runs the two
discovery children and returns their :class:`Inventory`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

from l0mem.audit.runs import REASON_DISCOVERY
from l0mem.audit.setups import AuditOptions, Inventory

CHILD_MODULE = "l0mem.audit.child"
DISCOVERY_TIMEOUT_S = 120.0
_STDERR_TAIL = 4000


class Cancelled(Exception):
    """The cancel event was set while no set-up was running (during discovery)."""


class CancelEvent(threading.Event):
    """A cancel event that remembers the signal which asked for it (SIGINT when none said)."""

    def __init__(self) -> None:
        super().__init__()
        self.signum = int(signal.SIGINT)

    def request(self, signum: int) -> None:
        """Cancel because of ``signum``; the first signal is the one remembered."""
        if not self.is_set():
            self.signum = int(signum)
        self.set()


def cancel_signal(cancel: threading.Event) -> int:
    """Return the signal that set ``cancel`` (SIGINT for a plain event: Ctrl-C's)."""
    return cancel.signum if isinstance(cancel, CancelEvent) else int(signal.SIGINT)


def request_cancel(cancel: threading.Event, err: BaseException | None = None) -> None:
    """Set ``cancel`` for interrupt ``err`` (its ``signum``, else SIGINT)."""
    signum = getattr(err, "signum", None)
    if isinstance(cancel, CancelEvent):
        cancel.request(signum if isinstance(signum, int) else int(signal.SIGINT))
    else:
        cancel.set()


def signal_name(signum: int) -> str:
    """Return a signal's name (``SIGTERM``), or ``signal N`` for a number without one."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def child_env(extra: dict[str, str], unset: Sequence[str] = ()) -> dict[str, str]:
    """Return this process's environment without ``unset``, with ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(extra)
    return env


def _stderr_tail(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - _STDERR_TAIL))
    text = f.read().decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    # A child that raised one of l0mem's own errors ends its traceback with the class's
    # module path; its message says all (the call, the result and what it means).
    own = _OWN_ERROR.match(lines[-1])
    return own.group(1) if own else lines[-1]


# "l0mem._ze.errors.DeviceLostError: zeDriverGet: ..." -> "zeDriverGet: ..."
_OWN_ERROR = re.compile(r"^l0mem(?:\.\w+)+\.\w+(?:Error|Exception): (.+)$")


def exit_text(code: int) -> str:
    """Return how a child ended, for a report: ``exit code N`` or ``killed by SIGNAME``."""
    if code < 0:
        name = signal_name(-code)
        hint = " (the OOM killer?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


class ChildProcess:
    """One child process and the JSON lines it writes."""

    def __init__(self, python: str, args: Sequence[str], env: dict[str, str], stdin: bytes) -> None:
        """Start ``python -m l0mem.audit.child *args`` and hand it ``stdin``."""
        # A file, not a pipe: a chatty driver must never block on a full stderr pipe.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [python, "-m", CHILD_MODULE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.stdout = self.proc.stdout
        self._buf = b""
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        self.eof = False

    def read_events(self, timeout: float) -> Iterator[dict[str, Any]]:
        """Yield the complete JSON lines that arrive within ``timeout`` seconds.

        Lines read but not yet taken stay queued for the next call, so an
        interrupt while the caller handles one event loses none of the others.
        """
        if not self.eof:
            self._read(timeout)
        while self._pending:
            yield self._pending.popleft()

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.stdout], [], [], timeout)
        if not ready:
            return
        chunk = os.read(self.stdout.fileno(), 1 << 16)
        if not chunk:
            self.eof = True
            chunk = b"\n"
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "garbage", "line": line[:200].decode("utf-8", "replace")}
            if isinstance(event, dict):
                self._pending.append(event)

    @property
    def done(self) -> bool:
        """Return whether the child's output has ended and every event was taken."""
        return self.eof and not self._pending

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child unless it has already exited."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def finish(self, grace_s: float) -> int:
        """Wait for the child to exit (SIGKILL after ``grace_s``); return its exit code."""
        try:
            code = self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.stdout.close()
        return code

    def error_line(self) -> str:
        """Return the last line the child wrote to stderr ('' when none)."""
        return _stderr_tail(self.stderr)

    def close(self) -> None:
        """Kill the child if still running and release its files."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()
        self.stderr.close()


def _driver_timeout() -> float | None:
    """Return $L0MEM_DRIVER_TIMEOUT in seconds where the user set it, else None."""
    from l0mem._ze.guard import TIMEOUT_ENV, timeout_from_env

    return timeout_from_env() if os.environ.get(TIMEOUT_ENV, "").strip() else None


def discovery_timeout() -> float:
    """Return how long one discovery child may take: $L0MEM_DRIVER_TIMEOUT where set, else the default."""
    limit = _driver_timeout()
    return DISCOVERY_TIMEOUT_S if limit is None else limit


def silence_timeout(settle_s: float, default: float) -> float:
    """Return how long a set-up's child may write nothing: ``$L0MEM_DRIVER_TIMEOUT`` plus the settle time, where set.

    The child writes a sample at least once per settle time between driver
    calls, so a silence past the driver's timeout is a call that did not
    return. Unset: ``default`` (a step of a slow real driver may take long).
    """
    limit = _driver_timeout()
    return default if limit is None else limit + settle_s


def discover_one(
    python: str, args: list[str], env: dict[str, str], cancel: threading.Event
) -> dict[str, Any]:
    """Return the inventory one discovery child reports (``error`` set when it failed).

    Raises :class:`Cancelled` when ``cancel`` is set meanwhile.
    """
    child = ChildProcess(python, args, env, b"")
    try:
        deadline = time.monotonic() + discovery_timeout()
        found: dict[str, Any] | None = None
        while not child.done:
            if cancel.is_set():
                child.signal(signal.SIGTERM)
                raise Cancelled
            if time.monotonic() > deadline:
                return {"error": f"{REASON_DISCOVERY} ({args[0]}) did not finish in time"}
            for event in child.read_events(0.1):
                if event.get("event") == "inventory":
                    found = event
        code = child.finish(DISCOVERY_TIMEOUT_S)
        # Ctrl-C reaches the whole process group: a child it killed is a cancel, not an error.
        if cancel.is_set():
            raise Cancelled
        if found is None:
            detail = child.error_line()
            return {
                "error": f"{REASON_DISCOVERY} ({args[0]}) failed: {exit_text(code)}"
                + (f": {detail}" if detail else "")
            }
        found.pop("event", None)
        return found
    finally:
        child.close()


def discover(options: AuditOptions, cancel: threading.Event | None = None) -> Inventory:
    """Return the Level Zero and SYCL devices found, each queried in a child process."""
    cancel = cancel or threading.Event()
    l0 = discover_one(options.python, ["discover-l0"], child_env({}), cancel)
    inventory = Inventory(
        l0_devices=list(l0.get("devices", [])),
        l0_error=l0.get("error"),
        l0_info={k: l0.get(k) for k in ("loader", "drivers", "alt_drivers") if k in l0},
        sycl_devices=[],
        sycl_error=None,
        sycl_info={},
    )
    sycl_args = ["discover-sycl"] + ([options.sycl_device] if options.sycl_device else [])
    sycl = discover_one(
        options.python, sycl_args, child_env({}, inventory.sycl_env_unset), cancel
    )
    return dataclasses.replace(
        inventory,
        sycl_devices=list(sycl.get("devices", [])),
        sycl_error=sycl.get("error"),
        sycl_info={"runtime": sycl.get("runtime", {})},
    )


__all__ = [
    "CHILD_MODULE",
    "DISCOVERY_TIMEOUT_S",
    "CancelEvent",
    "Cancelled",
    "ChildProcess",
    "cancel_signal",
    "child_env",
    "discover",
    "discover_one",
    "discovery_timeout",
    "exit_text",
    "request_cancel",
    "signal_name",
    "silence_timeout",
]
