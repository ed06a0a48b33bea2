"""Measurement: copy bandwidth and the peer matrix, kernel bandwidth, the all-reduce benchmark.

Every benchmark returns data and prints nothing; the CLI renders it. All of
them time through :func:`l0mem.bench.timing.time_ops` and summarize with its
:class:`~l0mem.bench.timing.Measurement` (samples, median, GB/s, spread), so
the numbers of ``p2p``, ``bench kernels`` and ``allreduce`` mean the same.
Sizes are bytes per device buffer, as every ``--sizes`` option takes them.
Imports :mod:`l0mem.backends` (and below), :mod:`l0mem.allreduce` and
:mod:`l0mem.probe`; never the audit or the CLI.
"""
