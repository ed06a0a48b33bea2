"""A report whose strings hold lone surrogates (``"\\ud800"``: valid JSON, no character).

JSON may escape half of a UTF-16 pair on its own; Python reads it as a lone
surrogate, which no UTF-8 output can carry: ``matrix`` ended with exit 70 and
a UnicodeEncodeError traceback in every format, ``compare`` printed it. Every
reader turns each lone surrogate into U+FFFD (the replacement character) as
it loads the file; an escaped pair stays the character it encodes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_l0mem
from tests.test_analysis import synthetic_report, synthetic_run

# Lone halves (high, low, the ends of each range), pairs, and text around them.
POOL = [
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
    "\udcff",
    "\ud83d",
    "\ude00",
    "\U0001f600",
    "\U00010000",
    "a",
    "\\",
    '"',
    "é",
    "\ufffd",
    " ",
    "u",
    "d800",
]


def _expected(text: str) -> str:
    """Return ``text`` as a UTF-16 reader sees it: adjacent halves one character, lone ones U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in [k, *_strings(v)]]
    return []


@pytest.mark.parametrize("seed", range(200))
def test_every_lone_surrogate_reads_as_the_replacement_and_pairs_stay(
    seed: int, tmp_path: Path
) -> None:
    from l0mem.audit.loading import load_json_data

    rng = random.Random(seed)
    texts = ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 12))) for _ in range(4)]
    data = {
        "schema": "x",
        texts[0]: [texts[1], {"k": texts[2]}],
        "n": 1,
        "deep": {"deeper": [[texts[3]]]},
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))  # ensure_ascii: every surrogate as a \u escape
    loaded = load_json_data(path)
    assert loaded == {
        "schema": "x",
        _expected(texts[0]): [_expected(texts[1]), {"k": _expected(texts[2])}],
        "n": 1,
        "deep": {"deeper": [[_expected(texts[3])]]},
    }
    for s in _strings(loaded):
        s.encode("utf-8")  # every string can be written


def test_text_without_a_surrogate_escape_is_read_as_it_was() -> None:
    from l0mem.text import whole_text

    for text in ("", "abc", "é\U0001f600\ufffd", "\\ud800 as written"):
        assert whole_text(text) == text
    assert whole_text("a\ud800b\udfff") == "a\ufffdb\ufffd"


# Where a lone surrogate may stand in an audit report that every command reads.
PLACES = ("environment value", "environment name", "driver version", "machine id", "reason")


def _hostile_report(path: Path, place: str, text: str, ratio: float) -> Path:
    runs = [synthetic_run(ratio)]
    data = synthetic_report(runs).to_dict()
    env: dict[str, str] = {}
    fp: dict[str, Any] = {
        "simulated": False,
        "host": {"kernel_release": "6.8.0", "machine_id": "m1"},
        "compute_runtime": {"driver_versions": ["26.05.1"]},
        "environment": env,
    }
    if place == "environment value":
        env["X"] = text
    elif place == "environment name":
        env[text] = "1"
    elif place == "driver version":
        fp["compute_runtime"]["driver_versions"] = [text]
    elif place == "machine id":
        fp["host"]["machine_id"] = text
    else:
        data["runs"][0]["reason"] = text
    data["fingerprint"] = fp
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("text", ["\ud800", "v\udcff\udcfe", "\ude00\ud83d", "\ud83d\ude00\udbff"])
def test_matrix_and_compare_show_every_report_string_whole(
    place: str, text: str, tmp_path: Path
) -> None:
    a = _hostile_report(tmp_path / "a.json", place, text, 1.0)
    b = _hostile_report(tmp_path / "b.json", place, text, 1.0)
    outs = {k: tmp_path / f"m.{k}" for k in ("md", "csv", "json")}
    proc = run_l0mem(
        "matrix",
        [str(a), str(b), "--markdown", str(outs["md"]), "--csv", str(outs["csv"]),
         "--json", str(outs["json"])],
        {},
        columns=250,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    shown = _expected(text)
    written = json.loads(outs["json"].read_text())
    for s in _strings(written):
        s.encode("utf-8")  # no lone surrogate written, not even as an escape
    if place.startswith(("environment", "driver")):
        assert shown in written["groups"][0]["rows"][0]["stack"]
        assert shown in outs["md"].read_text() and shown in outs["csv"].read_text()
        assert shown in proc.stdout
    to_stdout = run_l0mem("matrix", [str(a), "--json", "-"], {})
    assert to_stdout.returncode == 0, to_stdout.stderr
    json.loads(to_stdout.stdout)
    compared = run_l0mem("compare", [str(a), str(b)], {}, columns=250)
    assert compared.returncode == 0, compared.stderr
    assert "Traceback" not in compared.stderr
