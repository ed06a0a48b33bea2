"""The audit child process: its libc declarations, how it handles signals per mode, its experiment."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, cast

import pytest

from l0mem.audit import child
from l0mem.backends import LevelZeroBackend, PeerAccess

ROOT = Path(__file__).resolve().parent.parent
PR_GET_PDEATHSIG = 2


def test_prctl_is_declared_once_with_its_c_signature() -> None:
    prctl = child._prctl()
    assert prctl is not None
    assert prctl.restype is ctypes.c_int
    assert prctl.argtypes == [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    assert child._prctl() is prctl


def test_the_child_asks_for_sigterm_when_its_parent_dies() -> None:
    code = (
        "import ctypes, signal\n"
        "from l0mem.audit import child\n"
        "child._die_with_parent()\n"
        "sig = ctypes.c_int(-1)\n"
        f"rc = child._prctl()({PR_GET_PDEATHSIG}, ctypes.addressof(sig), 0, 0, 0)\n"
        "print(rc, sig.value)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", str(int(signal.SIGTERM))]


def _child(mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", child.__name__, mode],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZE_ENABLE_ALT_DRIVERS": "/nonexistent/libze_none.so"},
    )


def test_run_mode_says_ready_then_a_stop_signal_no_longer_kills_it() -> None:
    proc = _child("run")
    assert proc.stdout is not None and proc.stdin is not None
    first = proc.stdout.readline()
    assert '"event": "ready"' in first and f'"pid": {proc.pid}' in first
    # Ready means handled: SIGTERM now asks it to stop instead of killing it.
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(input="", timeout=60)  # and then no spec at all
    assert proc.returncode == 2, err
    assert '"event": "end", "status": "failed", "reason": "bad set-up spec:' in out
    assert "Traceback" not in err


def test_discovery_modes_keep_the_default_signal_handling() -> None:
    # Discovery holds no device memory: Ctrl-C must end it at once, not be swallowed.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys\n"
            "from l0mem.audit import child\n"
            "child.discover_l0 = lambda: print(signal.getsignal(signal.SIGINT) is "
            "signal.default_int_handler, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "
            "file=sys.stderr) or {}\n"
            "sys.exit(child.main(['discover-l0']))\n",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.split() == ["True", "True"]
    assert '"event": "inventory"' in out


def _fake_l0(monkeypatch: pytest.MonkeyPatch, backend: object, count: int = 2) -> None:
    """Give the experiment ``count`` fake devices of one driver and ``backend`` as the open backend."""
    from l0mem.audit import experiment

    driver = object()
    devices = [types.SimpleNamespace(driver=driver) for _ in range(count)]
    monkeypatch.setattr(experiment, "level_zero_devices", lambda: devices)
    monkeypatch.setattr(experiment, "open_backend", lambda kind, devs, **kw: backend)


def _l0_spec(**overrides: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "backend": "l0",
        "l0_devices": [0, 1],
        "context": "multi",
        "peer_resident": True,
        "dmabuf": False,
    }
    spec.update(overrides)
    return spec


class _FailingL0(LevelZeroBackend):
    """A Level Zero backend over no device whose peer query fails; it counts its closes."""

    def __init__(self) -> None:  # nothing to open
        self.closes = 0

    def peer_access(self, src: int, dst: int) -> PeerAccess:
        raise RuntimeError("peer query failed")

    def close(self) -> None:
        self.closes += 1


def test_a_failure_after_the_level_zero_backend_opened_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from l0mem.audit.experiment import open_experiment

    backend = _FailingL0()
    _fake_l0(monkeypatch, backend)
    with pytest.raises(RuntimeError, match="peer query failed"):
        open_experiment(_l0_spec())
    assert backend.closes == 1


def test_the_level_zero_set_ups_hold_a_level_zero_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from l0mem.audit.experiment import open_experiment

    class NotLevelZero:
        closes = 0

        def close(self) -> None:
            self.closes += 1

    other = NotLevelZero()
    _fake_l0(monkeypatch, other)
    with pytest.raises(TypeError, match="expected the Level Zero backend"):
        open_experiment(_l0_spec(peer_resident=False))
    assert other.closes == 1


# ---------------------------------------------------------------- the fill is proved


class _Recording:
    """A stand-in backend whose fills reach memory or not, recording what is written and read."""

    def __init__(self, fills: bool, moves: bool = True) -> None:
        self.fills = fills
        self.moves = moves  # False: uploads and downloads complete but move no byte
        self.memory: dict[int, bytearray] = {}
        self.calls: list[tuple[str, int, int]] = []

    def _data(self, buf: Any) -> bytearray:
        return self.memory.setdefault(id(buf), bytearray(buf.nbytes))  # fresh memory reads zero

    def fill(self, buf: Any, pattern: bytes) -> Any:
        self.calls.append(("fill", 0, buf.nbytes))
        if self.fills:
            self._data(buf)[:] = (pattern * (buf.nbytes // len(pattern) + 1))[: buf.nbytes]
        return types.SimpleNamespace(wait=lambda: None)

    def upload(self, view: Any, data: bytes) -> Any:
        self.calls.append(("upload", view.offset, view.nbytes))
        if self.moves:
            self._data(view.parent)[view.offset : view.offset + len(data)] = data
        return types.SimpleNamespace(wait=lambda: None)

    def download(self, view: Any, out: bytearray) -> Any:
        self.calls.append(("download", view.offset, view.nbytes))
        if self.moves:
            out[:] = self._data(view.parent)[view.offset : view.offset + view.nbytes]
        return types.SimpleNamespace(wait=lambda: None)


class _Buf:
    """A stand-in buffer: its size and views of it."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def view(self, offset: int, nbytes: int) -> Any:
        return types.SimpleNamespace(parent=self, offset=offset, nbytes=nbytes)


