"""Readers and snapshots of the probe against a fake /proc and /sys tree."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from l0mem.probe import Prober, Snapshot, changes, take_snapshot
from l0mem.probe.parse import parse_zoneinfo_pcp

DATA = Path(__file__).parent / "data" / "probe"
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
CGROUP = "user.slice/user-1000.slice/session-3.scope"
PAGE = 4096


def copy(name: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / name, dest)


def add_fd(proc: Path, fd: int, target: str, fdinfo: str) -> None:
    """Make <proc>/self/fd/<fd> a link to ``target`` with the fixture ``fdinfo``."""
    (proc / "self" / "fd").mkdir(parents=True, exist_ok=True)
    os.symlink(target, proc / "self" / "fd" / str(fd))
    copy(fdinfo, proc / "self" / "fdinfo" / str(fd))


def make_tree(root: Path, *, gpu: bool = True, cgroup: str = "v2") -> tuple[str, str]:
    """Build a fake proc and sys tree under ``root``; return (proc_root, sys_root)."""
    proc, sys = root / "proc", root / "sys"
    copy("status.txt", proc / "self" / "status")
    copy("meminfo_gpu.txt" if gpu else "meminfo_plain.txt", proc / "meminfo")
    copy("zoneinfo.txt", proc / "zoneinfo")
    copy("vmstat_gpu.txt" if gpu else "vmstat_plain.txt", proc / "vmstat")
    if cgroup == "v2":
        copy("cgroup_v2.txt", proc / "self" / "cgroup")
        cg = sys / "fs" / "cgroup" / CGROUP
    elif cgroup == "hybrid":
        copy("cgroup_hybrid.txt", proc / "self" / "cgroup")
        cg = sys / "fs" / "cgroup" / "unified" / CGROUP
    else:
        copy("cgroup_v1.txt", proc / "self" / "cgroup")
        cg = sys / "fs" / "cgroup" / "memory"
    cg.mkdir(parents=True)
    (cg / "memory.current").write_text("5912182784\n")
    copy("memory_stat_gpu.txt" if gpu else "memory_stat_plain.txt", cg / "memory.stat")
    add_fd(proc, 0, "/dev/pts/0", "fdinfo_regular_file.txt")
    add_fd(proc, 5, "/dev/dri/renderD128", "xe_dev03_client3.txt")
    add_fd(proc, 6, "/dev/dri/renderD128", "xe_dev03_client3.txt")  # dup of fd 5
    add_fd(proc, 7, "/dev/dri/card0", "xe_dev03_client7.txt")
    add_fd(proc, 8, "/dev/dri/renderD129", "xe_dev83_client3.txt")
    # a DRM-looking fdinfo behind a link that is not a DRM device must be ignored
    add_fd(proc, 9, "/memfd:decoy (deleted)", "i915_new.txt")
    return str(proc), str(sys)


def test_full_tree_gives_every_source(tmp_path):
    proc, sys = make_tree(tmp_path)
    prober = Prober(proc_root=proc, sys_root=sys, page_size=PAGE)
    assert set(prober.sources) == {"proc", "meminfo", "vmstat", "zoneinfo", "cgroup", "drm"}
    snap = prober.snapshot()
    v = snap.values
    pcp = parse_zoneinfo_pcp((DATA / "zoneinfo.txt").read_text())
    assert pcp is not None and pcp > 0
    assert v["zoneinfo.pcp_free"] == pcp * PAGE
    assert v["host.available"] == v["meminfo.MemAvailable"] + pcp * PAGE
    assert v["proc.VmRSS"] == 398112 * KiB
    assert v["proc.RssShmem"] == 8056 * KiB
    assert v["meminfo.MemAvailable"] == 58001236 * KiB
    assert v["meminfo.GPUActive"] == 8392704 * KiB
    assert v["vmstat.nr_gpu_active"] == 2098176 * PAGE
    assert v["cgroup.memory.current"] == 5912182784
    assert v["cgroup.gpu_active"] == 8594128896
    # fd 5 and 6 are one client (id 3); fd 7 is client 7 of the same device
    assert v["drm.0000:03:00.0.gtt.total"] == 4096 * KiB + 256 * KiB
    assert v["drm.0000:83:00.0.gtt.resident"] == 4 * GiB
    assert not any(name.startswith("drm.0000:00:02.0") for name in v)
    assert set(snap.unavailable) == {"sysman"}


def test_machine_without_gpu_accounting_reports_those_signals_unavailable(tmp_path):
    proc, sys = make_tree(tmp_path, gpu=False)
    snap = Prober(proc_root=proc, sys_root=sys, page_size=PAGE).snapshot()
    for name in (
        "meminfo.GPUActive",
        "meminfo.GPUReclaim",
        "vmstat.nr_gpu_active",
        "vmstat.nr_gpu_reclaim",
        "cgroup.gpu_active",
        "cgroup.gpu_reclaim",
    ):
        assert name not in snap.values
        assert "not reported" in snap.unavailable[name]
    assert snap.values["cgroup.memory.current"] == 5912182784
    assert snap.values["meminfo.Shmem"] == 512208 * KiB


def test_hybrid_host_finds_the_unified_hierarchy(tmp_path):
    proc, sys = make_tree(tmp_path, cgroup="hybrid")
    snap = Prober(proc_root=proc, sys_root=sys).snapshot()
    assert snap.values["cgroup.memory.current"] == 5912182784


def test_cgroup_v1_only_host_has_no_cgroup_signals(tmp_path):
    proc, sys = make_tree(tmp_path, cgroup="v1")
    prober = Prober(proc_root=proc, sys_root=sys)
    assert "cgroup" not in prober.sources
    snap = prober.snapshot()
    assert "cgroup v2" in snap.unavailable["cgroup"]
    assert not any(name.startswith("cgroup.") for name in snap.values)


def test_missing_files_make_their_source_unavailable(tmp_path):
    proc, sys = make_tree(tmp_path)
    os.remove(Path(proc) / "vmstat")
    shutil.rmtree(Path(proc) / "self" / "fd")
    prober = Prober(proc_root=proc, sys_root=sys)
    assert "vmstat" not in prober.sources and "drm" not in prober.sources
    snap = prober.snapshot()
    assert "vmstat" in snap.unavailable and "drm" in snap.unavailable
    assert not any(n.startswith(("vmstat.", "drm.")) for n in snap.values)
    assert snap.values["proc.VmRSS"] == 398112 * KiB


def test_sources_are_picked_once(tmp_path):
    proc, sys = make_tree(tmp_path)
    os.remove(Path(proc) / "vmstat")
    prober = Prober(proc_root=proc, sys_root=sys)
    copy("vmstat_gpu.txt", Path(proc) / "vmstat")
    assert not any(n.startswith("vmstat.") for n in prober.snapshot().values)
    # a file that vanishes after the pick is reported, not raised
    os.remove(Path(proc) / "meminfo")
    snap = prober.snapshot()
    assert "cannot read" in snap.unavailable["meminfo"]
    assert not any(n.startswith("meminfo.") for n in snap.values)


def test_drm_files_opened_later_are_seen(tmp_path):
    proc, sys = make_tree(tmp_path)
    for fd in (5, 6, 7, 8):
        os.remove(Path(proc) / "self" / "fd" / str(fd))
    prober = Prober(proc_root=proc, sys_root=sys)
    before = prober.snapshot()
    assert "no DRM device file" in before.unavailable["drm"]
    assert not any(n.startswith("drm.") for n in before.values)
    os.symlink("/dev/dri/renderD128", Path(proc) / "self" / "fd" / "5")
    after = prober.snapshot()
    assert after.values["drm.0000:03:00.0.gtt.total"] == 4096 * KiB
    assert "drm" not in after.unavailable


def test_old_i915_fdinfo_through_the_reader(tmp_path):
    proc, sys = make_tree(tmp_path)
    add_fd(Path(proc), 12, "/dev/dri/renderD130", "i915_old.txt")
    snap = Prober(proc_root=proc, sys_root=sys).snapshot()
    assert snap.values["drm.0000:4d:00.0.local0.resident"] == 2048 * MiB
    assert snap.values["drm.0000:4d:00.0.system0.resident"] == 10240 * KiB


def test_extra_sysman_values_are_added(tmp_path):
    proc, sys = make_tree(tmp_path)
    snap = take_snapshot(
        {"sysman.0.used": 7 * GiB, "sysman.1.used": 0}, proc_root=proc, sys_root=sys
    )
    assert snap.values["sysman.0.used"] == 7 * GiB
    assert snap.values["sysman.1.used"] == 0
    assert "sysman" not in snap.unavailable


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"proc.VmRSS": 1}, "sysman"),
        ({"bogus": 1}, "not a signal name"),
        ({"sysman.0.used": -1}, ">= 0"),
        ({"sysman.0.used": 1.5}, "byte count"),
        ({"sysman.0.used": True}, "byte count"),
    ],
)
def test_bad_extra_is_a_clear_error(tmp_path, extra, message):
    proc, sys = make_tree(tmp_path)
    with pytest.raises(ValueError, match=message) as info:
        Prober(proc_root=proc, sys_root=sys).snapshot(extra)
    assert "\n" not in str(info.value)


def test_snapshot_is_frozen_and_round_trips_through_json(tmp_path):
    proc, sys = make_tree(tmp_path)
    snap = Prober(proc_root=proc, sys_root=sys).snapshot({"sysman.0.used": 5})
    with pytest.raises(TypeError):
        snap.values["proc.VmRSS"] = 0  # type: ignore[index]
    again = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert again == snap
    with pytest.raises(ValueError, match="not a snapshot"):
        Snapshot.from_dict({"values": {}})


def test_changes_covers_signals_present_in_both():
    a = Snapshot(1.0, {"proc.VmRSS": 100, "meminfo.MemAvailable": 1000, "drm.x.gtt.total": 4})
    b = Snapshot(2.0, {"proc.VmRSS": 150, "meminfo.MemAvailable": 900, "sysman.0.used": 9})
    assert changes(a, b) == {"proc.VmRSS": 50, "meminfo.MemAvailable": -100}


def test_cgroup_with_only_memory_stat_reports_current_unavailable(tmp_path):
    proc, sys = make_tree(tmp_path)
    os.remove(Path(sys) / "fs" / "cgroup" / CGROUP / "memory.current")
    snap = Prober(proc_root=proc, sys_root=sys).snapshot()
    assert "cgroup.memory.current" not in snap.values
    assert "cgroup.memory.current" in snap.unavailable
    assert snap.values["cgroup.gpu_reclaim"] == 67108864


def test_drm_fd_whose_fdinfo_vanished_is_skipped(tmp_path):
    proc, sys = make_tree(tmp_path)
    os.remove(Path(proc) / "self" / "fdinfo" / "7")  # client 7 closed after the fd walk
    snap = Prober(proc_root=proc, sys_root=sys).snapshot()
    assert snap.values["drm.0000:03:00.0.gtt.total"] == 4096 * KiB
    assert "drm.0000:03:00.0.system.purgeable" in snap.values  # client 3 reports 0
    assert snap.values["drm.0000:03:00.0.system.purgeable"] == 0
