"""Measurement: copy bandwidth and the peer matrix, kernel bandwidth, the all-reduce benchmark.

Every benchmark returns data and prints nothing; the CLI renders it. All of
them time through :func:`l0mem.bench.timing.time_ops` and summarize with its
:class:`~l0mem.bench.timing.Measurement` (samples, median, GB/s, spread), so
the numbers of ``p2p``, ``bench kernels`` and ``allreduce`` mean the same.
Sizes are bytes per device buffer, as every ``--sizes`` option takes them.

What it may import: :mod:`l0mem.backends` and the layers below it
(:mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`), the algorithm it
measures (:mod:`l0mem.allreduce`), :mod:`l0mem.probe` and the leaf modules;
never the audit or the CLI.
"""
