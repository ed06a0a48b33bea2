"""Sum a buffer across devices with l0mem's all-reduce (Level Zero, else SYCL CPU sub-devices).

Run on Intel GPUs, on l0mem's simulated driver (``ZE_ENABLE_ALT_DRIVERS``
pointing at ``build/simdriver/*/libze_sim.so``), or on a machine with only the
SYCL CPU runtime, where the CPU is split into two sub-devices::

    python examples/allreduce_example.py [ELEMENTS]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from l0mem.allreduce import AllReduce, error_bound
from l0mem.backends import Backend


def open_backend() -> Backend:
    """Return a backend with at least two devices: Level Zero if it has them, else SYCL sub-devices."""
    try:
        from l0mem.backends.levelzero import LevelZeroBackend
        from l0mem.core import drivers

        found = drivers()
        if found and len(found[0].devices()) >= 2:
            return LevelZeroBackend(found[0].devices(), context="multi")
    except Exception as err:
        print(f"Level Zero unavailable ({type(err).__name__}); trying SYCL")
    from l0mem.backends import SyclBackend
    from l0mem.sycl import load_dpctl

    dpctl: Any = load_dpctl()
    root = dpctl.select_default_device()
    half = max(1, int(root.max_compute_units) // 2)
    return SyclBackend(root.create_sub_devices(partition=[half, half]))


def main(nelem: int) -> None:
    """Fill one buffer per device with random values, all-reduce them twice, and check the sums."""
    backend = open_backend()
    devices = list(range(backend.device_count()))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(nelem).astype(np.float32) for _ in devices]
    buffers = [backend.allocate(d, 4 * nelem) for d in devices]
    exact = np.sum(np.stack(inputs).astype(np.float64), axis=0)
    scale = np.sum(np.abs(np.stack(inputs).astype(np.float64)), axis=0)
    try:
        # One AllReduce keeps its scratch buffers between calls, as a model's layers would.
        with AllReduce(backend, devices, threshold=32768) as reduce:
            for path in ("f32", "bf16"):
                for buf, x in zip(buffers, inputs, strict=True):
                    backend.upload(buf, x).wait()
                stats = reduce(buffers, nelem, path=path)
                stats.wait()
                out = np.empty(nelem, dtype=np.float32)
                backend.download(buffers[-1], out).wait()
                err = np.abs(out - exact)
                bound = error_bound(path, len(devices)) * scale
                print(
                    f"{path:>4} {stats.algorithm} over {len(devices)} devices: "
                    f"{stats.total_bytes:,} bytes crossed in {stats.copies} copies, "
                    f"max error {err.max():.3g}, within bound: {bool((err <= bound).all())}"
                )
    finally:
        for buf in buffers:
            buf.close()
        backend.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
