"""Every command ends on SIGINT, SIGTERM and SIGHUP as on Ctrl-C: exit 128 + N, the signal named.

The measuring commands run in real processes against the simulator. Each is
started through a few lines that wrap the benchmark's timing routine: at the
start of its K-th call the process signals itself, so exactly K - 1
measurements finished, whatever the machine's load. After the command the
same process asks the simulator how much device memory is still allocated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from l0mem.cli import _common
from l0mem.cli._common import measuring, signal_exit
from l0mem.cli._signals import Interrupted, stop_signals_interrupt
from tests.support import sim

ROOT = Path(__file__).resolve().parent.parent

WRAPPED = """
import json, os, signal, sys, time
from l0mem.bench import {module} as bench
from tests.support.sim import SimControl

real, calls = bench.{timer}, []

def timed(*args, **kwargs):
    calls.append(1)
    if len(calls) == {at}:
        # The command runs in a worker thread: the main thread takes the signal and
        # raises it here, in one of these short sleeps, before this measurement begins.
        os.kill(os.getpid(), signal.{signal})
        for _ in range(500):
            time.sleep(0.01)
        raise AssertionError("the stop never reached the command")
    return real(*args, **kwargs)

bench.{timer} = timed
from l0mem.cli import cli
try:
    cli.main(args=sys.argv[1:], prog_name="l0mem")
finally:
    ctl = SimControl.from_env()
    print("LIVE " + json.dumps([ctl.device_used(i) for i in range(2)]), file=sys.stderr)
