"""``-v`` of ``p2p``, ``allreduce`` and ``bench kernels``: the default output, then every signal kept.

Each repetition's time (which the default folds into medians and ranges)
is shown exact to the nanosecond, whole on one line at 80 columns; ``-q``
with ``-v`` is a usage error of one line.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from l0mem.bench.copies import CopyTiming, PeerInfo
from l0mem.bench.integrity import CopyCheck
from l0mem.bench.p2p import P2PResult
from l0mem.bench.timing import Measurement
from l0mem.cli.verbose_view import micros, millis, render_p2p
from tests.support import sim
from tests.support.cli import one_line, run_l0mem

# Each measuring command with a short run on the simulator: (command, args, devices).
RUNS = {
    "p2p": ("p2p", ["--backend", "l0", "--sizes", "4K,64K", "--reps", "3", "--warmup", "0"], 3),
    "allreduce": (
        "allreduce",
        ["--backend", "l0", "--sizes", "16K,4M", "--reps", "3", "--warmup", "0"],
        2,
    ),
    "bench kernels": (
        "bench",
        ["kernels", "--backend", "l0", "--elements", "65536", "--reps", "3", "--warmup", "0"],
        1,
    ),
}


def _samples(name: str, report: dict[str, Any]) -> list[str]:
    """Return every repetition of the JSON report as -v prints it."""
    if name == "p2p":
        return [micros(ns) for c in report["copies"] for ns in c["samples_ns"]]
    if name == "allreduce":
        return [millis(ns) for r in report["results"] for ns in r["time_ns"]["samples"]]
    ops = [report["copy"], *report["kernels"]]
    return [micros(ns) for op in ops for ns in op["samples_ns"]]


def _env(devices: int) -> dict[str, str]:
    return (
        sim.sim_env(devices=devices, peers="0>1,1>0")
        if devices == 3
        else sim.sim_env(devices=devices)
    )


@pytest.mark.parametrize("name", sorted(RUNS))
def test_verbose_shows_every_repetition_whole_at_80_columns(name: str, tmp_path: Path) -> None:
    command, args, devices = RUNS[name]
    env = _env(devices)
    out = tmp_path / "report.json"
    verbose = run_l0mem(command, [*args, "-v", "--json", str(out)], env, columns=80)
    assert verbose.returncode == 0, verbose.stderr
    report = json.loads(out.read_text())
    text = verbose.stdout
    assert "…" not in text and "..." not in text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    # Each repetition's time, as a whole token on some line: none cut or folded.
    tokens = {t for line in text.splitlines() for t in line.split()}
    samples = _samples(name, report)
    assert len(samples) >= 3 * 3
    missing = [s for s in samples if s not in tokens]
    assert not missing, (missing, text)
    assert "Every repetition" in text or "each call, ms" in text
    assert "Driver environment as measured" in text

    default = run_l0mem(command, args, env, columns=80)
    assert default.returncode == 0, default.stderr
    # The default opens the same way and hides the repetitions.
    assert default.stdout.splitlines()[0][:12] == text.splitlines()[0][:12]
    for hidden in ("Every repetition", "each call, ms", "Driver environment"):
        assert hidden not in default.stdout
    # -v adds to the default's tables: every heading of the default is there too.
    for heading in ("Copy bandwidth", "Copies checked", "threshold", "Kernel bandwidth"):
        assert (heading in default.stdout) == (heading in text), heading


def test_p2p_verbose_names_every_route_and_every_check(tmp_path: Path) -> None:
    command, args, devices = RUNS["p2p"]
    out = tmp_path / "p2p.json"
    proc = run_l0mem(command, [*args, "-v", "--json", str(out)], _env(devices), columns=80)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    lines = proc.stdout.splitlines()
    for p in report["peers"]:
        # The default table shows a direct route without its reason; -v gives it.
        assert any(
            line.split()[:2] == [f"{p['src']}>{p['dst']}", p["route"]] and p["route_reason"] in line
            for line in lines
        ), p
    # One row per copy checked (the default folds them into one per pair and route).
    start = next(
        i for i, line in enumerate(lines) if "Every copy checked byte for byte (seed " in line
    )
    rows = [line for line in lines[start:] if re.match(r" \d+>\d+ ", line)]
    assert len(rows) == len(report["checks"]) > 0
    sizes = {f"{c['nbytes']:,}" for c in report["checks"]}
    assert sizes == {row.split()[2] for row in rows}


@pytest.mark.parametrize("name", sorted(RUNS))
@pytest.mark.parametrize("order", [("-q", "-v"), ("-v", "--quiet"), ("--verbose", "-q")])
def test_quiet_with_verbose_is_one_usage_line(name: str, order: tuple[str, str]) -> None:
    command, args, devices = RUNS[name]
    # A device index no machine has is exit 3, but only once the options are all valid.
    proc = run_l0mem(command, [*args, order[0], "--device", "9999", order[1]], _env(devices))
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc, name)
    assert "-q/--quiet" in line and "-v/--verbose" in line
    assert proc.stdout == ""


def test_verbose_p2p_names_hung_skipped_and_corrupt_copies_in_full() -> None:
    m = Measurement((1_342_177, 1_300_000), 1 << 20, "device")
    result = P2PResult(
        backend="l0",
        devices=("a", "b"),
        simulated=False,
        sizes=(1 << 20,),
        reps=2,
        warmup=0,
        peers=(PeerInfo(0, 1, True, True, route="staged", route_reason="separate contexts"),),
        copies=(
            CopyTiming("same_device", 0, 0, 1 << 20, m),
            CopyTiming("direct", 0, 1, 1 << 20, skipped="separate contexts"),
            CopyTiming("staged", 0, 1, 1 << 20, skipped="hung", hung=True),
        ),
        checks=(CopyCheck(0, 1, "staged", 4097, 1, 3, 0, mismatches=12, first_mismatch=1024),),
        environment={},
    )
    out = io.StringIO()
    render_p2p(result, Console(file=out, width=80, color_system=None))
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80
    text = " ".join(out.getvalue().split())  # a cell's text wraps between words
    assert "1,342.177 1,300.000" in text
    assert "not measured: separate contexts" in text and "not measured: hung" in text
    assert "CORRUPT: 12 bytes wrong, first at offset 1,024" in text
    assert "4,097" in text and "1/3" in text
    assert "no variable that changes driver behaviour" in text
