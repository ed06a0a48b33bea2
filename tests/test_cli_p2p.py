"""``l0mem p2p`` end to end through ``python -m l0mem``: simulator, SYCL CPU sub-devices, errors."""

from __future__ import annotations

import io
import json
import os
import re
import time

import pytest
from rich.console import Console

from tests.support import sim
from tests.support.cli import (
    no_driver_env,
    one_line,
    run_json,
    run_json_on_sycl_cpu_pair,
    run_l0mem,
    skip_if_too_few_compute_units,
)


def _cli(args, env):
    return run_l0mem("p2p", args, env)


def test_simulator_three_devices_partial_peers(tmp_path):
    out = tmp_path / "p2p.json"
    proc, data = run_json(
        "p2p",
        ["--sizes", "4K,64K", "--reps", "3", "--warmup", "1"],
        sim.sim_env(devices=3, peers="0>1,1>0"),
        out,
    )
    assert "simulator" in proc.stdout
    assert data["schema"] == "l0mem.p2p/1.1" and data["backend"] == "l0" and data["simulated"]
    assert [d["index"] for d in data["devices"]] == [0, 1, 2]
    assert data["sizes"] == [4096, 65536] and data["reps"] == 3
    access = {(p["src"], p["dst"]): p["can_access"] for p in data["peers"]}
    assert access == {
        (s, d): (s, d) in {(0, 1), (1, 0)} for s in range(3) for d in range(3) if s != d
    }
    copies = {(c["kind"], c["src"], c["dst"], c["nbytes"]): c for c in data["copies"]}
    # Per size: same device, to and from pinned host memory per device; direct, staged and
    # both legs at once per pair.
    assert len(copies) == 2 * (3 * 3 + 6 * 3)
    for (kind, s, d, _), c in copies.items():
        if kind == "direct" and {s, d} != {0, 1}:
            assert c["skipped"] == "no peer access" and c["gbps"] is None
            assert c["samples_ns"] == [] and c["median_ns"] is None and c["spread"] is None
            continue
        assert c["skipped"] is None and len(c["samples_ns"]) == 3
        assert c["min_ns"] <= c["median_ns"] <= c["max_ns"]
        assert c["gbps_min"] <= c["gbps"] <= c["gbps_max"]
        assert c["gbps"] == pytest.approx(c["nbytes"] / c["median_ns"])
        assert c["gbps_min"] == pytest.approx(c["nbytes"] / c["max_ns"])
        assert c["spread"] == pytest.approx((c["max_ns"] - c["min_ns"]) / c["median_ns"])
    assert not list(tmp_path.glob(".p2p.json.*"))  # no temporary file left behind


def test_simulator_device_selection():
    proc = _cli(
        ["--device", "1", "--device", "0", "--sizes", "4K", "--reps", "1"], sim.sim_env(devices=3)
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulated GPU 2" not in proc.stdout and "1>0" in proc.stdout


@pytest.mark.sycl
def test_sycl_cpu_sub_devices(tmp_path):
    out = tmp_path / "p2p.json"
    data = run_json_on_sycl_cpu_pair("p2p", ["--sizes", "64K", "--reps", "2"], out)
    assert data["backend"] == "sycl" and not data["simulated"]
    assert any("CPU" in n for n in data["notes"])
    kinds = {(c["kind"], c["src"], c["dst"]): c for c in data["copies"]}
    assert kinds[("direct", 0, 1)]["skipped"] and kinds[("direct", 1, 0)]["skipped"]
    for key in (("same_device", 0, 0), ("staged", 0, 1), ("staged", 1, 0)):
        assert kinds[key]["skipped"] is None and kinds[key]["gbps"] > 0


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--sizes", "12X"], 2, "bad size"),
        (["--sizes", "4K", "--device", "7"], 3, "no Level Zero device 7"),
        (["--backend", "l0", "--sizes", "4K", "--device", "x"], 2, "device index"),
        (["--sizes", "4K", "--device", "x"], 2, "bad SYCL device filter"),
        (["--sizes", "4K", "--backend", "l0", "--sub-devices", "2"], 2, "SYCL backend only"),
        (["--reps", "0"], 2, "--reps"),
    ],
)
def test_bad_options(args, code, needle):
    proc = _cli(args, sim.sim_env(devices=2))
    assert proc.returncode == code
    assert needle in proc.stderr


def test_no_driver_is_exit_3():
    proc = _cli(["--backend", "l0", "--sizes", "4K"], no_driver_env())
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l0mem p2p:")


