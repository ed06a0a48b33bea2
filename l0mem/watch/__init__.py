"""Watching a real workload: ``l0mem run`` and ``l0mem watch``.

Samples host memory, the workload's process tree and its DRM clients over
time, optionally with the allocation tracer's records, and judges the host
cost per device GiB in the audit's terms.

What it may import: :mod:`l0mem.probe`, :mod:`l0mem.trace`, :mod:`l0mem.audit`,
the packages below them (:mod:`l0mem.bench`, :mod:`l0mem.allreduce`,
:mod:`l0mem.backends`, :mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`)
and the leaves.
"""
