"""Host and device memory signals, sampled together as one snapshot.

``take_snapshot()`` (or a long-lived :class:`Prober`) reads every memory source
of this process and machine in one cheap pass; signal names and meaning are in
:mod:`l0mem.probe.signals`, sources in :mod:`l0mem.probe.readers`, parsers in
:mod:`l0mem.probe.parse`. :mod:`l0mem.probe.fingerprint` describes the host.
"""

from l0mem.probe.snapshot import Prober, Snapshot, changes, take_snapshot

__all__ = ["Prober", "Snapshot", "changes", "take_snapshot"]
