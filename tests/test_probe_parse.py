"""Parsers of the probe against fixture texts in the kernel's real formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from l0mem.probe import parse
from l0mem.probe.signals import describe

DATA = Path(__file__).parent / "data" / "probe"
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_status_gives_the_four_rss_values_in_bytes():
    assert parse.parse_status(text("status.txt")) == {
        "proc.VmRSS": 398112 * KiB,
        "proc.RssAnon": 301056 * KiB,
        "proc.RssFile": 89000 * KiB,
        "proc.RssShmem": 8056 * KiB,
    }


def test_status_of_a_kernel_thread_has_no_rss_signals():
    assert parse.parse_status("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n") == {}


def test_meminfo_without_gpu_lines_leaves_them_absent():
    values = parse.parse_meminfo(text("meminfo_plain.txt"))
    assert values["meminfo.MemTotal"] == 65544372 * KiB
    assert values["meminfo.MemAvailable"] == 58001236 * KiB
    assert values["meminfo.Committed_AS"] == 14400312 * KiB
    assert values["meminfo.Shmem"] == 512208 * KiB
    assert values["meminfo.Active(anon)"] == 4410336 * KiB
    assert "meminfo.GPUActive" not in values
    assert "meminfo.GPUReclaim" not in values
    # unitless page counts are not bytes
    assert "meminfo.HugePages_Total" not in values
    kb_lines = [line for line in text("meminfo_plain.txt").splitlines() if line.endswith(" kB")]
    assert len(values) == len(kb_lines) == 39


def test_meminfo_with_gpu_lines():
    plain = parse.parse_meminfo(text("meminfo_plain.txt"))
    values = parse.parse_meminfo(text("meminfo_gpu.txt"))
    assert values["meminfo.GPUActive"] == 8392704 * KiB
    assert values["meminfo.GPUReclaim"] == 65536 * KiB
    assert {k: v for k, v in values.items() if "GPU" not in k} == plain


def test_meminfo_skips_a_malformed_line_and_keeps_the_rest():
    values = parse.parse_meminfo("MemFree: lots kB\nShmem:  12 kB\nBroken line\n")
    assert values == {"meminfo.Shmem": 12 * KiB}


@pytest.mark.parametrize("page_size", [4096, 16384])
def test_vmstat_gpu_pages_become_bytes(page_size):
    values = parse.parse_vmstat(text("vmstat_gpu.txt"), page_size)
    assert values == {
        "vmstat.nr_gpu_active": 2098176 * page_size,
        "vmstat.nr_gpu_reclaim": 16384 * page_size,
    }


def test_vmstat_without_gpu_counters_is_empty():
    assert parse.parse_vmstat(text("vmstat_plain.txt"), 4096) == {}


def test_vmstat_does_not_match_a_longer_key_with_the_same_prefix():
    assert parse.parse_vmstat("nr_gpu_active_foo 5\nnr_gpu_reclaim 2\n", 4096) == {
        "vmstat.nr_gpu_reclaim": 8192
    }


def test_vmstat_rejects_a_bad_page_size():
    with pytest.raises(ValueError, match="page size"):
        parse.parse_vmstat("", 0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cgroup_v2.txt", "/user.slice/user-1000.slice/session-3.scope"),
        ("cgroup_hybrid.txt", "/user.slice/user-1000.slice/session-3.scope"),
        ("cgroup_v1.txt", None),
    ],
)
def test_cgroup_path(name, expected):
    assert parse.parse_cgroup_path(text(name)) == expected


def test_memory_current():
    assert parse.parse_memory_current("5912182784\n") == {"cgroup.memory.current": 5912182784}
    assert parse.parse_memory_current("") == {}


def test_memory_stat_with_and_without_gpu_keys():
    assert parse.parse_memory_stat(text("memory_stat_gpu.txt")) == {
        "cgroup.gpu_active": 8594128896,
        "cgroup.gpu_reclaim": 67108864,
    }
    assert parse.parse_memory_stat(text("memory_stat_plain.txt")) == {}


def test_xe_fdinfo_regions_units_and_engine_keys():
    client = parse.parse_drm_fdinfo(text("xe_dev03_client3.txt"))
    assert client is not None
    assert (client.driver, client.pdev, client.client_id) == ("xe", "0000:03:00.0", 3)
    mem = client.memory
    assert mem[("gtt", "total")] == 4096 * KiB
    assert mem[("gtt", "active")] == 512 * KiB
    assert mem[("vram0", "shared")] == 2 * MiB
    assert mem[("vram0", "resident")] == 4198400 * KiB
    assert mem[("system", "purgeable")] == 0
    assert {region for region, _ in mem} == {"system", "gtt", "vram0", "stolen"}
    # drm-total-cycles-<engine> starts like a memory key but is a timestamp
    assert not any(region.startswith("cycles") for region, _ in mem)
    # xe prints no purgeable for device regions: absent, not 0
    assert ("vram0", "purgeable") not in mem


def test_i915_new_style_fdinfo():
    client = parse.parse_drm_fdinfo(text("i915_new.txt"))
    assert client is not None
    assert (client.driver, client.pdev, client.client_id) == ("i915", "0000:00:02.0", 39)
    assert client.memory[("system0", "total")] == 6144 * KiB
    assert client.memory[("system0", "resident")] == 6044 * KiB
    assert client.memory[("system0", "purgeable")] == 1688 * KiB
    assert client.memory[("stolen-system0", "resident")] == 0
    assert {region for region, _ in client.memory} == {"system0", "stolen-system0"}


def test_i915_old_style_memory_key_is_resident():
    client = parse.parse_drm_fdinfo(text("i915_old.txt"))
    assert client is not None
    assert client.memory == {
        ("system0", "resident"): 10240 * KiB,
        ("local0", "resident"): 2048 * MiB,
        ("stolen-local0", "resident"): 0,
    }


def test_resident_key_wins_over_the_older_memory_alias():
    body = "drm-driver: i915\ndrm-resident-system0: 1000 KiB\ndrm-memory-system0: 9999 KiB\n"
    client = parse.parse_drm_fdinfo(body)
    assert client is not None
    assert client.memory == {("system0", "resident"): 1000 * KiB}
    # a bare 0 is a value, not a missing key
    client = parse.parse_drm_fdinfo(
        "drm-driver: i915\ndrm-resident-system0: 0\ndrm-memory-system0: 7\n"
    )
    assert client is not None
    assert client.memory == {("system0", "resident"): 0}


def test_fdinfo_units_kb_and_plain_bytes():
    client = parse.parse_drm_fdinfo(
        "drm-driver:\tx\ndrm-total-a:\t3 kB\ndrm-total-b:\t17\ndrm-total-c:\t9 furlongs\n"
    )
    assert client is not None
    assert client.memory == {("a", "total"): 3 * KiB, ("b", "total"): 17}


def test_non_drm_fdinfo_is_not_a_client():
    assert parse.parse_drm_fdinfo(text("fdinfo_regular_file.txt")) is None


def test_two_clients_of_one_device_are_summed():
    clients = [
        parse.parse_drm_fdinfo(text(n)) for n in ("xe_dev03_client3.txt", "xe_dev03_client7.txt")
    ]
    values = parse.sum_drm_clients([c for c in clients if c is not None])
    assert values["drm.0000:03:00.0.gtt.total"] == 4096 * KiB + 256 * KiB
    assert values["drm.0000:03:00.0.system.resident"] == 2 * MiB
    assert values["drm.0000:03:00.0.vram0.total"] == 4198400 * KiB + 16 * MiB
    assert values["drm.0000:03:00.0.system.purgeable"] == 1 * MiB


def test_duplicate_fds_of_one_client_count_once():
    one = parse.parse_drm_fdinfo(text("xe_dev03_client3.txt"))
    assert one is not None
    assert parse.sum_drm_clients([one, one, one]) == parse.sum_drm_clients([one])


def test_same_client_id_on_two_devices_counts_on_each():
    texts = ("xe_dev03_client3.txt", "xe_dev83_client3.txt", "xe_dev03_client3.txt")
    clients = [parse.parse_drm_fdinfo(text(n)) for n in texts]
    values = parse.sum_drm_clients([c for c in clients if c is not None])
    assert values["drm.0000:03:00.0.gtt.resident"] == 4096 * KiB
    assert values["drm.0000:83:00.0.gtt.resident"] == 4 * GiB
    assert values["drm.0000:83:00.0.gtt.shared"] == 4 * GiB
    assert values["drm.0000:83:00.0.vram1.total"] == 0
    assert "drm.0000:03:00.0.vram1.total" not in values


def test_clients_without_an_id_cannot_be_matched_so_each_counts():
    client = parse.parse_drm_fdinfo(
        "drm-driver: x\ndrm-pdev: 0000:01:00.0\ndrm-total-vram0: 1 MiB\n"
    )
    assert client is not None
    assert parse.sum_drm_clients([client, client]) == {"drm.0000:01:00.0.vram0.total": 2 * MiB}


def test_drm_signal_names_are_understood_by_signals_module():
    clients = [parse.parse_drm_fdinfo(text(n)) for n in ("xe_dev83_client3.txt", "i915_new.txt")]
    values = parse.sum_drm_clients([c for c in clients if c is not None])
    assert describe("drm.0000:83:00.0.gtt.resident").side == "host"
    assert describe("drm.0000:83:00.0.vram0.resident").side == "device"
    for name in values:
        info = describe(name)
        assert info.source == "drm"
        assert info.side == (
            "host"
            if ".gtt." in name or ".system" in name or ".stolen-system0." in name
            else "device"
        )


def test_zoneinfo_per_cpu_free_pages_are_summed_over_zones_and_cpus():
    assert parse.parse_zoneinfo_pcp(text("zoneinfo.txt")) == 33546 + 44082


def test_zoneinfo_without_pagesets_is_unknown_not_zero():
    body = "Node 0, zone   Normal\n  pages free     220965\n        min      11371\n"
    assert parse.parse_zoneinfo_pcp(body) is None