def test_unwritable_json_is_exit_4_before_measuring(tmp_path):
    target = tmp_path / "missing" / "p2p.json"
    proc = _cli(["--sizes", "4K", "--reps", "1", "--json", str(target)], sim.sim_env(devices=2))
    assert proc.returncode == 4
    assert one_line(proc, "p2p") == f"l0mem p2p: {target}: cannot write (no such directory)"
    assert proc.stdout == "", "the path is checked before anything is measured"
    assert not target.exists()


@pytest.mark.parametrize("lost_at", [30, 60, 120])
def test_lost_device_is_one_line_naming_the_failure(lost_at):
    proc = _cli(
        ["--sizes", "4K,64K", "--reps", "2"], sim.sim_env(devices=2, device_lost_at=lost_at)
    )
    assert proc.returncode == 6, proc.stderr
    line = one_line(proc, "p2p")
    assert "DEVICE_LOST" in line and "ReleaseWarning" not in proc.stderr
    # The first failing call, not a release made while cleaning up after it.
    routine = re.search(r"\b(ze[A-Za-z0-9]+): ZE_RESULT", line)
    assert routine is not None, line
    assert not re.search(r"Destroy|MemFree", routine.group(1)), line


@pytest.mark.sycl
def test_too_many_sub_devices_is_exit_3():
    proc = run_l0mem("p2p", ["--backend", "sycl", "--sub-devices", "4096"], dict(os.environ))
    assert proc.returncode == 3, proc.stderr
    assert "compute units" in one_line(proc, "p2p")


@pytest.mark.parametrize("columns", [80, 120])
def test_table_keeps_full_numbers_at_80_and_120_columns(tmp_path, columns):
    out = tmp_path / "p2p.json"
    proc = run_l0mem(
        "p2p",
        ["--sizes", "4K,1M", "--reps", "2", "--json", str(out)],
        sim.sim_env(devices=3, peers="0>1,1>0"),
        columns=columns,
    )
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and "..." not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= columns
    copies = json.loads(out.read_text())["copies"]
    measured = [c for c in copies if not c["skipped"]]
    assert len(measured) == 2 * (3 * 3 + 6 * 3) - 2 * 4
    for c in measured:
        text = f"{c['gbps']:.2f}"
        assert text in proc.stdout, text
        if c["kind"] not in ("download", "upload", "legs"):  # medians, in the staging table
            assert f"({c['gbps_min']:.2f}-{c['gbps_max']:.2f})" in proc.stdout


def test_staged_copies_are_host_timed(tmp_path):
    out = tmp_path / "p2p.json"
    _, data = run_json(
        "p2p", ["--sizes", "4K", "--reps", "2", "--warmup", "0"], sim.sim_env(devices=2), out
    )
    timing = {c["kind"]: c["timing"] for c in data["copies"]}
    assert timing == {
        "same_device": "device",
        "direct": "device",
        "staged": "host",
        "download": "host",
        "upload": "host",
        "legs": "host",
    }
    assert any("host clock" in n for n in data["notes"])


@pytest.mark.parametrize(
    ("config", "code", "needle"),
    [
        ({}, 3, "which has 8.0 GiB of memory"),
        ({"device_memory": "64T"}, 3, "of host memory"),
    ],
)
def test_sizes_beyond_memory(config, code, needle):
    size = "4000G" if "device_memory" in config else "99999G"
    proc = _cli(["--sizes", size, "--reps", "1"], sim.sim_env(devices=2, **config))
    assert proc.returncode == code, proc.stderr
    line = one_line(proc, "p2p")
    assert needle in line and "out of device memory" not in line


