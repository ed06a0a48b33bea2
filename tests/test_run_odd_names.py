"""``run`` with a command line that is not UTF-8 or holds control characters: every report written.

A name on a Linux command line is bytes: ``/tmp/t$'\\xff'`` is a file name no
UTF-8 text holds. Python keeps such a byte as a lone surrogate (``\\udcff``),
which no UTF-8 file can carry: ``--prometheus`` failed (exit 4, "'utf-8'
codec can't encode character '\\udcff'", no file) and ``--json`` wrote the
surrogate's escape, which ``matrix`` could not show. Every report now shows
such a byte as its code (``t\\xff``, :func:`l0mem.text.os_text`); a control
character in a Prometheus label value is shown as the terminal shows it
(``\\x1b``), never written raw.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cli import run_l0mem

# Bytes no UTF-8 decoder reads whole: a lone continuation or lead byte, an
# encoded surrogate, a sequence cut short, and such bytes beside valid UTF-8.
NAMES = (
    b"t\xff",
    b"\xc3(",
    b"\xed\xa0\x80",
    b"a\x80b\xfe",
    b"\xf0\x9f\x98",
    b"ok\xc3\xa9\xff",
    b"\\x",
)


def _shown(raw: bytes) -> str:
    """Return bytes as every report must show them: UTF-8 as text, any other byte as ``\\xNN``."""
    return raw.decode("utf-8", "backslashreplace")


@pytest.mark.parametrize("seed", range(300))
def test_any_bytes_the_os_gives_are_shown_as_text_that_encodes(seed: int) -> None:
    from l0mem.text import os_text

    rng = random.Random(seed)
    pool = [bytes([b]) for b in range(1, 256)] + ["é✓\U0001f600".encode(), b"\xed\xa0\x80"]
    raw = b"".join(rng.choice(pool) for _ in range(rng.randint(0, 16)))
    text = os.fsdecode(raw)  # as Python gives argv, paths and the environment
    shown = os_text(text)
    assert shown == _shown(raw)
    shown.encode("utf-8")


def test_text_that_encodes_is_kept_and_any_other_surrogate_is_its_code() -> None:
    from l0mem.text import os_text

    for text in ("", "plain", "é\U0001f600", "a\x1bb\n"):
        assert os_text(text) is text or os_text(text) == text
    assert os_text("a\ud800b\udfff") == "a\\ud800b\\udfff"


def _prom(path: Path) -> dict[str, list[Any]]:
    return {f.name: list(f.samples) for f in text_string_to_metric_families(path.read_text())}


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_a_command_line_that_is_not_utf8_reaches_every_report(name: bytes, tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path)
    command = folder + b"/" + name
    shutil.copy(b"/bin/true", command)
    os.chmod(command, 0o755)
    arg = b"arg" + name
    out = {k: tmp_path / f"r.{k}" for k in ("json", "csv", "prom")}
    proc = run_l0mem(
        "run",
        ["--quiet", "--json", str(out["json"]), "--csv", str(out["csv"]),
         "--prometheus", str(out["prom"]), "--label", "note=" + os.fsdecode(name),
         "--", os.fsdecode(command), os.fsdecode(arg)],
        dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "codec" not in proc.stderr and "Traceback" not in proc.stderr
    raw = out["json"].read_text()
    assert "\\ud" not in raw.lower()  # no surrogate, not even escaped
    report = json.loads(raw)
    assert report["command"] == [_shown(command), _shown(arg)]
    assert report["options"]["labels"] == {"note": _shown(name)}
    out["csv"].read_text(encoding="utf-8")
    for samples in _prom(out["prom"]).values():
        for s in samples:
            assert s.labels["command"] == _shown(name) and s.labels["note"] == _shown(name)
    # The run report is read back by the matrix and shown by its command's name.
    shown = run_l0mem("matrix", [str(out["json"])], {}, columns=250)
    assert shown.returncode == 0, shown.stderr
    assert f"run: {_shown(name)}" in shown.stdout


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_a_report_path_that_is_not_utf8_is_shown_as_its_bytes(name: bytes, tmp_path: Path) -> None:
    from l0mem.audit.report import write_json
    from tests.test_analysis import synthetic_report, synthetic_run

    path = os.fsdecode(os.fsencode(tmp_path) + b"/" + name + b".json")
    write_json(synthetic_report([synthetic_run(1.0)]), path)
    out = tmp_path / "c.json"
    proc = run_l0mem("compare", [path, path, "--json", str(out)], {}, columns=400)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["baseline"] == _shown(os.fsencode(path))
    assert f"{_shown(os.fsencode(path))} -> " in proc.stdout
    # An error line names the file as every report does.
    missing = path + "-gone"
    for command, args in (("matrix", [missing]), ("compare", [missing, path])):
        proc = run_l0mem(command, args, {})
        assert proc.returncode == 4, proc.stderr
        assert f"{_shown(os.fsencode(missing))}: no such file" in proc.stderr, proc.stderr
