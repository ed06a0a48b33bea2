"""``l0mem compare --plot``: the dumbbell chart of two reports' deciding slopes, and the command's option."""

from __future__ import annotations

import dataclasses
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from l0mem.audit.compare import Comparison, RunChange, compare_reports
from l0mem.cli.compare import compare
from l0mem.estimate import AnalysisConfig
from l0mem.plots import compare as compare_plot
from l0mem.plots import write_compare_plot
from l0mem.plots.compare import REGRESSION_COLOUR
from l0mem.plots.figure import DPI, FULL_MIRROR, REFERENCE_ZORDER
from tests.support.cli import run_l0mem
from tests.support.plots import capture
from tests.test_analysis import synthetic_report, synthetic_run

DATA = Path(__file__).parent / "data" / "reports"
BASELINE = DATA / "baseline.json"
SVG = "{http://www.w3.org/2000/svg}"


def _change(
    setup: str,
    before: float | None,
    now: float | None,
    verdicts: tuple[str | None, str | None],
    *,
    regression: bool = False,
    judged: bool = True,
    note: str = "",
    remedy: str | None = None,
) -> RunChange:
    return RunChange(
        setup=setup,
        remedy=remedy,
        baseline_status="ok",
        current_status="ok" if verdicts[1] is not None else "failed",
        baseline_verdict=verdicts[0],
        current_verdict=verdicts[1],
        baseline_signal="meminfo.MemAvailable",
        current_signal="meminfo.MemAvailable",
        baseline_slope=before,
        current_slope=now,
        regression=regression,
        note=note,
        judged=judged,
    )


# Row 0 regressed, 1 improved, 2 has no verdict before (and fails), 3 lost its slope
# (not judged: --allow-unjudged), 4 did not move.
CHANGES = [
    _change("l0", 2.0, 1030.0, ("clean", "mirror"), regression=True, note="verdict worse"),
    _change("sycl", 512.0, 300.0, ("partial", "partial")),
    _change(
        "sycl-single",
        None,
        700.0,
        ("inconclusive", "partial"),
        regression=True,
        judged=False,
        note="not judged: the baseline run has no verdict (inconclusive) -> partial",
    ),
    _change(
        "l0-multi",
        40.0,
        None,
        ("clean", None),
        note="not judged: current run failed (DEVICE_LOST)",
    ),
    _change("sycl", 5.0, 5.4, ("clean", "clean"), remedy="affinity"),
]


def _comparison(**kw: Any) -> Comparison:
    fields: dict[str, Any] = {
        "slope_tolerance": 64.0,
        "changes": CHANGES,
        "missing": [],
        "new": [],
        "simulated": False,
    }
    return Comparison(**{**fields, **kw})


def _drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any]:
    figures = capture(monkeypatch, compare_plot)
    write_compare_plot(_comparison(**kw), tmp_path / "compare.png")
    (fig,) = figures
    (ax,) = fig.axes
    return fig, ax


def _by_gid(ax: Any) -> dict[str, Any]:
    artists = [*ax.lines, *ax.patches]
    return {a.get_gid(): a for a in artists if a.get_gid() is not None}


