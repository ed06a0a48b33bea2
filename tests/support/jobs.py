"""A small peer-resident job on the simulator, for tests that run a workload under ``l0mem run``."""

from __future__ import annotations

import os
import sys

from tests.support import sim
from tests.support.cli import REPO_ROOT
from tests.support.own_memory import host_env

# Four 32 MiB allocations on device 0, each made resident on device 1 (the step
# that mirrors under mirror=peer-resident), held a moment, then freed.
PEER_RESIDENT_JOB = """
import time
from l0mem.core import drivers
d = drivers()[0]
dev0, dev1 = d.devices()[:2]
with d.create_context([dev0, dev1]) as ctx:
    bufs = []
    for _ in range(4):
        bufs.append(ctx.allocate_device(dev0, 32 << 20))
        ctx.make_resident(dev1, bufs[-1])
        time.sleep(0.15)
    time.sleep(0.3)
"""


def peer_resident_job() -> tuple[list[str], dict[str, str]]:
    """Return the job's command and an environment: the simulator mirroring, the quiet host."""
    env = sim.sim_env(devices=2, mirror="peer-resident")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-c", PEER_RESIDENT_JOB], host_env(env, "watch")
