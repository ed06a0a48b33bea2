"""The job ``l0mem demo`` watches: device memory on one GPU made resident on the other.

``python -m l0mem.cli.demo_job --bytes N`` allocates N bytes on the first
Level Zero device in eight steps (enough windows for ``run``'s own interval), makes each resident on the second (what a
multi-GPU runtime does for a peer that may read it), holds it briefly and
frees it. Exit 3 where there are not two devices.
"""

from __future__ import annotations

import argparse
import sys
import time

from l0mem.core import drivers

STEPS = 8
PAUSE_S = 0.25


def main(argv: list[str] | None = None) -> int:
    """Allocate, make resident on the peer, hold, free; return 0, or 3 without two devices."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=256 << 20, help="device memory in all")
    args = parser.parse_args(argv)
    devices = [d for driver in drivers() for d in driver.devices()]
    if len(devices) < 2:
        print("l0mem demo job: needs two Level Zero devices", file=sys.stderr)
        return 3
    owner, peer = devices[:2]
    step = max(args.bytes // STEPS, 1 << 20)
    with owner.driver.create_context([owner, peer]) as ctx:
        held = []
        time.sleep(PAUSE_S)
        for _ in range(STEPS):
            buf = ctx.allocate_device(owner, step)
            ctx.make_resident(peer, buf)
            held.append(buf)
            time.sleep(PAUSE_S)
        for buf in held:
            buf.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