def _svg_groups(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g")}


def _styles(group: ET.Element) -> str:
    return " ".join(e.get("style", "") for e in group.iter())


def _svg_text(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def _row_labels(path: Path) -> list[str]:
    """Return the row labels of a compare plot's SVG (the y axis's tick labels), lines joined."""
    groups = _svg_groups(path)
    ticks = [g for gid, g in groups.items() if gid.startswith("ytick_")]
    return ["\n".join("".join(t.itertext()) for t in g.iter(f"{SVG}text")) for g in ticks]


# ---------------------------------------------------------------- the figure


def test_one_row_per_common_run_in_order_with_verdicts_and_what_the_rule_made_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ax = _drawn(tmp_path, monkeypatch, missing=[("gone", None)], new=[("fresh", "x")])
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [lbl.splitlines()[0] for lbl in labels] == [c.label for c in CHANGES]
    assert list(ax.get_yticks()) == list(range(len(CHANGES)))
    assert labels[0].splitlines()[1:] == ["clean -> mirror", "REGRESSION"]
    assert labels[1].splitlines()[1:] == ["partial -> partial"]  # better, nothing to flag
    assert labels[2].splitlines()[2] == "REGRESSION, not judged, no verdict before"
    assert labels[3].splitlines()[1:] == ["clean -> failed", "not judged, no verdict now"]
    # Runs in one report only are named above the rows, never drawn as one.
    assert "gone" not in labels and "only in the baseline: gone" in ax.get_title(loc="left")
    assert "only in the current report: fresh [x]" in ax.get_title(loc="left")


def test_markers_sit_at_the_slopes_joined_by_an_arrow_from_before_to_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ax = _drawn(tmp_path, monkeypatch)
    drawn = _by_gid(ax)
    for i, c in enumerate(CHANGES):
        for side, slope in (("before", c.baseline_slope), ("now", c.current_slope)):
            if slope is None:
                assert f"{side}-{i}" not in drawn
                continue
            marker = drawn[f"{side}-{i}"]
            assert (list(marker.get_xdata()), list(marker.get_ydata())) == ([slope], [i])
    # Before and now differ in shape, so that a reader tells them apart without colour.
    assert drawn["before-0"].get_marker() != drawn["now-0"].get_marker()
    assert drawn["before-0"].get_markerfacecolor() == "none"  # hollow: a coinciding now shows
    # The arrow points from before to now, whichever way the slope went.
    assert drawn["arrow-0"]._posA_posB == [(2.0, 0), (1030.0, 0)]
    assert drawn["arrow-1"]._posA_posB == [(512.0, 1), (300.0, 1)]
    # One marker alone has nothing to join; a slope that did not move has no arrow either.
    assert not {"arrow-2", "arrow-3", "arrow-4"} & set(drawn)
    assert {"before-4", "now-4"} <= set(drawn)
    numbers = [t.get_text() for t in ax.texts]
    assert numbers == ["2 -> 1030 (+1028)", "512 -> 300 (-212)", "700", "40", "5 -> 5 (0)"]


def test_a_negative_slope_near_zero_is_shown_as_0_not_minus_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changes = [_change("l0", -0.3, 1024.0, ("clean", "mirror"), regression=True)]
    _, ax = _drawn(tmp_path, monkeypatch, changes=changes)
    assert [t.get_text() for t in ax.texts] == ["0 -> 1024 (+1024)"]


def test_regression_rows_are_red_and_the_others_are_not(tmp_path: Path) -> None:
    path = tmp_path / "compare.svg"
    write_compare_plot(_comparison(), path)
    groups = _svg_groups(path)
    red = REGRESSION_COLOUR.lower()
    for i, c in enumerate(CHANGES):
        styles = " ".join(
            _styles(groups[f"{side}-{i}"]) for side in ("before", "now") if f"{side}-{i}" in groups
        )
        assert styles, i
        assert (red in styles) == c.regression, (i, styles)
    assert red in _styles(groups["arrow-0"]) and red not in _styles(groups["arrow-1"])
    # The labels too: a regression reads in red, and says so in words.
    texts = list(_svg_groups(path)["matplotlib.axis_2"].iter(f"{SVG}text"))
    assert len(_row_labels(path)) == len(CHANGES)
    flagged = [t for t in texts if "REGRESSION" in "".join(t.itertext())]
    assert len(flagged) == 2 and all(red in t.get("style", "") for t in flagged)
    ok = [t for t in texts if "".join(t.itertext()).startswith("partial -> partial")]
    assert ok and red not in ok[0].get("style", "")


def test_unjudged_rows_are_grey_not_red_nor_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.colors import to_hex

    _, ax = _drawn(tmp_path, monkeypatch)
    colours = [to_hex(t.get_color()) for t in ax.get_yticklabels()]
    assert colours[0] == colours[2] == REGRESSION_COLOUR
    assert colours[3] == compare_plot.UNJUDGED_COLOUR
    assert colours[1] == colours[4] == compare_plot.OK_COLOUR
    assert len({colours[0], colours[1], colours[3]}) == 3


def test_the_1_to_1_reference_is_drawn_over_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ax = _drawn(tmp_path, monkeypatch)
    drawn = _by_gid(ax)
    ref = drawn["ref-mirror"]
    assert list(ref.get_xdata()) == [FULL_MIRROR, FULL_MIRROR]
    assert ref.get_zorder() == REFERENCE_ZORDER and "1:1" in ref.get_label()
    data = [a for gid, a in drawn.items() if gid.split("-")[0] in ("before", "now", "arrow")]
    assert len(data) == 10  # 3 + 3 + 1 + 1 + 2: rows without a slope or a move have fewer
    assert max(a.get_zorder() for a in data) < ref.get_zorder()
    # And so in the file: the reference is painted after every marker and arrow.
    path = tmp_path / "compare.svg"
    write_compare_plot(_comparison(), path)
    order = list(_svg_groups(path))
    marks = [n for n in order if n.split("-")[0] in ("before", "now", "arrow")]
    assert len(marks) == 10 and order.index("ref-mirror") > max(order.index(n) for n in marks)


# Slopes at or around the 1:1 line (1024 MiB/GiB), before and now, whose numbers were
# drawn centred on the point: the dotted line ran through "1025 -> 1024 (-1)".
NEAR_MIRROR = [
    (1025.0, 1024.0),
    (1024.0, 1025.0),
    (1024.0, 1024.0),
    (1020.0, 1030.0),
    (1030.0, 1020.0),
    (990.0, 1012.0),
    (1060.0, 1036.0),
    (None, 1024.0),
    (1023.0, None),
]


@pytest.mark.parametrize("rows", [1, 3, len(NEAR_MIRROR)])
@pytest.mark.parametrize("first", range(len(NEAR_MIRROR)))
def test_no_number_is_drawn_across_the_1_to_1_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: int, rows: int
) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    pairs = (NEAR_MIRROR[first:] + NEAR_MIRROR[:first])[:rows]
    changes = [
        _change(f"run{i}", before, now, ("mirror" if before else None, "mirror" if now else None))
        for i, (before, now) in enumerate(pairs)
    ]
    fig, ax = _drawn(tmp_path, monkeypatch, changes=changes)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    line = ax.transData.transform((FULL_MIRROR, 0))[0]
    frame = ax.get_window_extent(renderer)
    assert len(ax.texts) == len(changes)
    for text, (before, now) in zip(ax.texts, pairs, strict=True):
        box = text.get_window_extent(renderer)
        assert not box.x0 - 2 <= line <= box.x1 + 2, (text.get_text(), box, line)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (text.get_text(), box, frame)
        # Beside its point still: the label's near edge is within its own width of it.
        point = ax.transData.transform((now if now is not None else before, 0))[0]
        assert min(abs(box.x0 - point), abs(box.x1 - point)) <= box.width + 4, (text.get_text(), box, point)


def test_verdict_zones_follow_the_analysis_thresholds_behind_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def zone_edges(ax: Any) -> dict[str, tuple[float, float]]:
        inv = ax.transData.inverted()
        out = {}
        for gid, patch in _by_gid(ax).items():
            if gid.startswith("zone-"):
                box = patch.get_extents()
                out[gid] = (inv.transform((box.x0, 0))[0], inv.transform((box.x1, 0))[0])
        return out

    config = AnalysisConfig()
    clean, mirror = config.clean_threshold * 1024, config.mirror_threshold * 1024
    assert (clean, mirror) == pytest.approx((102.4, 768.0))
    _, ax = _drawn(tmp_path, monkeypatch)
    edges = zone_edges(ax)
    lo, hi = ax.get_xlim()
    assert edges["zone-clean"] == pytest.approx((lo, clean))
    assert edges["zone-partial"] == pytest.approx((clean, mirror))
    assert edges["zone-mirror"] == pytest.approx((mirror, hi))
    zones = [p for p in ax.patches if str(p.get_gid()).startswith("zone-")]
    assert all(0 < p.get_alpha() <= 0.2 for p in zones)  # lightly
    assert max(p.get_zorder() for p in zones) < min(ln.get_zorder() for ln in ax.lines)
    # Taken from the analysis's configuration, not written down twice.
    other = dataclasses.replace(config, clean_threshold=0.25, mirror_threshold=0.5)
    monkeypatch.setattr(compare_plot, "AnalysisConfig", lambda: other)
    _, ax = _drawn(tmp_path, monkeypatch)
    assert zone_edges(ax)["zone-partial"] == pytest.approx((256.0, 512.0))


def test_the_legend_lies_outside_the_axes_and_inside_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig, ax = _drawn(tmp_path, monkeypatch)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    assert ax.get_legend() is None
    (legend,) = fig.legends
    box, axes = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert not box.overlaps(axes) and box.y1 <= axes.y0
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # not cut off at the sides
    labels = [t.get_text() for t in legend.get_texts()]
    for wanted in ("baseline (before)", "current (now)", "REGRESSION", "not judged"):
        assert wanted in labels
    assert "1:1 mirror (1024 MiB per GiB)" in labels
    assert "clean: below 102.4" in labels and "mirror: 768 and above" in labels


@pytest.mark.parametrize(
    ("simulated", "no_hardware", "suffix"),
    [
        (False, False, ""),
        (True, False, " (SIMULATOR, not hardware)"),
        (False, True, " (NO HARDWARE: the GPU driver executed nothing)"),
    ],
)
def test_the_title_names_the_tolerance_and_the_simulator(
    tmp_path: Path, simulated: bool, no_hardware: bool, suffix: str
) -> None:
    path = tmp_path / "compare.svg"
    write_compare_plot(
        _comparison(simulated=simulated, no_hardware=no_hardware, slope_tolerance=32.5), path
    )
    title = "l0mem compare: deciding slope before -> now (tolerance +32.5 MiB/GiB)"
    assert title + suffix in _svg_text(path)


def test_width_10_inches_and_height_growing_with_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    few, _ = _drawn(tmp_path, monkeypatch, changes=CHANGES[:1])
    many, _ = _drawn(tmp_path, monkeypatch, changes=CHANGES * 4)
    assert few.get_size_inches()[0] == many.get_size_inches()[0] == 10.0
    assert many.get_size_inches()[1] > few.get_size_inches()[1] + 0.5 * 15
    data = (tmp_path / "compare.png").read_bytes()  # the last one written: 20 rows
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width == 10 * DPI and height == round(many.get_size_inches()[1] * DPI)


def test_a_comparison_of_real_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = synthetic_report(
        [synthetic_run(0.0, setup="l0"), synthetic_run(0.0, setup="x", noise_mib=500.0, seed=4)]
    )
    after = synthetic_report([synthetic_run(1.0, setup="l0"), synthetic_run(1.0, setup="x")])
    comparison = compare_reports(before, after)
    assert comparison.changes[1].baseline_slope is None  # inconclusive: no deciding slope
    figures = capture(monkeypatch, compare_plot)
    write_compare_plot(comparison, tmp_path / "real.svg")
    drawn = _by_gid(figures[0].axes[0])
    assert {"before-0", "now-0", "arrow-0", "now-1"} <= set(drawn)
    assert "before-1" not in drawn and "arrow-1" not in drawn
    assert drawn["now-1"].get_xdata()[0] == pytest.approx(1024.0, abs=1)


def test_nothing_in_common_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.svg"
    write_compare_plot(_comparison(changes=[], missing=[("l0", None)]), path)
    texts = _svg_text(path)
    assert "no run in both reports" in texts
    assert not any(g.startswith(("before-", "now-")) for g in _svg_groups(path))


# ---------------------------------------------------------------- l0mem compare --plot


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(compare, [str(a) for a in args])


@pytest.mark.parametrize(
    ("current", "code"), [("current-same.json", 0), ("current-regressed.json", 1)]
)
def test_the_plot_is_written_on_success_and_on_a_regression(
    tmp_path: Path, current: str, code: int
) -> None:
    out = tmp_path / "cmp.png"
    result = _run(BASELINE, DATA / current, "--plot", out, "--json", tmp_path / "cmp.json")
    assert result.exit_code == code, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "cmp.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp.json", "cmp.png"]  # no leftovers


