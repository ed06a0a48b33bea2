"""l0mem: measure host-memory mirroring of Intel GPU allocations.

The package holds a ctypes binding to the Level Zero loader (:mod:`l0mem._ze`),
a small object layer over it (:mod:`l0mem.core`), a SYCL path through dpctl
(:mod:`l0mem.sycl`), compiled kernels (:mod:`l0mem.kernels`), host and device
memory probes (:mod:`l0mem.probe`) and the mirroring audit (:mod:`l0mem.audit`).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
