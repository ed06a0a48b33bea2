"""docs/report-schema.md against the code it documents: priority, signals, fingerprint."""

from __future__ import annotations

import re
from pathlib import Path

from l0mem.audit.model import DEFAULT_PRIORITY
from l0mem.audit.runner import build_fingerprint
from l0mem.audit.setups import Inventory
from l0mem.driverenv import RECORDED_NAMES, RECORDED_PREFIXES

DOC = (Path(__file__).resolve().parent.parent / "docs" / "report-schema.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end >= 0 else None]


def test_default_priority_is_the_one_in_the_code() -> None:
    m = re.search(r"Default priority \(`DEFAULT_PRIORITY`[^)]*\):\n(.*?)\.\n", DOC, re.DOTALL)
    assert m is not None, "the default priority paragraph is missing"
    listed = re.findall(r"`([^`]+)`", m.group(1))
    assert tuple(listed) == DEFAULT_PRIORITY


def test_every_signal_source_and_derived_signal_is_documented() -> None:
    for name in ("host.available", "zoneinfo.pcp_free", "drm.all.host.<key>"):
        assert f"`{name}`" in DOC, name
    assert "cannot show that a run is clean" in DOC or "never clean" in DOC
    # The per-CPU list rule: MemAvailable and MemFree cannot decide "clean" then.
    rule = _section("`runs[].result` (`SetupAnalysis`)")
    assert "`zoneinfo.pcp_free` was recorded" in rule
    assert "`meminfo.MemAvailable` and `meminfo.MemFree`" in rule


def test_released_is_documented_as_null_for_clean_runs() -> None:
    row = next(ln for ln in DOC.splitlines() if ln.startswith("| `released` |"))
    assert "null for a `clean` verdict" in row


def test_every_fingerprint_key_the_runner_writes_is_documented() -> None:
    inventory = Inventory([], "none", {}, [], "none", {})
    fingerprint = build_fingerprint(inventory)
    section = _section("Fingerprint")
    for key, value in fingerprint.items():
        assert f"| `{key}` |" in section, key
        if key == "environment":
            # Its keys are variable names: the doc names the prefixes and names taken.
            row = next(ln for ln in section.splitlines() if ln.startswith("| `environment` |"))
            for taken in (*RECORDED_PREFIXES, *RECORDED_NAMES):
                assert f"`{taken}`" in row, taken
            continue
        if isinstance(value, dict):
            for sub in value:
                assert f"`{sub}`" in section, f"{key}.{sub}"
