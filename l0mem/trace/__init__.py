"""Allocation tracing of a watched workload: which calls allocated and made memory resident.

A small C library, shipped here as source and built on first use, sits between
the Level Zero loader and the real driver of a workload that ``l0mem run
--trace`` starts, and records every allocation, free and residency call; this
package builds it, prepares the workload's environment and reads the records.

What it may import: the leaf modules (``units``, ``files``, ``keepalive``, ``bf16``,
``driverenv``) and nothing else of l0mem: the tracer must work without any GPU
runtime loaded into l0mem itself.
"""
