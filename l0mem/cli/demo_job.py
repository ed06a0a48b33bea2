"""A stand-in for a two-GPU job: device memory on GPU 0 made resident on GPU 1.

``python -m l0mem.cli.demo_job`` (what ``l0mem demo`` watches; also
``examples/peer_resident_job.py``) allocates ``--gib`` GiB on the first
Level Zero device in ``--steps`` allocations, makes each resident on the
second (what a multi-GPU runtime does for a peer that may read it), holds it
for ``--hold`` seconds and frees it. On a driver stack that backs
peer-resident allocations with pinned host pages the host pays about that
much memory again, outside the process's RSS. Exit 3 when there are not two
devices.
"""

from __future__ import annotations

import argparse
import sys
import time

from l0mem.core import drivers


def main(argv: list[str] | None = None) -> int:
    """Allocate, make resident on the peer, hold, free; return 0, or 3 without two devices."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="device memory to allocate")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between steps")
    parser.add_argument("--hold", type=float, default=2.0, help="seconds to hold it all")
    args = parser.parse_args(argv)
    devices = [d for driver in drivers() for d in driver.devices()]
    if len(devices) < 2:
        print("peer_resident_job: needs two devices", file=sys.stderr)
        return 3
    owner, peer = devices[:2]
    step = int(args.gib * (1 << 30)) // args.steps
    with owner.driver.create_context([owner, peer]) as ctx:
        held = []
        time.sleep(2 * args.pause)  # a baseline before any device memory
        for _ in range(args.steps):
            buf = ctx.allocate_device(owner, step)
            ctx.make_resident(peer, buf)
            held.append(buf)
            time.sleep(args.pause)
        time.sleep(args.hold)
        for buf in held:
            buf.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