"""


def _run_signalled(
    module: str, timer: str, at: int, signum: signal.Signals, args: list[str]
) -> subprocess.CompletedProcess[str]:
    code = WRAPPED.format(module=module, timer=timer, at=at, signal=signum.name)
    env = sim.sim_env(devices=2)
    env["PYTHONPATH"] = f"{ROOT}:{env.get('PYTHONPATH', '')}"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**env, "COLUMNS": "160"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _live(stderr: str) -> list[int]:
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("LIVE ")]
    return list(json.loads(line.removeprefix("LIVE ")))


def _lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("LIVE ")]


def test_p2p_on_sigterm_writes_and_shows_the_copies_that_finished(tmp_path: Path) -> None:
    out = tmp_path / "p2p.json"
    args = ["p2p", "--sizes", "4K", "--reps", "3", "--warmup", "0", "--json", str(out)]
    proc = _run_signalled("copies", "time_op", 3, signal.SIGTERM, args)
    assert proc.returncode == 143, proc.stderr
    assert _lines(proc.stderr) == [
        "l0mem p2p: interrupted by SIGTERM; device memory was freed, partial results kept"
    ]
    assert _live(proc.stderr) == [0, 0]
    data = json.loads(out.read_text())
    assert data["complete"] is False
    # Six copies make the run (two same-device, two direct, two staged); two finished.
    assert len(data["copies"]) == 2
    assert all(len(c["samples_ns"]) == 3 for c in data["copies"])
    assert any(
        n.startswith("interrupted: 2 copy timing(s) and 0 check(s) finished") for n in data["notes"]
    )
    assert "Copy bandwidth" in proc.stdout and "interrupted: 2 copy timing(s)" in proc.stdout


def test_allreduce_on_sighup_writes_and_shows_the_rows_that_finished(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    out = tmp_path / "ar.json"
    args = ["allreduce", "--sizes", "16K,64K", "--reps", "2", "--warmup", "0"]
    args += ["--json", str(out)]
    proc = _run_signalled("allreduce", "time_op", 3, signal.SIGHUP, args)
    assert proc.returncode == 129, proc.stderr
    assert _lines(proc.stderr) == [
        "l0mem allreduce: interrupted by SIGHUP; device memory was freed, partial results kept"
    ]
    assert _live(proc.stderr) == [0, 0]
    data = json.loads(out.read_text())
    assert data["complete"] is False
    # Both paths of the first size finished; the second size never started.
    assert [(r["nbytes"], r["path"]) for r in data["results"]] == [(16384, "f32"), (16384, "bf16")]
    assert data["ok"] is True
    assert "All-reduce over 2 devices" in proc.stdout


def test_bench_kernels_on_sigterm_in_warm_up_writes_a_run_without_kernels(tmp_path: Path) -> None:
    # Signalled as the timing starts: warm-up measures nothing, the run is still written.
    out = tmp_path / "k.json"
    args = ["bench", "kernels", "--backend", "l0", "--elements", "4096", "--reps", "2"]
    args += ["--json", str(out)]
    proc = _run_signalled("kernels", "time_ops", 1, signal.SIGTERM, args)
    assert proc.returncode == 143, proc.stderr
    assert _lines(proc.stderr) == [
        "l0mem bench kernels: interrupted by SIGTERM; device memory was freed, partial results kept"
    ]
    assert _live(proc.stderr) == [0, 0]
    data = json.loads(out.read_text())
    assert data["complete"] is False
    assert data["copy"] is None and data["kernels"] == [] and data["timing"] is None
    assert "nothing measured" in proc.stdout


def test_bench_kernels_on_sigint_writes_and_shows_the_repetitions_taken(tmp_path: Path) -> None:
    # Signalled at the 5th kernel launch, no warm-up, three kernels: round 1 finished, and
    # round 2 timed the copy and the first kernel before the second was stopped.
    out = tmp_path / "k.json"
    args = ["bench", "kernels", "--backend", "l0", "--elements", "4096", "--reps", "3"]
    args += ["--warmup", "0", "--json", str(out)]
    proc = _run_signalled("kernels", "launch_elementwise", 5, signal.SIGINT, args)
    assert proc.returncode == 130, proc.stderr
    assert _lines(proc.stderr) == [
        "l0mem bench kernels: interrupted by SIGINT; device memory was freed, partial results kept"
    ]
    assert _live(proc.stderr) == [0, 0]
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["repetitions"] == 3
    assert len(data["copy"]["samples_ns"]) == 2
    counts = {k["name"]: len(k["samples_ns"]) for k in data["kernels"]}
    assert counts == {"l0mem_f32_to_bf16": 2, "l0mem_bf16_add_to_f32": 1, "l0mem_f32_add": 1}
    assert all(k["ratio_to_copy"] > 0 for k in data["kernels"])
    assert "Kernel bandwidth" in proc.stdout and "Interrupted: partial results" in proc.stdout


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGINT, 130), (signal.SIGTERM, 143)]
)
def test_the_exit_code_of_a_stop_signal_is_128_plus_its_number(
    signum: signal.Signals, code: int
) -> None:
    assert signal_exit(signum) == (code, signum.name)
    assert signum in _common.STOP_SIGNALS


def test_measuring_names_the_signal_and_keeps_a_partial_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc, measuring("p2p"):
        raise Interrupted(signal.SIGTERM)
    assert exc.value.code == 143
    assert capsys.readouterr().err == "l0mem p2p: interrupted by SIGTERM; device memory was freed\n"

    from l0mem.bench.timing import MeasurementInterrupted

    kept: list[Any] = []
    with pytest.raises(SystemExit) as exc, measuring("allreduce", kept.append):
        raise MeasurementInterrupted({"rows": 1}, Interrupted(signal.SIGHUP))
    assert exc.value.code == 129 and kept == [{"rows": 1}]
    err = capsys.readouterr().err
    assert err == (
        "l0mem allreduce: interrupted by SIGHUP; device memory was freed, partial results kept\n"
    )


def test_stop_signals_raise_inside_and_come_back_after() -> None:
    # nohup: an ignored SIGHUP stays ignored; SIGTERM raises Interrupted inside only.
    before_term = signal.getsignal(signal.SIGTERM)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals_interrupt():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            with pytest.raises(Interrupted) as exc:
                signal.raise_signal(signal.SIGTERM)
            assert exc.value.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is before_term
    finally:
        signal.signal(signal.SIGHUP, old_hup)


def test_a_command_interrupted_outside_a_measuring_block_exits_128_plus_n(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # compare measures nothing: the command group alone maps the signal.
    import l0mem.cli.compare as compare_cli
    from l0mem.cli import cli

    def hangup(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGHUP)
        raise AssertionError("the SIGHUP handler did not raise")

    def unhandled(signum: int, frame: Any) -> None:
        raise AssertionError("SIGHUP reached the handler that was there before the command")

    monkeypatch.setattr(compare_cli, "load_pair", hangup)
    # Without the command's own handler SIGHUP would end the test run itself.
    before = signal.signal(signal.SIGHUP, unhandled)
    try:
        result = CliRunner().invoke(cli, ["compare", "a.json", "b.json"])
    finally:
        signal.signal(signal.SIGHUP, before)
    assert result.exit_code == 129, result.output
    assert result.output == "l0mem compare: error: interrupted by SIGHUP\n"


def _late_second_stop(
    command: list[str], tmp_path: Path, first: int, second: int, gap: float
) -> None:
    report = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "l0mem", *command[:1], "--quiet", "--interval", "0.05",
         "--json", str(report), *command[1:]],
        cwd=Path(__file__).resolve().parent.parent, env={**os.environ, **sim.sim_env()},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    proc.send_signal(first)
    time.sleep(gap)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(second)
    _, err = proc.communicate(timeout=60)
    # Whichever was handled first names the code, the line and the report alike; the other
    # never ends l0mem by its default action while it writes or exits.
    assert proc.returncode > 128, (proc.returncode, err)
    name = signal.Signals(proc.returncode - 128).name
    assert f"interrupted by {name}" in err, err
    assert json.loads(report.read_text())["stop_signal"] == name
    assert "Traceback" not in err


_PAIRS = [
    (signal.SIGTERM, signal.SIGHUP),
    (signal.SIGINT, signal.SIGTERM),
    (signal.SIGINT, signal.SIGINT),
    (signal.SIGHUP, signal.SIGINT),
]


@pytest.mark.parametrize("gap", [0.015, 0.04])
@pytest.mark.parametrize(("first", "second"), _PAIRS)
def test_a_late_second_stop_never_changes_runs_exit_code(
    tmp_path: Path, first: int, second: int, gap: float
) -> None:
    _late_second_stop(["run", "--", "sleep", "30"], tmp_path, first, second, gap)


@pytest.mark.parametrize(("first", "second"), _PAIRS[:2])
def test_a_late_second_stop_never_changes_watchs_exit_code(
    tmp_path: Path, first: int, second: int
) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        _late_second_stop(["watch", "--pid", str(sleeper.pid)], tmp_path, first, second, 0.025)
    finally:
        sleeper.kill()
        sleeper.wait()


_LEFT = """
import signal, sys
from l0mem.cli._signals import stop_signals_interrupt
try:
    with stop_signals_interrupt(ignore_late={late}):
        raise {exc}
except BaseException:
    pass
print(*(signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)))
"""


@pytest.mark.parametrize(
    ("late", "exc", "ignored"),
    [
        (True, "KeyboardInterrupt()", "True True True"),
        (True, "SystemExit(143)", "True True True"),
        (True, "SystemExit(1)", "False False False"),
        (True, "ValueError()", "False False False"),
        (False, "KeyboardInterrupt()", "False False False"),
    ],
)
def test_a_console_script_stopped_ignores_every_later_stop(
    late: bool, exc: str, ignored: str
) -> None:
    # The race above, decided: a stop that comes while l0mem writes its reports or exits
    # would end it by the signal's default action, with that signal's code. In-process
    # callers (late=False) get their own handlers back.
    code = _LEFT.format(late=late, exc=exc)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ignored.split(), out.stderr
