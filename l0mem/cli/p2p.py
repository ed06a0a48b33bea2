"""``l0mem p2p``: peer access matrix and measured copy bandwidth between devices.

For every ordered device pair the command shows whether the first device can
access the second one's memory, whether atomics work across, the P2P
bandwidth and latency where the Level Zero driver reports them, and how l0mem
copies between the two (direct or host-staged, and why). It then times, for
each size of the sweep, the same-device copy (the reference), the direct
device-to-device copy and the host-staged copy (device to host to device) for
every ordered pair: median GB/s with the slowest-fastest range and the spread.
Each device's copies to and from pinned host memory (the legs of a staged
copy) are timed too, and every staged copy is shown against the slower of
its legs from the same run.
Device event timestamps are used where the backend has them, the host clock
otherwise; host-staged copies always with the host clock, from the first
enqueue to the last completion. ``--json PATH`` writes the run atomically
(schema ``l0mem.p2p/1.1``, documented in docs/p2p-json.md; non-finite numbers
are written as null) and ``--plot PATH`` a heatmap of every pair's bandwidth
and route (PNG or SVG); the paths are checked before any device is opened.
Numbers from l0mem's simulated driver are labelled as a simulator's; with
Intel's driver in a mode without hardware (NEO's ``SetCommandStreamReceiver``
AUB or TBX modes) the copies run once and no bandwidth is shown. The
largest size is checked against device and host memory before anything is
allocated. What it prints is :mod:`.p2p_view`'s.

Exit codes: as ``--help`` lists them (:mod:`l0mem.cli._exits`, the one table).
"""

from __future__ import annotations

from pathlib import Path

import click

from l0mem.cli._common import (
    check_outputs,
    exit_epilog,
    measuring,
    open_backend,
    output,
    rendering,
    save_json,
    save_plot,
    to_stdout,
)
from l0mem.cli._exits import ExitCode
from l0mem.cli._numbers import IntRange
from l0mem.cli._options import (
    answer_only_option,
    backend_option,
    check_plot,
    device_option,
    hang_after_option,
    json_option,
    plot_option,
    reps_option,
    sizes_option,
    sub_devices_option,
    verbose_option,
    warmup_option,
)
from l0mem.cli.p2p_view import render


@click.command(epilog=exit_epilog("p2p"))
@backend_option
@device_option("Default: all.")
@sub_devices_option
@sizes_option("1M,16M,64M", "each copy's size")
@reps_option(10)
@warmup_option(2)
@click.option(
    "--verify-only",
    is_flag=True,
    help="A quick health check: check every route byte for byte, time nothing.",
)
@click.option(
    "--seed",
    type=IntRange(0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Seed of the pattern the copies are checked with (a failure names it, to repeat the run).",
)
@hang_after_option
@json_option
@answer_only_option
@verbose_option(
    "each copy's time per repetition and its clock, every route and why, every copy checked, "
    "the driver environment"
)
@plot_option(
    "the median bandwidth of every device pair, per size, as a heatmap with each cell's route "
    "(same device, direct, host-staged)"
)
def p2p(
    backend: str,
    device_specs: tuple[str, ...],
    sub_devices: int | None,
    sizes: list[int],
    reps: int,
    warmup: int,
    verify_only: bool,
    seed: int,
    hang_after: float,
    json_path: Path | None,
    answer_only: bool,
    verbose: bool,
    plot_path: Path | None,
) -> None:
    """Show peer access, measure direct, host-staged and same-device copies, and check their bytes."""
    from l0mem.bench.copies import check_sizes
    from l0mem.bench.p2p import P2PResult, run_p2p

    check_outputs("p2p", [("--json", json_path), ("--plot", plot_path)])
    check_plot("p2p", plot_path)

    def keep(result: P2PResult) -> None:
        # The report first: a reader of the tables that goes away (| head) must not lose it.
        if json_path is not None:
            save_json("p2p", json_path, result.to_dict())
        if plot_path is not None:
            from l0mem.plots import write_p2p_plot

            save_plot("p2p", plot_path, lambda p: write_p2p_plot(result, p))
        with rendering():
            render(
                result,
                output(stderr=to_stdout(json_path)),
                answer_only=answer_only,
                verbose=verbose,
            )

    # Interrupted, the copies that finished are written and shown, marked incomplete.
    with measuring("p2p", keep), open_backend(backend, device_specs, sub_devices) as b:
        check_sizes(b, sizes)
        result = run_p2p(
            b,
            sizes=sizes,
            reps=reps,
            warmup=warmup,
            verify_only=verify_only,
            seed=seed,
            watchdog=hang_after,
        )
    keep(result)
    if result.failures:
        # A copy that corrupted data or hung is a finding about this machine.
        raise SystemExit(int(ExitCode.REGRESSION))


__all__ = ["p2p"]