def test_the_svg_of_a_regression_flags_the_runs_that_regressed(tmp_path: Path) -> None:
    out = tmp_path / "cmp.svg"
    result = _run(BASELINE, DATA / "current-regressed.json", "--plot", out)
    assert result.exit_code == 1, result.output
    rows = [label.splitlines() for label in _row_labels(out)]
    assert [r[0] for r in rows] == ["l0", "sycl", "sycl-single", "l0-multi", "sycl [affinity]"]
    # l0 and sycl-single, as the table says.
    assert [r[0] for r in rows if "REGRESSION" in r[-1]] == ["l0", "sycl-single"]


def test_no_run_in_common_writes_no_plot(tmp_path: Path) -> None:
    out = tmp_path / "cmp.png"
    result = _run(BASELINE, DATA / "other-setups.json", "--plot", out)
    assert result.exit_code == 5
    assert "no set-up run in common" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_plot_that_is_not_png_or_svg_is_refused_before_the_reports_are_read(
    tmp_path: Path,
) -> None:
    # The reports do not exist: reading them would be exit 4.
    result = _run(tmp_path / "a.json", tmp_path / "b.json", "--plot", tmp_path / "x.txt")
    assert result.exit_code == 2, result.output
    assert "must end in .png or .svg" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("which", ["BASELINE", "CURRENT"])
