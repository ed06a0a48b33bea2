"""Sysman device memory for ``l0mem run`` and ``l0mem watch``, read by a child process.

Reading Sysman means loading the Level Zero loader and a GPU driver; the
watcher itself never does (a driver in l0mem's process could change what the
host pays, and a crash in it would take the watch down). :class:`SysmanReader`
starts ``python -m l0mem.watch.sysman`` with the workload's driver settings and
``ZES_ENABLE_SYSMAN=1``; the child opens no context and allocates nothing, and
answers each request with one JSON line: ``sysman.<index>.used`` per root
device (device-wide use, what ``zesMemoryGetState`` says, across every process
on the device), or why Sysman is unavailable.

The watcher never waits on it for long: an answer later than
:data:`ANSWER_WAIT` leaves that sample's Sysman values out ("unavailable"
with the reason), and a child that fails to start, dies or never answers
makes the signal unavailable for the rest of the run, never 0. The child
ends when its stdin closes, so it cannot outlive l0mem, even one killed
with SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from l0mem.driverenv import recorded_environment
from l0mem.trace.environment import untraced

ANSWER_WAIT = 0.2  # seconds a sample waits for Sysman's answer
START_WAIT = 20.0  # seconds the child may take to load the loader and the driver
STOP_POLL = 0.05  # seconds between looks at a stop request while the child loads
_STOP_WAIT = 2.0


def child_environment(
    base: Mapping[str, str], workload: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return the child's environment: ``base`` with the workload's driver settings and Sysman on.

    The workload's variables that change the driver (those a report records)
    replace ``base``'s of the same kind, values in full; l0mem's allocation
    tracer is never put in front of the child, and where one already stands
    in front of the driver (l0mem itself watched by a traced run) the driver
    it traces takes its place (:func:`l0mem.trace.environment.untraced`).
    """
    env = {k: v for k, v in untraced(base).items() if not k.startswith("L0MEM_TRACE")}
    if workload is not None:
        plain = untraced(workload)
        drivers = recorded_environment(plain)
        env = {k: v for k, v in env.items() if k not in recorded_environment(base)}
        env.update({k: plain[k] for k in drivers if not k.startswith("L0MEM_TRACE")})
    env["ZES_ENABLE_SYSMAN"] = "1"
    return env


class SysmanReader:
    """Device memory by Sysman's count from a child process, one request per sample."""

    def __init__(self, env: Mapping[str, str], *, command: list[str] | None = None) -> None:
        self.reason: str | None = "Sysman's reader is starting"
        self._devices: int | None = None
        self.names: tuple[str, ...] = ()  # the devices' names, as the driver gives them
        self._buffer = b""
        self._pending: int | None = None
        self._next = 0
        self._started = time.monotonic()
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                command or [sys.executable, "-m", "l0mem.watch.sysman"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                start_new_session=True,  # a Ctrl-C is for the workload and l0mem; it ends on EOF
            )
        except OSError as exc:
            self._proc = None
            self.reason = f"Sysman's reader could not start: {exc.strerror or exc}"

    def _lines(self, timeout: float) -> list[dict[str, Any]]:
        """Return the complete lines the child wrote, waiting up to ``timeout`` for the first."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        out: list[dict[str, Any]] = []
        while True:
            wait = max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([fd], [], [], 0.0 if out else wait)
            if not ready:
                return out
            chunk = os.read(fd, 65536)
            if not chunk:
                self._fail("Sysman's reader ended")
                return out
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split(b"\n")
            for line in complete:
                with contextlib.suppress(ValueError):
                    got = json.loads(line)
                    if isinstance(got, dict):
                        out.append(got)

    def _fail(self, reason: str) -> None:
        self.reason, self._devices = reason, None
        self.close()

    def _send(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._pending, self._next = self._next, self._next + 1
        try:
            self._proc.stdin.write(f"{self._pending}\n".encode())
            self._proc.stdin.flush()
        except OSError:
            self._fail("Sysman's reader ended")

    def wait_ready(self, timeout: float, stop: Callable[[], bool] | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the child to have loaded the driver (or given up); return whether it did either.

        ``stop`` is asked every :data:`STOP_POLL` seconds: where it says so
        (the user stopped l0mem), the wait ends at once.
        """
        deadline = time.monotonic() + timeout
        while self._proc is not None and self._devices is None:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop()):
                return False
            for msg in self._lines(min(left, STOP_POLL)):
                self._header(msg)
        return True

    def read(self) -> tuple[dict[str, int], str | None]:
        """Return this sample's ``sysman.<index>.used`` values, or ({}, why they are absent)."""
        if self._proc is None:
            return {}, self.reason
        if self._devices is None:
            for msg in self._lines(0.0):
                self._header(msg)
            if self._devices is None:
                if self._proc is not None and time.monotonic() - self._started > START_WAIT:
                    self._fail(f"Sysman's reader did not start within {START_WAIT:.0f} s")
                return {}, self.reason
        if self._pending is None:
            self._send()
        answer: dict[str, Any] | None = None
        wanted = self._pending
        for msg in self._lines(ANSWER_WAIT) if self._proc is not None else []:
            if msg.get("id") == wanted:
                answer, self._pending = msg, None
        if answer is None:
            if self._proc is None:
                return {}, self.reason
            return {}, f"Sysman did not answer within {ANSWER_WAIT} s"
        if "unavailable" in answer:
            return {}, str(answer["unavailable"])
        values = answer.get("used", {})
        return {f"sysman.{i}.used": int(v) for i, v in values.items()}, None

    def _header(self, msg: Mapping[str, Any]) -> None:
        if "unavailable" in msg:
            self.reason = f"Sysman: {msg['unavailable']}"
            self.close()
        elif isinstance(msg.get("devices"), int):
            self._devices, self.reason = msg["devices"], None
            names = msg.get("names")
            if isinstance(names, list):
                self.names = tuple(str(n) for n in names)

    def close(self) -> None:
        """End the child (its stdin closes; killed if it does not end in two seconds)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(_STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# ------------------------------------------------------------------ the child


def _used(device: Any) -> int | None:
    states = device.sysman_memory()
    if not states:
        return None
    return sum(s.used for s in states if s.location == "device")


def _name(device: Any) -> str:
    try:
        return str(device.name)
    except Exception:  # a driver that cannot say its name still answers for memory
        return ""


def main() -> int:
    """Answer each request line on stdin with one JSON line of Sysman's device memory."""
    out = sys.stdout
    try:
        from l0mem.core import drivers

        devices = [d for drv in drivers() for d in drv.devices()]
    except Exception as exc:  # any failure to load is the answer, in one line
        out.write(
            json.dumps({"unavailable": f"{type(exc).__name__}: {exc}".splitlines()[0]}) + "\n"
        )
        out.flush()
        return 0
    # The names say whose numbers these are (l0mem's simulated driver names its devices so).
    names = [_name(d) for d in devices]
    out.write(json.dumps({"devices": len(devices), "names": names}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = line.strip()
        try:
            used = {i: _used(d) for i, d in enumerate(devices)}
            answer: dict[str, Any] = {"id": int(request)}
            if devices and all(v is None for v in used.values()):
                why = devices[0].sysman_unavailable or "Sysman gave no memory modules"
                answer["unavailable"] = why
            else:
                answer["used"] = {str(i): v for i, v in used.items() if v is not None}
        except Exception as exc:
            answer = {"id": int(request) if request.isdigit() else -1}
            answer["unavailable"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
