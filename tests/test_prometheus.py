"""``--prometheus``: node-exporter's textfile format, parsed by the Prometheus client's own parser."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from l0mem.cli.prometheus import Metrics
from tests.support import sim
from tests.support.cli import REPO_ROOT, run_l0mem
from tests.support.jobs import peer_resident_job
from tests.support.own_memory import host_env

MIB = 1 << 20
NAME = re.compile(r"^l0mem_[a-z0-9_]+_(bytes|seconds|ratio|info|complete|samples|running)$")
EXAMPLES = REPO_ROOT / "examples" / "monitoring"


def _parse(path: Path) -> dict[str, list[Any]]:
    families = text_string_to_metric_families(path.read_text())
    return {f.name: list(f.samples) for f in families}


def _check_names(metrics: dict[str, list[Any]]) -> None:
    # Well formed, and each one in the monitoring guide's table of metrics.
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "monitoring.md").read_text()
    rows = "\n".join(line for line in guide.splitlines() if line.startswith("| `l0mem_"))
    documented = set(re.findall(r"`(l0mem_[a-z0-9_]+)`", rows))
    for name in metrics:
        assert NAME.match(name), name
        assert name in documented, f"{name} is not in docs/guide/monitoring.md"


def test_labels_and_values_survive_the_parser() -> None:
    m = Metrics()
    m.add(
        "l0mem_x_bytes", "A help text\nwith a newline and a \\ backslash.", 3 * MIB, a='q"u\\o\nte'
    )
    m.add("l0mem_x_bytes", "ignored", float("nan"), a="nan is left out")
    m.add("l0mem_y_ratio", "Ratio.", 0.25)
    (x, y) = list(text_string_to_metric_families(m.text()))
    assert x.name == "l0mem_x_bytes" and x.type == "gauge"
    # Quote and backslash escaped by the client; the newline shown as its code, as the terminal does.
    assert [(s.labels, s.value) for s in x.samples] == [({"a": 'q"u\\o\\x0ate'}, 3 * MIB)]
    assert [s.value for s in y.samples] == [0.25]


def test_audit_writes_verdicts_and_ratios(tmp_path: Path) -> None:
    out = tmp_path / "l0mem.prom"
    args = ["--setups", "l0,l0-peer-resident", "--size", "256MiB", "--steps", "4", "--settle", "0"]
    proc = run_l0mem(
        "audit",
        [*args, "--prometheus", str(out), "--label", "workload=box-7", "--label", "team="],
        host_env(sim.sim_env(mirror="peer-resident")),
    )
    assert proc.returncode == 0, proc.stderr
    metrics = _parse(out)
    _check_names(metrics)
    # The user's labels on every sample; the device each set-up allocated on.
    for samples in metrics.values():
        assert all(s.labels["workload"] == "box-7" and s.labels["team"] == "" for s in samples)
    assert {s.labels["device"] for s in metrics["l0mem_audit_verdict_info"]} == {"0"}
    verdicts = {s.labels["setup"]: s.labels["verdict"] for s in metrics["l0mem_audit_verdict_info"]}
    assert verdicts == {"l0": "clean", "l0-peer-resident": "mirror"}
    ratios = {s.labels["setup"]: s.value for s in metrics["l0mem_audit_host_per_device_ratio"]}
    assert abs(ratios["l0-peer-resident"] - 1.0) < 0.1 and abs(ratios["l0"]) < 0.1
    assert all(s.labels["platform"] == "simulator" for s in metrics["l0mem_audit_verdict_info"])
    assert metrics["l0mem_audit_complete"][0].value == 1
    # The example alert rules use only names l0mem writes.
    used = set(re.findall(r"\bl0mem_[a-z0-9_]+", (EXAMPLES / "alerts.yml").read_text()))
    audit_names = {n for n in used if n.startswith("l0mem_audit_")}
    assert audit_names and audit_names <= set(metrics)


def test_run_writes_the_workloads_metrics(tmp_path: Path) -> None:
    out = tmp_path / "job.prom"
    job, env = peer_resident_job()
    opts = ["--quiet", "--trace", "--interval", "0.05", "--prometheus", str(out)]
    proc = run_l0mem("run", [*opts, "--label", "workload=job-a", "--", *job], env)
    assert proc.returncode == 0, proc.stderr
    metrics = _parse(out)
    _check_names(metrics)
    for samples in metrics.values():
        assert all(s.labels["workload"] == "job-a" for s in samples)
    # The file written at the end says so: a collector that keeps reading it sees a finished run.
    assert [s.value for s in metrics["l0mem_watch_running"]] == [0]
    (verdict,) = metrics["l0mem_watch_verdict_info"]
    assert (
        verdict.labels["mode"] == "run" and verdict.labels["command"] == Path(sys.executable).name
    )
    assert verdict.labels["verdict"] == "mirror"
    assert metrics["l0mem_watch_host_cost_peak_bytes"][0].value >= 4 * 32 * MIB
    assert metrics["l0mem_watch_samples"][0].value >= 5
    used = set(re.findall(r"\bl0mem_watch_[a-z0-9_]+", (EXAMPLES / "alerts.yml").read_text()))
    assert used and used <= set(metrics)
    # The example alert fires only while a job runs: the final file stays behind.
    exprs = re.findall(r"^\s*expr: (.*)$", (EXAMPLES / "alerts.yml").read_text(), re.M)
    (watched,) = [e for e in exprs if "l0mem_watch_" in e]
    assert watched.endswith("and l0mem_watch_running == 1")


def test_a_directory_is_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = run_l0mem("run", ["--prometheus", str(tmp_path), "--", "true"], dict(os.environ))
    assert proc.returncode == 4 and "cannot write (is a directory)" in proc.stderr, proc.stderr


def test_watch_metrics_carry_vram_and_gtt_per_drm_device() -> None:
    from l0mem.cli.prometheus import watch_metrics
    from l0mem.watch.summary import summarize
    from tests.support.watch_series import PDEV as pdev
    from tests.support.watch_series import climbing_series

    gib = 1 << 30
    series = climbing_series()
    text = watch_metrics(series, summarize(series), {"mode": "watch", "pid": "7"}, now=1.0).text()
    metrics = {f.name: list(f.samples) for f in text_string_to_metric_families(text)}
    _check_names(metrics)
    (vram,) = metrics["l0mem_watch_drm_vram_bytes"]
    (gtt,) = metrics["l0mem_watch_drm_gtt_bytes"]
    assert vram.labels == {"mode": "watch", "pid": "7", "pdev": pdev} and vram.value == 5 * gib
    assert gtt.value == 5 * gib // 2
    assert metrics["l0mem_watch_host_cost_bytes"][0].value == 5 * gib
    assert metrics["l0mem_watch_timestamp_seconds"][0].value == 1.0


@pytest.mark.parametrize(
    ("source", "values", "expected"),
    [
        (
            "trace",
            {"trace.0.allocated": 3, "trace.1.allocated": 5, "trace.1.resident_on_peers": 9},
            {"0": 3, "1": 5},
        ),
        ("sysman", {"sysman.0.used": 7, "sysman.2.used": 11}, {"0": 7, "2": 11}),
        (
            "drm",
            {
                "drm.0000:10:00.0.vram0.total": 4,
                "drm.0000:10:00.0.gtt.total": 100,
                "drm.0000:20:00.0.vram0.total": 6,
            },
            {"0000:10:00.0": 4, "0000:20:00.0": 6},
        ),
    ],
)
def test_watch_metrics_give_device_memory_per_device(
    source: str, values: dict[str, int], expected: dict[str, int]
) -> None:
    from l0mem.cli.prometheus import watch_metrics
    from l0mem.watch.series import Series, WatchSample
    from l0mem.watch.summary import summarize

    base = {"host.available": 1 << 34, **dict.fromkeys(values, 0)}
    sample = WatchSample(0.5, {"host.available": 1 << 34, **values}, pids=1)
    series = Series(WatchSample(0.0, base), (sample,), {}, tracing=source == "trace")
    assert series.device_source == source
    text = watch_metrics(series, summarize(series), {"mode": "watch", "pid": "7"}, now=1.0).text()
    metrics = {f.name: list(f.samples) for f in text_string_to_metric_families(text)}
    held = {s.labels["device"]: s.value for s in metrics["l0mem_watch_device_memory_bytes"]}
    assert held == expected
    assert all(s.labels["pid"] == "7" for s in metrics["l0mem_watch_device_memory_bytes"])


@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("novalue", "expected KEY=VALUE"),
        ("=x", "expected KEY=VALUE"),
        ("9lives=x", "expected KEY=VALUE"),
        ("has-dash=x", "expected KEY=VALUE"),
        ("__name__=x", "expected KEY=VALUE"),
        ("ünï=x", "expected KEY=VALUE"),
        ("mode=x", "a label of l0mem's own metrics"),
        ("verdict=x", "a label of l0mem's own metrics"),
    ],
)
@pytest.mark.parametrize("command", ["run", "watch", "audit"])
def test_a_bad_label_is_a_usage_error_before_anything_runs(
    command: str, label: str, why: str
) -> None:
    args = {"run": ["--", "true"], "watch": ["--pid", "1"], "audit": ["--setups", "l0"]}[command]
    proc = run_l0mem(command, ["--label", label, *args], dict(os.environ))
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr


def test_a_label_given_twice_is_a_usage_error() -> None:
    proc = run_l0mem("run", ["--label", "a=1", "--label", "a=2", "--", "true"], dict(os.environ))
    assert proc.returncode == 2 and "given twice" in proc.stderr, proc.stderr


def test_a_value_prometheus_must_escape_survives_the_file(tmp_path: Path) -> None:
    out = tmp_path / "w.prom"
    proc = run_l0mem(
        "run",
        ["--quiet", "--prometheus", str(out), "--label", 'note=a "b" \\ c\nd', "--", "true"],
        dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    metrics = _parse(out)
    # The newline is a control character: shown as its code, as the terminal shows it.
    assert metrics and all(
        s.labels["note"] == 'a "b" \\ c\\x0ad' for samples in metrics.values() for s in samples
    )


CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]]


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: f"{ord(c):02x}")
def test_a_control_character_in_a_label_value_is_shown_never_written(control: str) -> None:
    from l0mem.text import printable

    m = Metrics()
    value = f"sl{control}[31mep{control}"
    m.add("l0mem_x_bytes", "X.", 1.0, command=value, note=f"{control}a")
    text = m.text()
    assert not any(c in text for c in CONTROLS if c != "\n")
    assert text.count("\n") == 3  # HELP, TYPE and the sample: no line of a label's
    ((sample,),) = [list(f.samples) for f in text_string_to_metric_families(text)]
    assert sample.labels == {"command": printable(value), "note": printable(f"{control}a")}


def test_run_shows_a_command_named_with_an_escape_sequence(tmp_path: Path) -> None:
    command = tmp_path / "sl\x1b[31mep"
    shutil.copy("/bin/true", command)
    out = tmp_path / "r.prom"
    proc = run_l0mem(
        "run",
        ["--quiet", "--prometheus", str(out), "--label", "note=\x9b2J\r", "--", str(command)],
        dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "\x1b" not in text and "\x9b" not in text and "\r" not in text
    assert 'command="sl\\\\x1b[31mep"' in text  # the client escapes the backslash
    for samples in _parse(out).values():
        for s in samples:
            assert s.labels["command"] == "sl\\x1b[31mep" and s.labels["note"] == "\\x9b2J\\x0d"
