"""``l0mem allreduce`` end to end through ``python -m l0mem``: simulator, SYCL CPU sub-devices, errors."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from l0mem.bench.allreduce import _check
from l0mem.files import write_json
from tests.support import sim
from tests.support.cli import (
    no_driver_env,
    one_line,
    run_json,
    run_json_on_sycl_cpu_pair,
    run_l0mem,
)


def _cli(args, env):
    return run_l0mem("allreduce", args, env)


def _check_report(data, n_dev, nbytes, threshold):
    """Check a report of a run with ``--sizes`` ``nbytes`` (bytes per device buffer)."""
    sizes = [n // 4 for n in nbytes]
    assert data["schema"] == "l0mem.allreduce/1"
    assert len(data["devices"]) == n_dev and data["threshold"] == threshold
    assert data["ok"] is True
    rows = {(r["nelem"], r["path"]): r for r in data["results"]}
    assert set(rows) == {(n, p) for n in sizes for p in ("f32", "bf16")}
    for (nelem, path), r in rows.items():
        assert r["nbytes"] == 4 * nelem
        # The threshold counts elements, whatever unit --sizes has.
        assert r["auto"] == ((nelem < threshold) == (path == "f32"))
        assert r["within_bound"] and r["identical"]
        assert 0 <= r["max_error_to_bound"] <= 1
        t = r["time_ns"]
        assert len(t["samples"]) == data["reps"]
        assert t["min"] == min(t["samples"]) and t["max"] == max(t["samples"])
        assert t["min"] <= t["median"] <= t["max"]
        assert t["spread"] == pytest.approx((t["max"] - t["min"]) / t["median"])
        assert sum(r["bytes_crossed"].values()) == r["total_bytes_crossed"] > 0
        assert r["wire_gbps"] == pytest.approx(r["total_bytes_crossed"] / t["median"])
        bus = r["nbytes"] / t["median"] * 2 * (n_dev - 1) / n_dev
        assert r["busbw_gbps"] == pytest.approx(bus) and bus > 0
        assert r["critical_path_ns"] > 0
        assert r["time_to_critical_path"] == pytest.approx(t["median"] / r["critical_path_ns"])
    for nelem in sizes:
        f32, bf16 = rows[(nelem, "f32")], rows[(nelem, "bf16")]
        assert 2 * bf16["total_bytes_crossed"] == f32["total_bytes_crossed"]
        # The BF16 error must show that compression happened.
        assert bf16["max_abs_error"] > f32["max_abs_error"]
    return rows


@pytest.mark.parametrize("n_dev", [2, 3, 4])
def test_simulator(tmp_path, n_dev):
    out = tmp_path / "ar.json"
    sizes = [28, 400, 4004]  # 7, 100 and 1001 elements
    proc, data = run_json(
        "allreduce",
        ["--sizes", ",".join(map(str, sizes)), "--threshold", "100", "--reps", "2"],
        sim.sim_env(devices=n_dev),
        out,
    )
    assert "simulator" in proc.stdout
    assert data["simulated"] is True and data["backend"] == "l0"
    rows = _check_report(data, n_dev, sizes, 100)
    assert {r["algorithm"] for r in rows.values()} == {"pair" if n_dev == 2 else "ring"}
    assert set(data["routes"].values()) == {"direct"}


def test_simulator_without_peers_stages(tmp_path):
    out = tmp_path / "ar.json"
    _, data = run_json(
        "allreduce",
        ["--sizes", "256", "--threshold", "32", "--reps", "1"],
        sim.sim_env(devices=3, peers="none"),
        out,
    )
    assert set(data["routes"].values()) == {"staged"}
    for r in data["results"]:
        assert r["staged_copies"] == r["copies"] > 0


def test_simulator_device_count(tmp_path):
    out = tmp_path / "ar.json"
    proc, data = run_json(
        "allreduce", ["--count", "2", "--sizes", "40", "--reps", "1"], sim.sim_env(devices=4), out
    )
    assert len(data["devices"]) == 2
    assert {(r["nelem"], r["nbytes"]) for r in data["results"]} == {(10, 40)}
    assert proc.stderr == ""


def test_old_devices_option_still_counts_with_a_deprecation_notice(tmp_path):
    out = tmp_path / "ar.json"
    proc, data = run_json(
        "allreduce", ["--devices", "3", "--sizes", "40", "--reps", "1"], sim.sim_env(devices=4), out
    )
    assert [d["index"] for d in data["devices"]] == [0, 1, 2]
    assert proc.stderr == "l0mem allreduce: --devices N is deprecated: use --count N\n"
    help_text = run_l0mem("allreduce", ["--help"], dict(os.environ), columns=200).stdout
    assert "--count N" in help_text and "--devices" not in help_text


def test_count_and_old_devices_that_disagree_are_a_usage_error():
    proc = _cli(["--count", "2", "--devices", "3", "--sizes", "40"], sim.sim_env(devices=4))
    assert proc.returncode == 2, proc.stderr
    assert "--devices is the old name of --count: give one of them" in proc.stderr


@pytest.mark.sycl
def test_sycl_cpu_sub_devices(tmp_path):
    out = tmp_path / "ar.json"
    sizes = [132, 2048]  # 33 and 512 elements
    data = run_json_on_sycl_cpu_pair(
        "allreduce", ["--sizes", "132,2K", "--threshold", "512", "--reps", "2"], out
    )
    assert data["backend"] == "sycl" and data["simulated"] is False
    _check_report(data, 2, sizes, 512)
    assert set(data["routes"].values()) == {"staged"}


@pytest.mark.parametrize(
    ("args", "devices", "code", "needle"),
    [
        (["--count", "5"], 2, 3, "needs 5 devices, 2 available"),
        (["--devices", "5"], 2, 3, "needs 5 devices, 2 available"),
        ([], 1, 3, "needs 2 devices, 1 available"),
        (["--threshold", "-1"], 2, 2, "--threshold"),
        (["--sizes", "1,,x"], 2, 2, "bad size"),
        (["--sizes", "4K,10"], 2, 2, "10 bytes is not a whole number of FP32 elements"),
        (["--sizes", "2"], 2, 2, "2 bytes is not a whole number of FP32 elements"),
    ],
)
def test_errors(args, devices, code, needle):
    proc = _cli([*args, "--reps", "1"], sim.sim_env(devices=devices))
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr


def test_no_driver_is_exit_3():
    proc = _cli(["--sizes", "32"], no_driver_env())
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1


def test_too_few_devices_hint_names_sub_devices_only_for_sycl():
    proc = _cli(["--backend", "l0", "--sizes", "32"], sim.sim_env(devices=1))
    assert proc.returncode == 3
    assert one_line(proc, "allreduce").endswith("needs 2 devices, 1 available")


@pytest.mark.sycl
def test_auto_that_resolves_to_sycl_gets_the_sub_devices_hint():
    # No Level Zero device: auto opens SYCL's one CPU device, which --sub-devices could split.
    proc = _cli(["--sizes", "32", "--device", "opencl:cpu"], no_driver_env())
    assert proc.returncode == 3, proc.stderr
    assert one_line(proc, "allreduce").endswith(
        "needs 2 devices, 1 available (SYCL: try --sub-devices 2)"
    )


def test_unwritable_json_is_exit_4_before_measuring(tmp_path):
    target = tmp_path / "missing" / "ar.json"
    proc = _cli(["--sizes", "32", "--reps", "1", "--json", str(target)], sim.sim_env(devices=2))
    assert proc.returncode == 4
    assert one_line(proc, "allreduce") == (
        f"l0mem allreduce: {target}: cannot write (no such directory)"
    )
    assert proc.stdout == "", "the path is checked before anything is measured"


@pytest.mark.parametrize("lost_at", [40, 120, 400])
def test_lost_device_is_one_line_naming_the_failure(lost_at):
    proc = _cli(
        ["--sizes", "400,4000", "--threshold", "500", "--reps", "2"],
        sim.sim_env(devices=3, device_lost_at=lost_at),
    )
    assert proc.returncode == 6, proc.stderr
    line = one_line(proc, "allreduce")
    assert "DEVICE_LOST" in line and "ReleaseWarning" not in proc.stderr
    routine = re.search(r"\b(ze[A-Za-z0-9]+): ZE_RESULT", line)
    assert routine is not None, line
    assert not re.search(r"Destroy|MemFree", routine.group(1)), line


def test_table_keeps_full_numbers_at_80_columns(tmp_path):
    out = tmp_path / "ar.json"
    proc = run_l0mem(
        "allreduce",
        ["--sizes", "3996,4194308", "--reps", "1", "--json", str(out)],
        sim.sim_env(devices=2),
        columns=80,
    )
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and "..." not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    rows = json.loads(out.read_text())["results"]
    lines = proc.stdout.splitlines()
    for r in rows:
        cells = [
            f"{r['nelem']:,}",
            f"{r['busbw_gbps']:.2f}",
            f"{r['max_abs_error']:.2g}",
            f"{r['max_error_to_bound']:.3f}",
        ]
        # Every number of a result sits whole on one table line.
        assert any(all(c in line for c in cells) for line in lines), cells


@pytest.mark.parametrize(
    ("size", "config", "code", "needle"),
    [
        ("99999G", {}, 3, "which has 8.0 GiB of memory"),
        ("4G", {"device_memory": "64T"}, 3, "of host memory"),
    ],
)
def test_sizes_beyond_memory(size, config, code, needle):
    proc = _cli(["--sizes", size, "--reps", "1"], sim.sim_env(devices=2, **config))
    assert proc.returncode == code, proc.stderr
    line = one_line(proc, "allreduce")
    assert needle in line and "out of device memory" not in line


def test_non_finite_numbers_are_written_as_null(tmp_path):
    np = pytest.importorskip("numpy")
    # A zero bound with a non-zero error makes the error/bound ratio infinite.
    xs = [np.zeros(4, np.float32), np.zeros(4, np.float32)]
    outs = [np.array([0, 1, np.nan, 0], np.float32)] * 2
    check = _check(np, xs, outs, "f32")
    assert math.isinf(check["max_error_to_bound"]) and math.isnan(check["max_abs_error"])
    path = tmp_path / "ar.json"
    write_json(path, {"check": check, "list": [float("nan"), 1.5, float("-inf")]})
    text = path.read_text()
    assert "Infinity" not in text and "NaN" not in text

    def reject(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(text, parse_constant=reject)
    assert data["list"] == [None, 1.5, None]
    assert data["check"]["max_error_to_bound"] is None and data["check"]["max_abs_error"] is None
    assert data["check"]["within_bound"] is False


@pytest.mark.sycl
def test_too_many_sub_devices_is_exit_3():
    proc = run_l0mem("allreduce", ["--backend", "sycl", "--sub-devices", "4096"], dict(os.environ))
    assert proc.returncode == 3, proc.stderr
    assert "compute units" in one_line(proc, "allreduce")


def test_sizes_not_a_multiple_of_4_is_one_usage_line_before_any_device():
    # No driver at all: the size is refused before a backend is opened.
    proc = _cli(["--sizes", "1K,1001"], no_driver_env())
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "1,001 bytes" in line]
    assert errors == [
        "Error: Invalid value for --sizes: 1,001 bytes is not a whole number of FP32 "
        "elements (a positive multiple of 4)"
    ], proc.stderr


def test_sizes_are_bytes_per_buffer_and_the_default_is_the_old_element_sweep():
    from l0mem.bench.allreduce import fp32_elements
    from l0mem.cli.allreduce import allreduce
    from l0mem.units import parse_sizes

    options = {p.name: p for p in allreduce.params}
    default = parse_sizes(str(options["sizes"].default))
    assert [fp32_elements(n) for n in default] == [4 << 10, 32 << 10, 1 << 20, 16 << 20]
    assert "bytes" in (options["sizes"].help or "").lower()
    assert "element" in (options["threshold"].help or "").lower()
    assert fp32_elements(4) == 1 and fp32_elements(64 << 20) == 16 << 20
    for bad in (0, 1, 2, 6, 4097):
        with pytest.raises(ValueError, match="multiple of 4"):
            fp32_elements(bad)


def test_help_says_sizes_are_bytes_and_threshold_is_elements():
    proc = run_l0mem("allreduce", ["--help"], dict(os.environ), columns=200)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Bytes per device buffer" in text and "16K,128K,4M,64M" in text
    assert "FP32 element count (not bytes)" in text


# Simulator faults that come in the second size of ``--sizes 400,4000`` (found by
# counting: the first size finishes before them).
LOST_IN_SECOND_SIZE = 260
HANG_IN_SECOND_SIZE = "9"


@pytest.mark.parametrize("later", ["lost", "hang"])
def test_a_failure_in_a_later_size_keeps_the_sizes_that_finished(tmp_path, later):
    # The first size finishes; the second hangs or loses its device. The report and
    # the table hold the first, marked incomplete; the exit code is the failure's.
    out = tmp_path / "ar.json"
    args = ["--sizes", "400,4000", "--reps", "1", "--warmup", "0", "--json", str(out)]
    clean = _cli(args, sim.sim_env(devices=2))
    assert clean.returncode == 0, clean.stderr
    whole = [(r["nbytes"], r["path"]) for r in json.loads(out.read_text())["results"]]
    assert {n for n, _ in whole} == {400, 4000}
    out.unlink()
    if later == "lost":
        env, code = sim.sim_env(devices=2, device_lost_at=LOST_IN_SECOND_SIZE), 6
    else:
        env, code = {**sim.sim_env(devices=2, hang_copy_at=HANG_IN_SECOND_SIZE)}, 1
        args += ["--hang-after", "2"]
    proc = _cli(args, env)
    assert proc.returncode == code, proc.stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False
    kept = [(r["nbytes"], r["path"]) for r in data["results"]]
    # What finished before the failure: a part of the run, in its order, of the first size only.
    assert kept and kept == whole[: len(kept)] and len(kept) < len(whole), kept
    assert {n for n, _ in kept} == {400}
    assert "what finished before it was kept" in proc.stderr
    assert any(line.split()[:1] == ["100"] for line in proc.stdout.splitlines()), proc.stdout


# Every header of the table, as the table prints it (its lines) and as a stacked row names it.
ALLREDUCE_HEADERS = (
    "elements",
    "path",
    "time ms",
    "spread",
    "vs path",
    "crossed",
    "bus GB/s",
    "max error",
    "err/ bound",
    "same bits",
)


def _table_values(row):
    """Return every number a table row of ``row`` (a report's result) shows, as it shows it."""
    from l0mem.cli.allreduce import _ms
    from l0mem.units import format_bytes

    t = row["time_ns"]
    return [
        f"{row['nelem']:,}",
        _ms(t["median"]),
        f"{t['spread']:.0%}",
        f"{row['time_to_critical_path']:.2f}",
        format_bytes(row["total_bytes_crossed"], digits=1),
        f"{row['busbw_gbps']:.2f}",
        f"{row['max_abs_error']:.2g}",
        f"{row['max_error_to_bound']:.3f}",
    ]


def _header_whole(table, header):
    """Return whether ``header`` is whole in ``table``: each word a word of it, or stacked as a label."""
    words = {w.rstrip(":") for w in table.split()}
    label = header.replace("/ ", "/")
    return all(w in words for w in header.split()) or f"{label}:" in table


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_the_answer_comes_first_and_every_number_is_whole(tmp_path, columns):
    # The default sizes: their crossed bytes (128.0 MiB), max errors (2.4e-07) and the
    # headers ("same bits") were cut at 80 columns (2.4e-0, 128.0 Mi, sam/bit).
    from l0mem.cli.allreduce import _ms
    from tests.support.widths import assert_whole_at

    out = tmp_path / "ar.json"
    args = ["--backend", "l0", "--reps", "2", "--warmup", "0"]
    proc = run_l0mem("allreduce", [*args, "--json", str(out)], sim.sim_env(devices=2), columns=columns)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    text = proc.stdout
    said = " ".join(text.split("\n\n", 1)[0].split())  # the answer, its lines joined
    assert said.startswith("[SIMULATOR] Every sum within its error bound and the same on every device")
    top = max(r["nelem"] for r in data["results"])
    at = {r["path"]: r for r in data["results"] if r["nelem"] == top}
    picked = next(p for p, r in at.items() if r["auto"])
    assert f"At {top:,} elements: bf16 {_ms(at['bf16']['time_ns']['median'])} ms" in said
    assert f"f32 {_ms(at['f32']['time_ns']['median'])} ms" in said
    assert said.endswith(f"the threshold picks {picked}")
    assert {r["nelem"] for r in data["results"]} == {4096, 32768, 1 << 20, 16 << 20}
    # The table alone: after the devices' line, before the legend (which names the headers too).
    table = text.split("\n\n", 1)[1].split("\nms: median time")[0]
    table = table.split("threshold ", 1)[1]
    values = [v for r in data["results"] for v in _table_values(r)]
    assert_whole_at(table, columns, values)
    cut = [h for h in ALLREDUCE_HEADERS if not _header_whole(table, h)]
    assert not cut, f"headers cut at {columns} columns: {cut}\n{table}"


# "the bf16 all-reduce of 4,096 elements (16 KiB per device) over devices 0,1 hung in call 2 of
# 3 (1 untimed, then 2 timed): an operation did not complete within 0.2 s (a hang)"
HUNG_LINE = re.compile(
    r"^l0mem allreduce: the (?P<path>f32|bf16) all-reduce of 4,096 elements \(16 KiB per device\) "
    r"over devices 0,1 hung in (?P<where>its first call, whose sums are checked|call [1-3] of 3 "
    r"\(1 untimed, then 2 timed\)|timing each copy and kernel of its schedule alone): "
    r"an operation did not complete within 0\.2 s \(a hang\)$"
)


def test_a_hung_call_s_line_names_the_path_the_size_and_where_it_hung():
    # Peer copies 1, 3, 7, 9 hang in the f32 path's first call, its first and last
    # timed calls and its steps timed alone; 15 and 17 in the bf16 path's.
    seen = set()
    for copy in (1, 3, 7, 9, 15, 17):
        env = sim.sim_env(devices=2, hang_copy_at=copy)
        args = ["-q", "--sizes", "16K", "--reps", "2", "--warmup", "1", "--hang-after", "0.2"]
        proc = _cli(args, env)
        assert proc.returncode == 1, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        found = HUNG_LINE.match(line)
        assert found is not None, line
        seen.add((found["path"], found["where"].split(" ")[0]))
    assert seen == {(p, w) for p in ("f32", "bf16") for w in ("its", "call", "timing")} - {
        ("bf16", "timing")
    }, seen
