"""The tracer's records under threads, fork and exec: every call recorded, none lost.

The tracer copies each record into its file mapped in the traced process; these
workloads call from 8 threads at once, from a forked child and from the images
exec() puts in place of processes that traced before, and the counts must be exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from l0mem.trace import TraceSession
from l0mem.trace.records import HEADER, Kind, decode
from tests.support import sim

REPO = Path(__file__).resolve().parents[1]

PAIRS = """
import sys
from ctypes import byref, c_size_t, c_void_p
sys.path.insert(0, {repo!r})
from tests.simdriver import zeraw

ze = zeraw.Ze()
dev = ze.devices()[0]
ctx = ze.context()
desc = zeraw.DeviceMemAllocDesc(stype=zeraw.ST_DEVICE_MEM_ALLOC_DESC)


def pairs(n):
    ptr = c_void_p()
    for _ in range(n):
        assert ze.lib.zeMemAllocDevice(ctx, byref(desc), c_size_t(4096), c_size_t(0), dev,
                                       byref(ptr)) == 0
        assert ze.lib.zeMemFree(ctx, ptr) == 0
"""

EXECED = PAIRS + "pairs(int(sys.argv[1]))\n"

WORKLOAD = (
    PAIRS
    + """
import os, threading
execed = {execed!r}
start = threading.Barrier(8)


def worker():
    start.wait()
    pairs(1000)


threads = [threading.Thread(target=worker) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
pid = os.fork()
if pid == 0:
    pairs(100)
    os.execv(sys.executable, [sys.executable, "-c", execed, "50"])
_, status = os.waitpid(pid, 0)
assert status == 0, status
pairs(10)
sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "-c", execed, "20"])
"""
)


def test_eight_threads_fork_and_exec_lose_no_record(tmp_path: Path) -> None:
    session = TraceSession(tmp_path)
    env = session.environment(sim.sim_env(devices=1))
    code = WORKLOAD.format(repo=str(REPO), execed=EXECED.format(repo=str(REPO)))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    totals = session.poll()
    calls = 8 * 1000 + 100 + 50 + 10 + 20
    # One context per image: the first, and the two that exec() started.
    assert totals.calls == {"zeContextCreate": 3, "zeMemAllocDevice": calls, "zeMemFree": calls}
    assert totals.in_flight == 0 and totals.failed_calls == {}
    # The first process and its child, each before and after its exec.
    assert totals.processes == 2 and len(list(session.directory.iterdir())) == 4
    session.close()
    assert session.totals().lost_records == 0
    begins = 0
    for path in session.directory.iterdir():
        records, used = decode(path.read_bytes())
        assert not path.read_bytes()[used:].strip(b"\0")  # only room for records after them
        begins += sum(r.kind == Kind.BEGIN for r in records)
    assert begins == 2 * calls


def test_a_record_never_finished_counts_as_lost_and_the_rest_are_read(tmp_path: Path) -> None:
    session = TraceSession(tmp_path)
    head = HEADER.pack(Kind.PROCESS, 0, 0, 1, 0, 1, 0, -1, -1, -1, -1, 0, 1 << 22)

    def alloc(ptr: int) -> bytes:
        return HEADER.pack(Kind.ALLOC_HOST, 0, 0, 2, ptr, 64, 7, -1, -1, -1, -1, 0, 0)

    # A writer reserved the second slot and never wrote its kind (its process ended).
    unfinished = bytes(8) + alloc(0x2000)[8:]
    path = session.directory / "1-1.l0trace"
    path.write_bytes(head + alloc(0x1000) + unfinished + alloc(0x3000) + bytes(4096))
    assert session.poll().calls == {"zeMemAllocHost": 1}  # the rest waits for the slot
    session.close()
    totals = session.totals()
    assert totals.calls == {"zeMemAllocHost": 2} and totals.lost_records == 1


RSS = (
    PAIRS
    + """
import json


def mapped_kib():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return sum(int(fields[k].split()[0]) for k in ("RssFile", "RssShmem"))


pairs(100)
before = mapped_kib()
pairs(20000)
print(json.dumps({{"before": before, "after": mapped_kib()}}))
"""
)


def test_the_trace_file_does_not_stay_in_the_workloads_memory(tmp_path: Path) -> None:
    """20,000 pairs write 5 MiB of records; the workload keeps at most about two chunks mapped."""
    session = TraceSession(tmp_path)
    env = session.environment(sim.sim_env(devices=1))
    proc = subprocess.run(
        [sys.executable, "-c", RSS.format(repo=str(REPO))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["after"] - got["before"] < 1024, got
    assert session.poll().calls["zeMemAllocDevice"] == 20100
    session.close()
    assert session.totals().lost_records == 0
    size = sum(p.stat().st_size for p in session.directory.iterdir())
    assert size >= 4 * 20100 * HEADER.size  # every record is in the file