@pytest.mark.parametrize("columns", [80, 120])
def test_render_keeps_three_digit_bandwidths_whole_at_80_and_120_columns(columns):
    from l0mem.bench.copies import CopyTiming, PeerInfo
    from l0mem.bench.p2p import P2PResult
    from l0mem.bench.timing import Measurement
    from l0mem.cli.p2p_view import render

    n = 1 << 20
    fast = Measurement((7000, 8000, 9500), n, "device")  # 149.80, 131.07 and 110.38 GB/s
    copies = [
        CopyTiming("same_device", 0, 0, n, fast),
        CopyTiming("direct", 0, 1, n, fast),
        CopyTiming("staged", 0, 1, n, Measurement((70000, 80000, 95000), n, "host")),
        CopyTiming("direct", 1, 0, n, skipped="no peer access"),
        CopyTiming("download", 0, 0, n, Measurement((40000,), n, "host")),
        CopyTiming("upload", 1, 1, n, Measurement((50000,), n, "host")),
    ]
    result = P2PResult(
        backend="l0",
        devices=("a GPU with a rather long marketing name [level_zero:gpu:0]", "another GPU"),
        simulated=False,
        sizes=(n,),
        reps=3,
        warmup=0,
        peers=(PeerInfo(0, 1, True, True, 12345, "bytes/ns", 1000, "ns", "direct", "x"),),
        copies=tuple(copies),
    )
    out = io.StringIO()
    render(result, Console(file=out, width=columns))
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= columns
    for c in copies[:3]:
        m = c.measured
        assert m is not None
        assert f"{m.gbps:.2f}" in text and f"({m.gbps_min:.2f}-{m.gbps_max:.2f})" in text
    assert "n/a" in text
    # The staged copy (13.11 GB/s) against its slower leg, the upload (20.97 GB/s).
    ratio = f"{(n / 80000) / (n / 50000):.2f}"
    row = next(line for line in text.splitlines() if "0>1" in line and ratio in line)
    assert "13.11" in row and "26.21" in row and "20.97" in row


# ------------------------------------------------------------ copies checked


def test_corruption_exits_1_and_names_the_pair_route_and_offset(tmp_path):
    out = tmp_path / "p2p.json"
    proc = run_l0mem(
        "p2p",
        ["--sizes", "8K", "--reps", "1", "--warmup", "0", "--seed", "5", "--json", str(out)],
        sim.sim_env(devices=2, corrupt_offsets="4096"),
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    assert data["ok"] is False and data["seed"] == 5
    bad = [c for c in data["checks"] if not c["ok"]]
    # Only peer copies corrupt (the simulator's model), at the offset it was told.
    assert bad and {(c["src"], c["dst"], c["route"]) for c in bad} == {
        (0, 1, "direct"),
        (1, 0, "direct"),
    }
    assert all(c["first_mismatch"] == 4096 and c["mismatches"] == 1 for c in bad)
    assert (
        "FAILED 0>1 direct 8,192 bytes: 1 byte(s) wrong, the first at offset 4,096 (seed 5)"
        in proc.stdout
    )
    assert "CORRUPT" in proc.stdout
    assert all(c["ok"] for c in data["checks"] if c["route"] != "direct")


def test_a_hang_is_reported_within_its_bound_and_the_command_exits(tmp_path):
    out = tmp_path / "p2p.json"
    started = time.monotonic()
    proc = run_l0mem(
        "p2p",
        [
            "--sizes",
            "4K",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--hang-after",
            "0.5",
            "--json",
            str(out),
        ],
        sim.sim_env(devices=3, hang_copy_at="1"),
        timeout=60,
    )
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    hung = [c for c in data["copies"] if c["hung"]]
    assert [(c["src"], c["dst"], c["kind"]) for c in hung] == [(0, 1, "direct")]
    # Nothing more goes to the two devices behind the hang; device 2 is still checked.
    at = data["copies"].index(hung[0])
    later = [c for c in data["copies"][at + 1 :] + data["checks"] if {c["src"], c["dst"]} & {0, 1}]
    assert later and all("hung earlier (copy 0>1 direct)" in c["skipped"] for c in later)
    assert any(c["src"] == c["dst"] == 2 and c["ok"] for c in data["checks"])
    assert "did not complete (a hang, while timed)" in proc.stdout
    assert took < 30  # the watchdog's bound (0.5 s + 4 KiB at 50 MB/s), not a stalled command


def test_verify_only_checks_every_route_and_times_nothing(tmp_path):
    out = tmp_path / "p2p.json"
    proc = run_l0mem("p2p", ["--verify-only", "--json", str(out)], sim.sim_env(devices=2))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["verify_only"] is True and data["copies"] == [] and data["ok"] is True
    routes = {(c["src"], c["dst"], c["route"]) for c in data["checks"] if not c["skipped"]}
    assert routes == {
        (0, 0, "same_device"),
        (1, 1, "same_device"),
        (0, 1, "direct"),
        (1, 0, "direct"),
        (0, 1, "staged"),
        (1, 0, "staged"),
    }
    sizes = {c["nbytes"] for c in data["checks"]}
    assert {1, 4095, 4097, (2 << 20) - 1, (2 << 20) + 3} <= sizes
    assert "Copy bandwidth" not in proc.stdout and "Copies checked byte for byte" in proc.stdout
    assert any("4 GiB boundary" in n for n in data["notes"])


@pytest.mark.sycl
def test_sycl_sub_devices_are_checked_too(tmp_path):
    out = tmp_path / "p2p.json"
    proc = run_l0mem(
        "p2p",
        ["--backend", "sycl", "--sub-devices", "2", "--verify-only", "--json", str(out)],
        dict(os.environ),
    )
    skip_if_too_few_compute_units(proc)
    assert proc.returncode == 0, proc.stderr
    checks = json.loads(out.read_text())["checks"]
    made = [c for c in checks if not c["skipped"]]
    assert {c["route"] for c in made} == {"same_device", "staged"}
    assert all(c["ok"] and c["mismatches"] == 0 for c in made)


def test_allreduce_hang_is_one_line_and_exit_1():
    # Four devices, each waiting for the hung copy through the ring: they cost the
    # bound again each on the way out before (four bounds, 12 s here). The
    # in-process tests in test_integrity.py pin "not once more"; this, end to end,
    # that the command does not wait for each device.
    started = time.monotonic()
    proc = run_l0mem(
        "allreduce",
        ["--sizes", "4096", "--reps", "1", "--warmup", "0", "--hang-after", "3"],
        {**sim.sim_env(devices=4, hang_copy_at="1")},
        timeout=120,
    )
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert "within 3.0 s (a hang)" in one_line(proc, "allreduce")
    assert took < 9, f"{took:.1f} s: the bound (3 s) was waited for again"


@pytest.mark.parametrize("lost_at", [150, 300, 600, 2000, 5000])
def test_a_device_lost_after_copies_finished_keeps_them(tmp_path, lost_at):
    # Whatever call the loss meets, the copies and checks that finished before it are
    # written and shown (complete false), then the failure's line and exit 6.
    out = tmp_path / "p2p.json"
    proc = _cli(["--json", str(out)], sim.sim_env(devices=2, device_lost_at=lost_at))
    assert proc.returncode == 6, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("l0mem p2p:")]
    assert "DEVICE_LOST" in lines[-1], proc.stderr
    if not out.exists():
        # Nothing finished before the loss: only the failure's line.
        assert len(lines) == 1, proc.stderr
        return
    data = json.loads(out.read_text())
    assert data["complete"] is False and (data["copies"] or data["checks"])
    assert any(n.startswith("stopped by a failure:") for n in data["notes"]), data["notes"]
    assert lines[0] == "l0mem p2p: stopped by the failure below; what finished before it was kept"
    assert "copies" in proc.stdout or "copy" in proc.stdout


