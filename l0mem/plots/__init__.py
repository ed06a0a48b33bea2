"""Pictures of l0mem's reports: the audit, a run or watch, ``p2p``'s copies, the matrix, a comparison.

:mod:`.figure` is the one way a figure is made and written (PNG or SVG,
atomically, without pyplot's global state); :mod:`.audit` draws an audit's
host cost against device memory per set-up with each run's fitted line (the
climbs and lines it draws, as data, are :mod:`.climbs`'),
:mod:`.watch` a run or watch over time and against device memory,
:mod:`.p2p` the copy bandwidth of every device pair as a heatmap with its
route, :mod:`.matrix` the fleet matrix of ``l0mem matrix`` as a heatmap of
verdicts, and :mod:`.compare` the comparison of ``l0mem compare``: each run
of both reports with its deciding slope before and now, over the verdict
zones. Simulated numbers are labelled as the simulator's in every title.
matplotlib is optional (the ``plot`` extra): without it a plot raises
:class:`MissingDependencyError`, and nothing else of l0mem needs it.

What it may import: :mod:`l0mem.watch`, :mod:`l0mem.audit`,
:mod:`l0mem.estimate`, :mod:`l0mem.bench` and the leaf modules; never the CLI.
"""

from l0mem.plots.audit import write_audit_plot
from l0mem.plots.climbs import plot_signal
from l0mem.plots.compare import write_compare_plot
from l0mem.plots.figure import PLOT_FORMATS, MissingDependencyError, new_figure, save_figure
from l0mem.plots.matrix import write_matrix_plot
from l0mem.plots.p2p import write_p2p_plot
from l0mem.plots.watch import write_watch_plot

__all__ = [
    "PLOT_FORMATS",
    "MissingDependencyError",
    "new_figure",
    "plot_signal",
    "save_figure",
    "write_audit_plot",
    "write_compare_plot",
    "write_matrix_plot",
    "write_p2p_plot",
    "write_watch_plot",
]