@pytest.mark.parametrize("pattern", [b"\0\0\0\0", b"\xa5\x5a\x01\x02"])
@pytest.mark.parametrize("fills", [True, False])
def test_fill_proved_needs_the_fill_to_replace_canaries(fills: bool, pattern: bytes) -> None:
    from l0mem.audit.experiment import fill_proved

    backend, buf = _Recording(fills), _Buf(1000)
    # A zero pattern on fresh (zero) memory proves nothing by itself: the canaries do.
    assert fill_proved(cast(Any, backend), cast(Any, buf), pattern) is fills
    # Whole patterns at multiples of its length: start, middle, last.
    places = [0, 496, 996]
    uploads = [("upload", o, 4) for o in places]
    reads = [("download", o, 4) for o in places] if fills else [("download", 0, 4)]
    assert backend.calls == [*uploads, ("fill", 0, 1000), *reads]


@pytest.mark.parametrize("pattern", [b"\0\0\0\0", b"\xa5\x5a\x01\x02"])
def test_fill_is_not_proved_when_no_copy_moves_a_byte(pattern: bytes) -> None:
    # Intel's driver in its no-hardware mode completes copies and fills without
    # executing them: a zeroed read-back buffer used to pass for a zero fill.
    from l0mem.audit.experiment import fill_proved

    backend, buf = _Recording(fills=False, moves=False), _Buf(1000)
    assert fill_proved(cast(Any, backend), cast(Any, buf), pattern) is False


def _sim_audit(monkeypatch: pytest.MonkeyPatch, **config: object) -> Any:
    """Run the l0 set-up of a small audit on the simulator configured by ``config``."""
    from l0mem.audit import AuditOptions, Guard, analyze_run, discover, plan_audit, run_setup
    from tests.support import sim

    sim.use_in_process(monkeypatch, **config)
    guard = Guard(floor_bytes=2 << 30)
    options = AuditOptions(setups=("l0",), size_bytes=64 << 20, steps=2, settle_s=0.0)
    (plan,) = plan_audit(options, discover(options), guard.floor_bytes)
    run = run_setup(plan, guard=guard)
    return run, analyze_run(run)


def test_an_untouched_allocation_makes_the_run_inconclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 9: fills that never reached memory were judged "clean" from untouched memory.
    run, result = _sim_audit(monkeypatch, devices=1, mirror="none", fill_noop=1)
    assert run.status == "ok", run.reason
    assert run.untouched_allocations == 2
    assert run.to_dict()["untouched_allocations"] == 2
    assert result.verdict == "inconclusive"
    assert result.reason.startswith("memory not touched: 2 allocation(s)")


def test_a_filled_run_reports_no_untouched_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    run, result = _sim_audit(monkeypatch, devices=1, mirror="none")
    assert run.status == "ok", run.reason
    assert run.untouched_allocations == 0
    assert result.verdict != "inconclusive" or "not touched" not in result.reason