def test_a_plot_over_an_input_is_refused(tmp_path: Path, which: str) -> None:
    # A report may be named anything: one called *.svg is still an input.
    report = tmp_path / "report.svg"
    report.write_bytes(BASELINE.read_bytes())
    pair = [report, BASELINE] if which == "BASELINE" else [BASELINE, report]
    result = _run(*pair, "--plot", report)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"l0mem compare: error: --plot {report} is also {which}: give another path\n"
    )
    assert report.read_bytes() == BASELINE.read_bytes()


def test_a_plot_over_the_json_output_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cmp.svg").symlink_to(tmp_path / "cmp.json")
    result = _run(
        BASELINE, BASELINE, "--json", tmp_path / "cmp.json", "--plot", tmp_path / "cmp.svg"
    )
    assert result.exit_code == 2, result.output
    assert "--plot" in result.stderr and "is also --json" in result.stderr
    assert not (tmp_path / "cmp.json").exists()


def test_an_unwritable_plot_is_exit_4_before_the_reports_are_read(tmp_path: Path) -> None:
    result = _run(tmp_path / "a.json", tmp_path / "b.json", "--plot", tmp_path / "no" / "c.png")
    assert result.exit_code == 4, result.output
    assert "a.json" not in result.stderr and "c.png" in result.stderr


def test_without_matplotlib_the_plot_is_a_usage_error_before_the_reports_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = _run(tmp_path / "a.json", tmp_path / "b.json", "--plot", tmp_path / "c.png")
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == ["l0mem compare: error: --plot needs matplotlib: pip install 'l0mem[plot]'"]
    assert list(tmp_path.iterdir()) == []


def test_help_describes_the_plot() -> None:
    result = CliRunner().invoke(compare, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--plot PATH" in text and "regressions in red; written on a regression too" in text


def test_the_installed_command_writes_the_plot_of_a_regression(tmp_path: Path) -> None:
    out = tmp_path / "cmp.svg"
    proc = run_l0mem(
        "compare",
        [str(BASELINE), str(DATA / "current-regressed.json"), "--plot", str(out)],
        dict(os.environ),
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "2 regression(s)" in proc.stdout
    assert "l0mem compare: deciding slope before -> now (tolerance +64 MiB/GiB)" in _svg_text(out)
