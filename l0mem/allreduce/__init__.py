"""In-place sum of an FP32 buffer held by each of N devices, over any :class:`l0mem.backends.Backend`.

Two paths, chosen by size (``threshold``, default 32768 elements, as in
llama.cpp's split-mode tensor all-reduce for SYCL):

- ``f32`` (below the threshold): FP32 values cross to the peer and are added.
- ``bf16`` (at or above it): a device compresses FP32 to BF16 into an outbox,
  copies it into the peer's inbox (half the bytes), and the peer
  decompresses-and-adds into its FP32 partial.

Algorithms:

- N = 2 (``pair``), as in llama.cpp: every device sends its whole buffer to
  the other. On the bf16 path both devices then compute
  ``bf16(x0) + bf16(x1)``: each rebuilds its own partial from its BF16 outbox
  (zero fill, then decompress-add) before adding the peer's, so both hold the
  same bits (llama.cpp adds the peer's BF16 to its unrounded partial, which
  leaves the two devices with different results).
- N > 2 (``ring``): reduce-scatter then all-gather over N chunks. The chunk
  for device k starts at k and travels k -> k+1 -> ... collecting one partial
  per hop, so device k-1 ends with the full sum of chunk k. The all-gather
  moves the same representation as the reduce-scatter: BF16 on the bf16 path
  (the owner compresses its reduced chunk into its own gather area too and
  every device rebuilds the whole buffer from BF16, so all hold identical
  bits), FP32 on the f32 path. Every device sends ``2 (N-1)/N`` of the buffer
  in total, so the bf16 path moves exactly half the bytes of the f32 path.

Error (see :func:`error_bound`): each input x_d reaches the result multiplied by
at most ``b`` BF16 roundings (unit 2^-8) and ``f`` FP32 roundings (unit
2^-24), so ``|result - sum| <= gamma * sum_d |x_d|`` with
``gamma = t / (1 - t)``, ``t = b 2^-8 + f 2^-24``. Pair: f32 ``b=0, f=1``;
bf16 ``b=1, f=1``. Ring: f32 ``b=0, f=N-1``; bf16 ``b=N, f=N-1`` (N-1 hops
of the reduce-scatter plus the all-gather's rounding).

Scratch: one persistent allocation per device of at least ``4 * nelem``
bytes, grown when a larger call comes, freed by :meth:`AllReduce.close`.
Ordering: every copy between devices runs on the source device's in-order
queue (a host-staged copy: download on the source, upload on the
destination), and a device's last operation waits for every write into its
memory, so after :attr:`AllReduceStats.done` a device's queue may use its
buffer. The call does not wait for the devices, except when the scratch grows
(the old scratch may still be in use) and where a backend must (events of
another context are waited on the host). Bytes are counted per
copy as it is enqueued (:attr:`AllReduceStats.bytes_crossed`).

Events: every dependency between queues is passed explicitly as ``wait_for``
when the waiting operation is enqueued; no operation relies on the order of
another queue through an event the all-reduce no longer holds. Between calls
the all-reduce keeps each device's last event (the guard the next call's
writes into that device wait for, and :attr:`AllReduceStats.done`), updated
per device so a device without work in a call keeps its older guard. Keeping
an event that a pending operation waits for alive until that operation has
run is the backend's part of the contract (:mod:`l0mem.backends.levelzero`,
:mod:`l0mem.backends.sycl`, both through :mod:`l0mem.keepalive`).
tests/test_allreduce_sycl_queues.py runs back-to-back
calls on concurrently running SYCL queues and checks every result.

Modules: :mod:`l0mem.allreduce.reduce` holds :class:`AllReduce`, its stats
and the error bounds; :mod:`l0mem.allreduce.schedules` what the pair and the
ring enqueue and the scratch layout they use.

What it may import: :mod:`l0mem.backends` and the layers below it
(:mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`) and the leaf
modules; it runs over the :class:`~l0mem.backends.Backend` interface, so it
never needs more than :mod:`l0mem.backends`.
"""

from l0mem.allreduce.reduce import (
    BF16_UNIT,
    DEFAULT_THRESHOLD,
    F32_UNIT,
    AllReduce,
    AllReduceStats,
    Transport,
    allreduce,
    error_bound,
    roundings,
)
from l0mem.allreduce.schedules import ACCUMULATORS, PathName, Step, scratch_bytes

__all__ = [
    "ACCUMULATORS",
    "BF16_UNIT",
    "DEFAULT_THRESHOLD",
    "F32_UNIT",
    "AllReduce",
    "AllReduceStats",
    "PathName",
    "Step",
    "Transport",
    "allreduce",
    "error_bound",
    "roundings",
    "scratch_bytes",
]
