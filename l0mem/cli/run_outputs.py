"""The files ``l0mem run`` and ``l0mem watch`` write: JSON, CSV, plot and Prometheus metrics.

Every output is checked before the workload starts (:func:`check`); the
Prometheus textfile is also rewritten while it runs, every
:data:`PROMETHEUS_EVERY` seconds, for a collector that scrapes during the run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from l0mem.cli._common import (
    ExitCode,
    check_outputs,
    error,
    output,
    rendering,
    signal_exit,
    to_stdout,
)
from l0mem.cli._options import check_plot
from l0mem.cli.run_view import summary_view
from l0mem.estimate import DEFAULT_CONFIG, AnalysisConfig, for_stacks
from l0mem.files import ReportWriteError
from l0mem.plots import MissingDependencyError, write_watch_plot
from l0mem.probe.fingerprint import gpu_modules
from l0mem.text import os_text
from l0mem.watch import Series, Watch, WatchResult, WatchSample, WatchSummary, summarize
from l0mem.watch.export import document, simulated, write_csv, write_json


@functools.cache
def analysis_config() -> AnalysisConfig:
    """Return the analysis settings for this machine: the audit's, for its GPU drivers."""
    return for_stacks(DEFAULT_CONFIG, gpu_modules())


def check(
    command: str,
    json_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
    prometheus_path: Path | None = None,
) -> None:
    """Check every output before anything starts (exit 2 or 4)."""
    check_outputs(
        command,
        [
            ("--json", json_path),
            ("--csv", csv_path),
            ("--plot", plot_path),
            ("--prometheus", prometheus_path),
        ],
    )
    check_plot(command, plot_path)


# How often --prometheus is rewritten while the workload runs (the collector reads
# it at each scrape; a fit over the whole series at every sample would cost more).
PROMETHEUS_EVERY = 5.0


def with_prometheus(
    on_sample: Callable[[Series, WatchSample], None],
    path: Path | None,
    labels: dict[str, str],
) -> Callable[[Series, WatchSample], None]:
    """Return ``on_sample`` that also rewrites the metrics file every PROMETHEUS_EVERY seconds."""
    if path is None:
        return on_sample
    from l0mem.cli import prometheus

    last = [float("-inf")]

    def sampled(series: Series, sample: WatchSample) -> None:
        on_sample(series, sample)
        now = time.monotonic()
        if now - last[0] >= PROMETHEUS_EVERY:
            last[0] = now
            metrics = prometheus.watch_metrics(series, summarize(series, analysis_config()), labels)
            with contextlib.suppress(ReportWriteError):  # said once, at the end
                prometheus.write(path, metrics)

    return sampled


def metric_labels(meta: dict[str, Any]) -> dict[str, str]:
    """Return the labels of a watch's metrics: the mode, the command's name or the pid, the user's."""
    labels = {"mode": str(meta["mode"])}
    if meta.get("pid") is not None:
        labels["pid"] = str(meta["pid"])
    if meta.get("command"):
        labels["command"] = os_text(os.path.basename(str(meta["command"][0])))
    labels.update((meta.get("options") or {}).get("labels") or {})
    return labels


def _write_prometheus(
    result: WatchResult, summary: WatchSummary, meta: dict[str, Any], path: Path
) -> None:
    from l0mem.cli import prometheus

    metrics = prometheus.watch_metrics(result.series, summary, metric_labels(meta), running=False)
    prometheus.write(path, metrics)


def write_all(
    result: WatchResult,
    summary: WatchSummary,
    paths: tuple[Path | None, ...],
    meta: dict[str, Any],
    title: str,
) -> list[str]:
    json_path, csv_path, plot_path, prometheus_path = paths
    title = os_text(title)  # the command line: a byte that is not UTF-8 as \xNN
    shown = f"SIMULATOR: {title}" if simulated(result) else title
    errors = []
    writers: list[tuple[Path | None, Callable[[Path], None]]] = [
        (
            json_path,
            lambda p: write_json(document(result, summary, config=analysis_config(), **meta), p),
        ),
        (csv_path, lambda p: write_csv(result.series, p)),
        (plot_path, lambda p: write_watch_plot(result.series, summary, p, title=shown)),
        (prometheus_path, lambda p: _write_prometheus(result, summary, meta, p)),
    ]
    for path, writer in writers:
        if path is None:
            continue
        try:
            writer(path)
        except (ReportWriteError, MissingDependencyError, ValueError) as exc:
            errors.append(str(exc))
    return errors


def finish(
    command: str,
    result: WatchResult,
    paths: tuple[Path | None, ...],
    meta: dict[str, Any],
    title: str,
    console_stderr: bool,
    watch: Watch,
    answer_only: bool = False,
    verbose: bool = False,
) -> WatchSummary:
    """Summarize, write the files and show the summary; exit 4 when a file could not be written.

    The stop handlers stay installed (the caller's): a signal that comes while
    the files are written, a second one or one after the workload ended, is
    noted and answered once they are written.
    """
    summary = summarize(result.series, analysis_config())
    errors = write_all(result, summary, paths, meta, title)
    out = output(highlight=False, stderr=console_stderr or to_stdout(*paths))
    with rendering():
        view = summary_view(
            result,
            summary,
            dict(result.series.unavailable),
            out,
            answer_only=answer_only,
            verbose=verbose,
        )
        # crop=False: a long line (a setting to copy) is the terminal's to wrap, never cut.
        out.print(view, crop=False)
    stop = result.stop_signal if result.stop_signal is not None else watch.stop_signal
    if stop is not None:
        name = signal_exit(stop)[1]
        how = "the workload was stopped; " if command == "run" else ""
        if result.stop_signal is None:
            how = "after the workload ended; " if command == "run" else "at the end; "
        error(command, f"interrupted by {name}; {how}every sample was kept")
    for message in errors:
        error(command, message)
    if stop is not None:
        raise SystemExit(signal_exit(stop)[0])
    if errors:
        raise SystemExit(int(ExitCode.BAD_INPUT))
    return summary


__all__ = [
    "PROMETHEUS_EVERY",
    "analysis_config",
    "check",
    "finish",
    "metric_labels",
    "with_prometheus",
    "write_all",
]
