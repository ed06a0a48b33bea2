"""Plots (l0mem.plots): what each figure shows, checked on matplotlib's own objects, and how it is written."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Literal

import pytest

from l0mem.audit.analysis import analyze_report
from l0mem.audit.matrix import build
from l0mem.audit.model import AuditReport, Sample, SetupRun, SignalFit
from l0mem.bench.copies import CopyTiming, PeerInfo
from l0mem.bench.p2p import P2PResult
from l0mem.bench.timing import Measurement
from l0mem.files import ReportWriteError
from l0mem.plots import (
    MissingDependencyError,
    write_audit_plot,
    write_matrix_plot,
    write_p2p_plot,
)
from l0mem.plots import audit as audit_plot
from l0mem.plots import matrix as matrix_plot
from l0mem.plots import p2p as p2p_plot
from l0mem.plots.audit import FULL_MIRROR
from l0mem.plots.climbs import climbs_of, fitted_line, plot_signal
from l0mem.plots.matrix import VERDICT_COLOURS, cell_label, cell_ratio
from l0mem.plots.p2p import pair_grid
from tests.support.plots import capture
from tests.test_analysis import synthetic_report, synthetic_run

GIB = 1 << 30
MIB = 1 << 20


@pytest.fixture
def report() -> AuditReport:
    runs = [
        synthetic_run(1.0, setup="sycl"),
        synthetic_run(0.5, setup="l0-peer-resident", released=False),
        synthetic_run(0.0, setup="l0"),
        synthetic_run(0.0, setup="sycl", remedy="affinity", env={"ZE_AFFINITY_MASK": "0"}),
    ]
    return analyze_report(synthetic_report(runs))


def _simulated(report: AuditReport) -> AuditReport:
    runs = [dataclasses.replace(r, simulated=True) for r in report.runs]
    return dataclasses.replace(report, fingerprint={"simulated": True}, runs=runs)


def _leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------- audit


def test_png_is_laptop_sized_and_written_atomically(tmp_path: Path, report: AuditReport) -> None:
    path = tmp_path / "audit.png"
    write_audit_plot(report, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert 1000 <= width <= 1600 and 600 <= height <= 1400
    assert _leftovers(tmp_path) == []


def test_each_run_has_its_fitted_line_at_the_analysis_slope(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = capture(monkeypatch, audit_plot)
    write_audit_plot(report, tmp_path / "audit.png")
    axes = {ax.get_title(): ax for ax in figures[0].axes if ax.get_title()}
    for run in report.runs:
        assert run.result is not None and run.result.deciding_signal is not None
        fit = run.result.fit(run.result.deciding_signal)
        assert fit is not None and fit.slope is not None and fit.intercept_mib is not None
        fits = [ln for ln in axes[run.setup].lines if ln.get_gid() == "fit"]
        labels = [ln.get_label() for ln in fits]
        line = fits[[f"{fit.slope:.0f} MiB/GiB" in lbl for lbl in labels].index(True)]
        (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
        assert x0 == 0 and y0 == pytest.approx(fit.intercept_mib)  # one climb: its own zero
        assert (y1 - y0) / (x1 - x0) == pytest.approx(fit.slope)


def test_references_are_over_the_data_and_labelled(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = capture(monkeypatch, audit_plot)
    write_audit_plot(report, tmp_path / "audit.png")
    for ax in (a for a in figures[0].axes if a.lines):
        refs = {ln.get_gid(): ln for ln in ax.lines if str(ln.get_gid()).startswith("ref-")}
        assert set(refs) == {"ref-mirror", "ref-zero"}
        data = [ln for ln in ax.lines if ln.get_gid() is None]
        assert data and min(r.get_zorder() for r in refs.values()) > max(
            d.get_zorder() for d in data
        )
        mirror = refs["ref-mirror"]
        (x0, x1), (y0, y1) = mirror.get_xdata(), mirror.get_ydata()
        assert (y1 - y0) / (x1 - x0) == pytest.approx(FULL_MIRROR)
        assert "1:1" in mirror.get_label() and "0" in refs["ref-zero"].get_label()
        assert list(refs["ref-zero"].get_ydata()) == [0, 0]


def test_legends_lie_outside_the_axes(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = capture(monkeypatch, audit_plot)
    write_audit_plot(report, tmp_path / "audit.png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figures[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    drawn = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert drawn
    for ax in drawn:
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(ax.get_window_extent(renderer))
        assert legend.y1 <= ax.get_window_extent(renderer).y0


def _with_every_remedy(panels: int) -> AuditReport:
    """Return an analysed report of ``panels`` set-ups, each with every remedy that applies to it."""
    from l0mem.audit.remedies import ALL_SETUPS, KNOWN_REMEDIES

    runs = []
    for i, setup in enumerate(ALL_SETUPS[:panels]):
        # Set-ups alternately simulated: the longest title the figure can have.
        runs.append(synthetic_run(1.0, setup=setup, simulated=i % 2 == 0))
        runs += [
            synthetic_run(0.0, setup=setup, remedy=r.name, env=dict(r.env), seed=k + 2)
            for k, r in enumerate(KNOWN_REMEDIES)
            if r.applies_to(setup)
        ]
    return analyze_report(synthetic_report(runs))


@pytest.mark.parametrize("panels", range(1, 7))
def test_every_legend_and_text_lies_inside_the_saved_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, panels: int
) -> None:
    # The fault seen: with --remedies adding panels, the legends ran off the image's sides.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    figures = capture(monkeypatch, audit_plot)
    report = _with_every_remedy(panels)
    write_audit_plot(report, tmp_path / "audit.png")
    fig = figures[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    image = fig.bbox
    panel_axes = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert len(panel_axes) == panels  # every panel has its legend
    legends = [ax.get_legend() for ax in panel_axes] + list(fig.legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert image.x0 <= box.x0 and box.x1 <= image.x1, (panels, box, image)
        assert image.y0 <= box.y0 and box.y1 <= image.y1, (panels, box, image)
        for ax in panel_axes:  # never over the data
            assert not box.overlaps(ax.get_window_extent(renderer))
    # Everything drawn (tick labels included) inside the image, in inches as saved.
    drawn = fig.get_tightbbox(renderer)
    width, height = fig.get_size_inches()
    assert drawn.x0 >= 0 and drawn.y0 >= 0, (panels, drawn)
    assert drawn.x1 <= width and drawn.y1 <= height, (panels, drawn, width, height)
    texts: list[Text] = [*fig.texts, *(t for lg in legends for t in lg.get_texts())]
    for ax in panel_axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
    for text in texts:
        box = text.get_window_extent(renderer)
        inside = image.x0 <= box.x0 and box.x1 <= image.x1 and image.y0 <= box.y0
        assert inside and box.y1 <= image.y1, (panels, text.get_text(), box, image)
    # Each run is named in its panel's legend, whole, its fitted slope with it.
    shown = " ".join(t.get_text() for lg in legends for t in lg.get_texts()).replace("\n", " ")
    for run in report.runs:
        assert f"{run.remedy or 'no remedy'}: {run.result.verdict}" in shown  # type: ignore[union-attr]
    # The data keep a readable share of the image: the legends did not squeeze the axes away.
    for ax in panel_axes:
        assert ax.get_window_extent(renderer).height >= 2.0 * fig.dpi


def _climbing_twice(shift_mib: int) -> list[Sample]:
    """Two climbs of 4 x 256 MiB, clean, while a neighbour frees ``shift_mib`` between them."""
    out: list[Sample] = []
    avail = 20 * GIB

    def snap(phase: str, device: int) -> None:
        out.append(Sample(0.1 * len(out), phase, device, {"meminfo.MemAvailable": avail}))  # type: ignore[arg-type]

    for _ in range(3):
        snap("idle", 0)
    for k in (1, 2, 3, 4, 3, 2, 1):
        snap("alloc", k * 256 * MIB)
    avail += shift_mib * MIB  # another process gives back memory while nothing is held
    for _ in range(2):
        snap("freed", 0)
    for k in (1, 2, 3, 4):
        snap("alloc", k * 256 * MIB)
    snap("freed", 0)
    return out


def test_each_climb_is_drawn_from_its_own_start() -> None:
    # The fault seen: later climbs drawn from the first idle samples sat -750 MiB down.
    climbs = climbs_of(_climbing_twice(750), "meminfo.MemAvailable")
    assert len(climbs) == 2
    first, second = climbs
    assert [y for _, y in first.base] == [0.0, 0.0, 0.0]
    assert [x for x, _ in first.up] == [0.25, 0.5, 0.75, 1.0]
    assert [x for x, _ in first.down] == [0.75, 0.5, 0.25]
    # The free after the first climb stays on its zero: the neighbour shows there, once.
    assert [y for _, y in first.freed] == [-750.0, -750.0]
    assert all(y == 0.0 for _, y in second.up) and second.base  # no -750 on every point
    assert [y for _, y in second.freed] == [0.0]


def test_several_climbs_get_the_analysis_slope_through_the_drawn_costs() -> None:
    climbs = climbs_of(_climbing_twice(750), "meminfo.MemAvailable")
    # An intercept on the first idle samples' zero: meaningless for climbs drawn from their own.
    fit = SignalFit(
        "meminfo.MemAvailable", "host", 8, 2.0, -700.0, None, None, None, None, 1.0, 0.0, 0.0
    )
    assert fitted_line(fit, climbs) == (-1.25, 2.0)  # the median of y - 2x, x up
    assert fitted_line(fit, climbs[:1]) == (-700.0, 2.0)


def _busy_free(ratio: float, far_mib: int) -> SetupRun:
    """Return a run climbing 8 x 256 MiB at ``ratio`` while a neighbour moves ``far_mib`` as it frees."""
    samples: list[Sample] = []
    avail = 20 * GIB

    def snap(phase: str, device: int, shift: float = 0.0) -> None:
        held = int(ratio * device)
        values = {"meminfo.MemAvailable": avail - held + int(shift * MIB)}
        samples.append(Sample(0.1 * len(samples), phase, device, values))  # type: ignore[arg-type]

    for _ in range(4):
        snap("idle", 0)
    for k in range(1, 9):
        snap("alloc", k * 256 * MIB)
    # Freed step by step while another process gives back (or takes) memory, then after free.
    for k in range(7, 0, -1):
        snap("alloc", k * 256 * MIB, far_mib * (8 - k) / 7)
    for _ in range(3):
        snap("freed", 0, far_mib)
    return dataclasses.replace(synthetic_run(ratio), samples=samples)


@pytest.mark.parametrize("far_mib", [1900, 5000, -5000])
@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_the_y_axis_is_set_by_the_climb_and_the_fit_not_by_the_free_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ratio: float, far_mib: int
) -> None:
    # On a busy machine the freed samples reached -1900 MiB: the axis stretched and the climb
    # was squashed into a sliver. The limits hold the climb and the fits, the rest is marked.
    figures = capture(monkeypatch, audit_plot)
    report = analyze_report(synthetic_report([_busy_free(ratio, far_mib)]))
    write_audit_plot(report, tmp_path / "audit.png")
    (ax,) = [a for a in figures[0].axes if a.lines]
    low, high = ax.get_ylim()
    (run,) = report.runs
    signal = plot_signal(report, run)
    assert signal is not None
    climbs = climbs_of(run.samples, signal)
    climbing = [y for k, c in enumerate(climbs) for _, y in (c.base if k == 0 else []) + c.up]
    fits = [y for ln in ax.lines if ln.get_gid() == "fit" for y in ln.get_ydata()]
    for y in climbing + fits:
        assert low <= y <= high, (y, low, high)
    loose = [y for c in climbs for _, y in c.down + c.freed]
    far = -far_mib  # the cost: memory given back by another process reads as a negative cost
    assert far in loose and not low <= far <= high, (far, low, high)
    # No wider than the climb, the fits and the references (0, the 1:1 line) with a margin.
    top = max(x for c in climbs for x, _ in c.up)
    held = [*climbing, *fits, 0.0, FULL_MIRROR * top]
    margin = 0.1 * (max(held) - min(held))
    assert min(held) - margin <= low and high <= max(held) + margin, (low, high, held)
    # What lies off the axis is marked at its edge and counted.
    off = [y for y in loose if not low <= y <= high]
    marks = [ln for ln in ax.lines if ln.get_gid() == "off-scale"]
    assert sum(len(ln.get_ydata()) for ln in marks) == len(off)
    for ln in marks:
        assert all(y in (low, high) for y in ln.get_ydata())
    notes = [t.get_text() for t in ax.texts]
    assert any(f"{len(off)} points off scale" in n for n in notes), notes


def test_svg_labels_and_simulator(tmp_path: Path, report: AuditReport) -> None:
    path = tmp_path / "audit.SVG"
    write_audit_plot(_simulated(report), path)
    assert ET.parse(path).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    text = path.read_text()
    assert "Host memory cost of device allocations (SIMULATOR, not hardware)" in text
    assert "affinity: clean" in text and "no remedy: mirror" in text


def test_svg_marks_only_simulated_setups(tmp_path: Path, report: AuditReport) -> None:
    runs = [
        dataclasses.replace(r, simulated=r.backend == "l0", host_memory=r.setup == "sycl")
        for r in report.runs
    ]
    path = tmp_path / "mixed.svg"
    write_audit_plot(dataclasses.replace(report, fingerprint={"simulated": True}, runs=runs), path)
    text = path.read_text()
    assert "panels marked SIMULATOR" in text
    assert "l0-peer-resident (SIMULATOR)" in text and "l0 (SIMULATOR)" in text
    assert "sycl (SIMULATOR)" not in text
    assert "no remedy: mirror, expected: host memory" in text


def test_plot_of_an_empty_report(tmp_path: Path, report: AuditReport) -> None:
    path = tmp_path / "empty.png"
    write_audit_plot(dataclasses.replace(report, runs=[]), path)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_other_suffixes_are_refused(tmp_path: Path, report: AuditReport) -> None:
    with pytest.raises(ValueError, match=r"must end in \.png or \.svg"):
        write_audit_plot(report, tmp_path / "audit.pdf")
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_says_which_extra(
    tmp_path: Path, report: AuditReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingDependencyError, match=r"l0mem\[plot\]"):
        write_audit_plot(report, tmp_path / "audit.png")
    assert list(tmp_path.iterdir()) == []


def test_a_special_file_is_never_replaced(tmp_path: Path, report: AuditReport) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(ReportWriteError):
        write_audit_plot(report, fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------- p2p


def _p2p(simulated: bool = True) -> P2PResult:
    n = 1 << 20
    fast = Measurement((7000, 8000, 9500), n, "device")
    slow = Measurement((70000, 80000, 95000), n, "host")
    copies = [
        CopyTiming("same_device", 0, 0, n, fast),
        CopyTiming("same_device", 1, 1, n, Measurement((9000,), n, "device")),
        CopyTiming("direct", 0, 1, n, Measurement((20000,), n, "device")),
        CopyTiming("staged", 0, 1, n, slow),
        CopyTiming("direct", 1, 0, n, skipped="no peer access"),
        CopyTiming("staged", 1, 0, n, slow),
    ]
    return P2PResult(
        backend="l0",
        devices=("GPU a", "GPU b"),
        simulated=simulated,
        sizes=(n,),
        reps=3,
        warmup=0,
        peers=(
            PeerInfo(0, 1, True, True, None, None, None, None, "direct", "one context"),
            PeerInfo(1, 0, False, False, None, None, None, None, "staged", "no peer access"),
        ),
        copies=tuple(copies),
    )


def test_p2p_cells_are_the_measured_bandwidth_of_each_pairs_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _p2p()
    figures = capture(monkeypatch, p2p_plot)
    write_p2p_plot(result, tmp_path / "p2p.png")
    grid = pair_grid(result, 1 << 20)
    assert [[c.route for c in row] for row in grid] == [
        ["same_device", "direct"],
        ["staged", "same_device"],
    ]
    for row in grid:
        for c in row:
            timing = result.timing(c.route, c.src, c.dst, 1 << 20)  # type: ignore[arg-type]
            assert timing is not None and timing.measured is not None
            assert c.gbps == timing.measured.gbps
    fig = figures[0]
    (ax,) = [a for a in fig.axes if a.images]
    shown = ax.images[0].get_array()
    assert [[float(shown[i, j]) for j in range(2)] for i in range(2)] == [
        [c.gbps for c in row] for row in grid
    ]
    texts = {(t.get_position()): t.get_text() for t in ax.texts}
    assert texts[(1, 0)] == f"{grid[0][1].gbps:.1f}\ndirect"
    assert texts[(0, 1)] == f"{grid[1][0].gbps:.1f}\nhost-staged"
    assert "SIMULATOR" in fig._suptitle.get_text()


def test_p2p_without_timings_says_why_in_each_cell(tmp_path: Path) -> None:
    result = dataclasses.replace(
        _p2p(simulated=False),
        copies=(CopyTiming("direct", 0, 1, 1 << 20, hung=True),),
    )
    grid = pair_grid(result, 1 << 20)
    assert grid[0][1].gbps is None and grid[0][1].note == "HUNG"
    assert grid[0][0].note == "not measured"
    path = tmp_path / "p2p.svg"
    write_p2p_plot(result, path)
    text = path.read_text()
    assert "HUNG" in text and "SIMULATOR" not in text


def _p2p_of(n: int, sizes: tuple[int, ...]) -> P2PResult:
    """Return a run over ``n`` devices: pairs up direct, pairs down host-staged, 0.4-120 GB/s."""
    copies, peers = [], []
    for k, nbytes in enumerate(sizes):
        for src in range(n):
            for dst in range(n):
                # From 0.4 to 120 GB/s: one to three digits before the point.
                ns = int(nbytes / (0.4 + 119.6 * ((src * n + dst + k) % 7) / 6))
                kinds = ["same_device"] if src == dst else ["direct", "staged"]
                for kind in kinds:
                    copies.append(CopyTiming(kind, src, dst, nbytes, Measurement((ns,), nbytes, "device")))  # type: ignore[arg-type]
    for src in range(n):
        for dst in range(n):
            if src != dst:
                direct = src < dst
                route: Literal["direct", "staged"] = "direct" if direct else "staged"
                peers.append(PeerInfo(src, dst, direct, direct, None, None, None, None, route, ""))
    return P2PResult(
        backend="l0",
        devices=tuple(f"l0mem simulated GPU {i}" for i in range(n)),
        simulated=True,
        sizes=sizes,
        reps=1,
        warmup=0,
        peers=tuple(peers),
        copies=tuple(copies),
    )


@pytest.mark.parametrize("panels", [1, 3])
@pytest.mark.parametrize("n", [2, 3, 4, 6, 8])
def test_every_p2p_cell_label_lies_inside_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, panels: int
) -> None:
    # At 4 devices and more "same device" ran over its cell, cut at the panel's edge ("ame device").
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figures = capture(monkeypatch, p2p_plot)
    sizes = (1 << 20, 16 << 20, 64 << 20)[:panels]  # p2p's default sizes: three panels
    write_p2p_plot(_p2p_of(n, sizes), tmp_path / "p2p.png")
    fig = figures[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    heatmaps = [a for a in fig.axes if a.images]
    assert len(heatmaps) == len(sizes)
    for ax in heatmaps:
        assert len(ax.texts) == n * n
        for text in ax.texts:
            col, row = text.get_position()
            (x0, y0), (x1, y1) = ax.transData.transform([(col - 0.5, row + 0.5), (col + 0.5, row - 0.5)])
            box = text.get_window_extent(renderer)
            inside = x0 - 0.5 <= box.x0 and box.x1 <= x1 + 0.5 and y0 - 0.5 <= box.y0 and box.y1 <= y1 + 0.5
            assert inside, (n, text.get_text(), box, (x0, y0, x1, y1))
            assert text.get_fontsize() >= 4
    # Every route is named in the cells or in a note that says what a short one means.
    shown = " ".join(t.get_text() for ax in heatmaps for t in ax.texts) + " ".join(t.get_text() for t in fig.texts)
    shown += fig._supxlabel.get_text() if fig._supxlabel is not None else ""
    for route in ("same device", "direct", "host-staged"):
        assert route in " ".join(shown.split()).replace("- ", "-"), (n, route)
    # The device names below fit the image too.
    image = fig.bbox
    for text in [fig._supxlabel, fig._suptitle]:
        box = text.get_window_extent(renderer)
        assert image.x0 <= box.x0 and box.x1 <= image.x1, (n, text.get_text(), box, image)


# ---------------------------------------------------------------- matrix


def test_matrix_cells_are_coloured_by_verdict_and_labelled_with_the_median_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = synthetic_report([synthetic_run(1.0, setup="l0")])
    clean = synthetic_report([synthetic_run(0.0, setup="l0"), synthetic_run(0.5, setup="sycl")])
    clean = dataclasses.replace(clean, fingerprint={**clean.fingerprint, "simulated": True})
    clean = dataclasses.replace(
        clean, runs=[dataclasses.replace(r, simulated=True) for r in clean.runs]
    )
    matrices = build([("a.json", mirror), ("b.json", clean)])
    figures = capture(monkeypatch, matrix_plot)
    write_matrix_plot(matrices, tmp_path / "matrix.png")
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.patches]
    assert len(panels) == len(matrices)
    for ax, m in zip(panels, matrices, strict=True):
        patches = {p.get_gid(): p for p in ax.patches}
        for i, stack in enumerate(m.stacks):
            for j, column in enumerate(m.columns):
                cell = m.cells[stack].get(column)
                if cell is None:
                    assert f"cell-{i}-{j}" not in patches
                    continue
                verdict = cell.worst.result.verdict  # type: ignore[union-attr]
                from matplotlib.colors import to_rgba

                assert patches[f"cell-{i}-{j}"].get_facecolor() == to_rgba(VERDICT_COLOURS[verdict])
                ratio = cell_ratio(cell)
                assert ratio is not None
                label = next(t.get_text() for t in ax.texts if t.get_position() == (j, i))
                assert label.splitlines()[:2] == [verdict, f"{ratio:.2f}"]
    titles = [ax.get_title(loc="left") for ax in panels]
    assert any(t.startswith("SIMULATOR, not hardware") for t in titles)
    assert any(t.startswith("hardware") for t in titles)


def test_matrix_of_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.svg"
    write_matrix_plot([], path)
    assert "no audit report" in path.read_text()


# ---------------------------------------------------------------- the commands' --plot


def _command(name: str) -> Any:
    from l0mem.cli.matrix import matrix
    from l0mem.cli.p2p import p2p

    return {"p2p": p2p, "matrix": matrix}[name]


@pytest.mark.parametrize("name", ["p2p", "matrix"])
def test_a_bad_plot_suffix_is_one_usage_line(name: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    args = ["--plot", str(tmp_path / "out.pdf")] + ([str(tmp_path)] if name == "matrix" else [])
    result = CliRunner().invoke(_command(name), args)
    assert result.exit_code == 2
    assert "must end in .png or .svg" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["p2p", "matrix"])
def test_a_plot_without_matplotlib_says_what_to_install(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = ["--plot", str(tmp_path / "out.png")] + ([str(tmp_path)] if name == "matrix" else [])
    result = CliRunner().invoke(_command(name), args)
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == [f"l0mem {name}: --plot needs matplotlib: pip install 'l0mem[plot]'"]


def test_matrix_plot_from_reports_on_disk(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from l0mem.audit.report import write_json
    from l0mem.cli.matrix import matrix

    write_json(
        analyze_report(synthetic_report([synthetic_run(1.0, setup="l0")])), tmp_path / "a.json"
    )
    out = tmp_path / "plots" / "m.svg"
    out.parent.mkdir()
    result = CliRunner().invoke(matrix, [str(tmp_path / "a.json"), "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert "mirror" in out.read_text() and "1.00" in out.read_text()


@pytest.mark.parametrize("raw", ["\x1b]0;pwned\x07", "\x00", "\udce9"], ids=repr)
def test_an_svg_of_any_text_is_valid_xml(tmp_path: Path, raw: str) -> None:
    # A watched command's name reaches the plot's title: with a control character in
    # it the SVG did not parse (matrix stack labels likewise).
    from l0mem.plots import write_watch_plot
    from l0mem.watch.series import Series, WatchSample
    from l0mem.watch.summary import summarize

    gib = 1 << 30
    base = WatchSample(0.0, {"host.available": 32 * gib})
    samples = tuple(
        WatchSample(0.5 * i, {"host.available": 32 * gib - i * gib, "sysman.0.used": i * gib}, 2)
        for i in range(1, 6)
    )
    series = Series(base, samples, {})
    path = tmp_path / "run.svg"
    write_watch_plot(series, summarize(series), path, title=f"l0mem run: job{raw}")
    root = ET.parse(path).getroot()  # parses
    text = "".join(root.itertext())
    assert "l0mem run: job\\" in text and raw not in text, text[:200]


@pytest.mark.parametrize("ratio", [-0.004, -0.0001, -1e-12, 0.0, 0.004, -0.006])
def test_a_matrix_cell_near_zero_has_no_signed_zero(ratio: float) -> None:
    (m,) = build([("a.json", synthetic_report([synthetic_run(ratio, setup="l0")]))])
    (cell,) = [c for row in m.cells.values() for c in row.values()]
    shown = cell_label(cell).splitlines()[1]
    assert shown != "-0.00"
    assert float(shown) == pytest.approx(cell_ratio(cell), abs=0.005)
