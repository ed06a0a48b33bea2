"""docs/watch-schema.md against the document l0mem run/watch --json writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from l0mem.estimate import DEFAULT_CONFIG
from l0mem.watch.engine import FloorStop, WatchResult
from l0mem.watch.export import SCHEMA, document
from l0mem.watch.series import Series, WatchSample
from l0mem.watch.summary import summarize

DOC = (Path(__file__).resolve().parent.parent / "docs" / "watch-schema.md").read_text()
GIB = 1 << 30


def _section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end >= 0 else None]


def _document() -> dict[str, Any]:
    base = WatchSample(0.0, {"host.available": 8 * GIB})
    samples = tuple(
        WatchSample(
            0.5 * i,
            {"host.available": 8 * GIB - i * GIB, "drm.0000:10:00.0.vram0.total": i * GIB},
            1,
        )
        for i in range(5)
    )
    result = WatchResult(
        Series(base, samples, {"cgroup": "no cgroup v2"}),
        -15,
        FloorStop(2.0, 4 * GIB, 3 * GIB, "SIGTERM", False),
        None,
        None,
    )
    return document(
        result,
        summarize(result.series),
        mode="run",
        command=["true"],
        pid=None,
        options={"interval": 0.5, "host_floor": 3 * GIB, "grace": 5.0},
        config=DEFAULT_CONFIG,
    )


def test_the_schema_version_is_the_one_written() -> None:
    assert DOC.startswith(f"# Watch report schema (`{SCHEMA}`)")
    assert _document()["schema"] == SCHEMA


def test_every_field_written_is_documented() -> None:
    data = _document()
    top = _section("Top level")
    for key in data:
        assert f"| `{key}` |" in top, key
    for key in data["exit"]:
        assert f"`{key}`" in top, f"exit.{key}"
    for key in data["floor_stop"]:
        assert f"`{key}`" in top, f"floor_stop.{key}"
    sample = _section("`baseline`, `samples[]`")
    for key in data["baseline"]:
        assert f"| `{key}` |" in sample, key
    summary = _section("Summary")
    fields = data["summary"]
    assert isinstance(fields, dict)
    for key in fields:
        assert f"| `{key}` |" in summary, key
    for key in fields["peaks"]:
        assert f"`{key}`" in summary, f"peaks.{key}"
    for key in fields["devices"][0]:
        assert f"`{key}`" in summary, f"devices[].{key}"
    for key in fields["peaks"]["host_cost"]:
        assert f"`{key}`" in summary, f"Peak.{key}"


def _follow_default() -> str:
    from l0mem.cli.run import run

    (option,) = [p for p in run.params if p.name == "follow"]
    return str(option.default)


def test_every_page_says_follow_sets_how_long_outliving_processes_are_followed() -> None:
    # `run --follow SECONDS|all` sets it (10 by default; all: until every one ends);
    # a page that gives a fixed 10 s tells the user of --follow all the wrong bound.
    default = _follow_default()
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "run-watch.md").read_text()
    (exit_row,) = [ln for ln in DOC.splitlines() if ln.startswith("| `exit` |")]
    outlived = exit_row[exit_row.index("`outlived`") :]
    paragraphs = [p for p in guide.split("\n\n") if "outlive" in p]
    assert paragraphs
    for text in [outlived, *paragraphs]:
        flat = " ".join(text.split())
        assert "`--follow`" in flat or "`--follow " in flat, flat
        assert f"{default} by default" in flat and "all" in flat, flat
        assert "or 10 s passed" not in flat
