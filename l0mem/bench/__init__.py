"""Measurement: copy bandwidth and the peer matrix, kernel bandwidth, the all-reduce benchmark.

Every benchmark returns data and prints nothing; the CLI renders it. Imports
:mod:`l0mem.backends` (and below), :mod:`l0mem.allreduce` and
:mod:`l0mem.probe`; never the audit or the CLI.
"""