def test_a_late_device_loss_is_always_kept(tmp_path):
    out = tmp_path / "p2p.json"
    proc = _cli(["--json", str(out)], sim.sim_env(devices=2, device_lost_at=2000))
    assert proc.returncode == 6 and out.exists(), proc.stderr
    assert len(json.loads(out.read_text())["copies"]) >= 1


def _route_rates(data):
    """Return each pair's median GB/s by the route l0mem takes, at the largest size measured, and that size."""
    kinds: dict[tuple[str, int, int], list[dict]] = {}
    for c in data["copies"]:
        if c["gbps"] is not None:
            kinds.setdefault((c["kind"], c["src"], c["dst"]), []).append(c)
    rates = {}
    for peer in data["peers"]:
        measured = kinds.get((peer["route"], peer["src"], peer["dst"]))
        if measured:
            top = max(measured, key=lambda c: c["nbytes"])
            rates[peer["src"], peer["dst"]] = (top["gbps"], top["nbytes"])
    return rates


def _said_routes(data):
    """Return how the answer counts the pairs of each route (the pairs named where few)."""
    total = len(data["peers"])
    said = []
    for route, name in (("direct", "Direct"), ("staged", "Host-staged")):
        pairs = [f"{p['src']}>{p['dst']}" for p in data["peers"] if p["route"] == route]
        if len(pairs) == total:
            said.append(f"{name}: all {total} pairs")
        elif pairs:
            named = f" ({', '.join(pairs)}" if len(pairs) <= 4 else ""
            said.append(f"{name}: {len(pairs)} of {total} pairs{named}")
    return said


