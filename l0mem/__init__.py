"""l0mem: measure host-memory mirroring of Intel GPU allocations.

Layers, each importing only the ones before it (tests/test_layering.py):
the ctypes binding to the Level Zero loader (``_ze``); the Level Zero
objects (``core``) and the SYCL runtime through dpctl (``sycl``); one
backend interface over both with the kernels and the device inventory
(``backends``); measurement (``bench``), the all-reduce algorithm
(``allreduce``) and host and device memory signals (``probe``); the
mirroring audit (``audit``); the command line (``cli``). ``units`` (the size
grammar), ``files`` (the report writer), ``keepalive`` and ``bf16`` are leaves.

What it may import: nothing of l0mem; this module only holds the version,
which every layer may read.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
