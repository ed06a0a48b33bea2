"""Loading the drivers in a child process first: a driver that hangs or crashes there takes only the child.

``zeInit`` loads every driver the loader finds, and runs their code: one that
never returns holds the calling thread inside C, where no Python signal
handler runs (Ctrl-C and SIGTERM would wait for it for ever), and one that
aborts takes the process with it before it can say a word. :func:`check_drivers_load`
makes the same ``zeInit`` call in a short-lived child process (the same
loader, the same environment) and waits for it with a deadline, in Python,
where signals still reach the caller; a child that does not return in time,
is killed by a signal, or is ended by the driver (``exit`` inside
``zeInit``) raises :class:`DriverLoadError`, and the caller never makes the
call itself. What the child's ``zeInit`` returned does not matter: the
caller's own call reports it. (The child calls ``zeInit``; a loader that
offers ``zeInitDrivers`` is asked through that by the caller, which loads
the same drivers.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import IO

from l0mem._ze.errors import LoaderError
from l0mem._ze.loader import loader_request

# The child's exit code when it cannot load the loader (or it has no zeInit): the
# caller's own load says why.
_NO_LOADER = 97
# What the child writes once zeInit returned: a driver that ends the process inside
# zeInit (exit(0) included) never lets it be written.
_RETURNED = b"zeInit returned\n"
# The child: load the loader, call zeInit once, leave without running the
# drivers' exit code (a driver that hangs at exit is not what is checked here).
_CHILD = (
    "import ctypes, os, sys\n"
    "try:\n"
    "    lib = ctypes.CDLL(sys.argv[1])\n"
    "    lib.zeInit\n"
    "except (OSError, AttributeError):\n"
    f"    os._exit({_NO_LOADER})\n"
    "lib.zeInit.argtypes = [ctypes.c_uint32]\n"
    "lib.zeInit.restype = ctypes.c_uint32\n"
    "lib.zeInit(0)\n"
    f"os.write(1, {_RETURNED!r})\n"
    "os._exit(0)\n"
)
# How long zeInit may take in the child, seconds (a cold GPU can take several).
TIMEOUT_ENV = "L0MEM_DRIVER_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
# How often the caller looks: signals reach it between looks.
_POLL = 0.05
_TAIL = 4096
# (library, environment) pairs whose zeInit came back in the child: tried once per process.
_passed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


class DriverLoadError(LoaderError):
    """A Level Zero driver hung or crashed in ``zeInit`` (found in a child process)."""


class DriverTimeoutSettingError(ValueError):
    """$L0MEM_DRIVER_TIMEOUT is not a positive number of seconds."""


def timeout_from_env(env: Mapping[str, str] | None = None) -> float:
    """Return the seconds ``zeInit`` may take, from $L0MEM_DRIVER_TIMEOUT (a positive number)."""
    text = (os.environ if env is None else env).get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise DriverTimeoutSettingError(
            f"{TIMEOUT_ENV}={text[:40]!r}: expected a positive number of seconds"
        )
    return value


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _last_line(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - _TAIL))
    lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    return " ".join(lines[-1].split())[:200] if lines else ""


def check_drivers_load(timeout: float | None = None) -> None:
    """Call ``zeInit`` in a child process first; raise DriverLoadError where it hung or crashed there.

    ``timeout`` defaults to :func:`timeout_from_env`. The child gets this
    process's environment, with ``ZES_ENABLE_SYSMAN`` as
    :func:`l0mem.core.drivers` would set it. An interrupt while waiting
    (KeyboardInterrupt, or any exception a signal handler raises) kills the
    child and propagates.
    """
    limit = timeout_from_env() if timeout is None else timeout
    library, _ = loader_request()
    env = dict(os.environ)
    env.setdefault("ZES_ENABLE_SYSMAN", "1")
    key = (library, tuple(sorted(env.items())))
    if key in _passed:
        return  # tried already in this process, with this loader and environment
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _CHILD, library],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
        )
        try:
            deadline = time.monotonic() + limit
            while True:
                try:
                    code = proc.wait(timeout=_POLL)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        raise DriverLoadError(
                            f"a Level Zero driver did not return from zeInit within {limit:g} s "
                            f"(tried in a child process, killed): it hangs; check the GPU and its "
                            f"driver (dmesg), leave the driver out (ZE_ENABLE_ALT_DRIVERS), or "
                            f"allow more time ({TIMEOUT_ENV})"
                        ) from None
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
        out.seek(0)
        if code == _NO_LOADER or (code == 0 and out.read() == _RETURNED):
            _passed.add(key)
            return
        said = _last_line(err)
        how = (
            f"killed by {_signal_name(-code)}"
            if code < 0
            else f"the process ended with code {code} inside zeInit"
        )
        raise DriverLoadError(
            f"a Level Zero driver crashed in zeInit (tried in a child process: {how})"
            + (f": it said {said!r}" if said else "")
            + "; check the driver's installation, or leave it out (ZE_ENABLE_ALT_DRIVERS)"
        )


__all__ = [
    "DEFAULT_TIMEOUT",
    "TIMEOUT_ENV",
    "DriverLoadError",
    "DriverTimeoutSettingError",
    "check_drivers_load",
    "timeout_from_env",
]