@pytest.mark.parametrize("peers", ["all", "0>1,1>0"])
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_the_answer_is_at_most_five_lines_whatever_the_device_count(tmp_path, devices, peers):
    # 8 devices printed a 19-line answer at 80 columns: every pair with its GB/s.
    from l0mem.units import format_size

    out = tmp_path / "p2p.json"
    config = {} if peers == "all" else {"peers": peers}
    proc = run_l0mem(
        "p2p",
        ["--sizes", "4K,1M", "--reps", "1", "--warmup", "0", "--json", str(out)],
        sim.sim_env(devices=devices, **config),
        columns=80,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    head, rest = proc.stdout.split("\n\n", 1)
    assert 1 <= len(head.splitlines()) <= 5, proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    flat = " ".join(head.split())
    assert flat.startswith("[SIMULATOR] "), flat
    for said in _said_routes(data):
        assert said in flat, (said, flat)
    rates = _route_rates(data)
    assert len(rates) == len(data["peers"]) == devices * (devices - 1)
    (slow, (slow_gbps, size)), (fast, (fast_gbps, _)) = (
        min(rates.items(), key=lambda kv: kv[1][0]),
        max(rates.items(), key=lambda kv: kv[1][0]),
    )
    assert f"At {format_size(size)}: fastest {fast[0]}>{fast[1]} {fast_gbps:.2f} GB/s" in flat, flat
    assert f"slowest {slow[0]}>{slow[1]} {slow_gbps:.2f} GB/s" in flat, flat
    assert "Every copy checked byte for byte came back whole" in flat
    # The details below keep every pair, its route and its GB/s.
    details = " ".join(rest.split())
    for (src, dst), (gbps, nbytes) in rates.items():
        assert f"{src}>{dst} {gbps:.2f} GB/s at {format_size(nbytes)}" in details, (src, dst)


@pytest.mark.parametrize("peers", ["all", "0>1,1>0"])
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_a_failure_opens_the_answer_in_five_lines(tmp_path, devices, peers):
    out = tmp_path / "p2p.json"
    args = ["--sizes", "8K", "--reps", "1", "--warmup", "0", "--seed", "5", "--json", str(out)]
    config = {} if peers == "all" else {"peers": peers}
    env = sim.sim_env(devices=devices, corrupt_offsets="4096", **config)
    for quiet in ([], ["-q"]):
        proc = run_l0mem("p2p", [*quiet, *args], env, columns=80)
        assert proc.returncode == 1, proc.stderr
        head = proc.stdout.split("\n\n", 1)[0]
        assert 1 <= len(head.splitlines()) <= 5, proc.stdout
        data = json.loads(out.read_text())
        assert head.startswith("[SIMULATOR] FAILED: "), head
        assert sum(not c["ok"] for c in data["checks"]) > 1
        failed = " ".join(head.split()).split(" Direct: ")[0]
        rest = "(the others: without -q, or in --json)" if quiet else "(all of them below)"
        assert failed.endswith(rest), head
        for said in _said_routes(data):
            assert said in " ".join(head.split()), (said, head)


@pytest.mark.parametrize(
    ("options", "config"),
    [
        (["--sizes", "8K", "--seed", "5"], {"corrupt_offsets": "4096"}),
        (["--verify-only", "--seed", "3"], {"corrupt_offsets": "1,70000"}),
        (["--sizes", "4K", "--hang-after", "0.5"], {"hang_copy_at": "1"}),
        (["--sizes", "4K", "--hang-after", "0.5"], {"hang_copy_at": "2"}),
    ],
    ids=["corrupt", "corrupt-verify-only", "hung-first", "hung-later"],
)
def test_quiet_names_the_copy_that_failed(tmp_path, options, config):
    # -q prints the answer alone: "FAILED: 2 copies ... (below)" left the reader without the copy.
    out = tmp_path / "p2p.json"
    args = ["-q", "--reps", "1", "--warmup", "0", *options, "--json", str(out)]
    proc = run_l0mem("p2p", args, sim.sim_env(devices=2, **config), columns=250)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    checks = [c for c in data["checks"] if not c["ok"] and not c["skipped"]]
    hung = [c for c in data["copies"] if c["hung"]]
    first = checks[0] if checks else hung[0]
    where = f"{first['src']}>{first['dst']} {first.get('route') or first['kind']} {first['nbytes']:,} bytes"
    answer = proc.stdout.splitlines()
    assert 1 <= len(answer) <= 5, proc.stdout
    (failed,) = [line for line in answer if line.removeprefix("[SIMULATOR] ").startswith("FAILED: ")]
    assert where in failed, (where, failed)
    if checks:
        assert f"the first at offset {first['first_mismatch']:,} (seed {data['seed']})" in failed
    else:
        assert "did not complete (a hang" in failed
    if len(checks) + len(hung) > 1:
        assert failed.endswith("(the others: without -q, or in --json)"), failed
    # Without -q the same copy opens the list below it.
    full = run_l0mem("p2p", args[1:], sim.sim_env(devices=2, **config), columns=250)
    assert full.returncode == 1 and where in full.stdout.split("\n\n", 1)[0], full.stdout
