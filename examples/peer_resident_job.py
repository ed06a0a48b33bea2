"""A stand-in for a two-GPU job: device memory on GPU 0 made resident on GPU 1.

    l0mem run --trace -- python examples/peer_resident_job.py --gib 2

It allocates ``--gib`` GiB on the first device in ``--steps`` allocations,
makes each resident on the second device (what a multi-GPU runtime does for
a peer that may read it), holds it for ``--hold`` seconds and frees it. On a
driver stack that backs peer-resident allocations with pinned host pages the
host pays about that much memory again, outside the process's RSS. Exit 3
when there are not two devices. The job is l0mem's own
(:mod:`l0mem.cli.demo_job`, the one ``l0mem demo`` watches); read it there.
"""

from __future__ import annotations

import sys

from l0mem.cli.demo_job import main

if __name__ == "__main__":
    sys.exit(main())
