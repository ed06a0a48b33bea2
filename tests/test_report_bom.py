"""A report saved with a byte order mark: UTF-8's is ignored by every reader, another encoding named.

An editor or a Windows tool may save a report as UTF-8 with a byte order mark
(RFC 8259 lets a reader ignore it); ``compare`` and ``matrix`` refused such a
file with Python's "Unexpected UTF-8 BOM (decode using utf-8-sig)". Every
reader reads it as the same report; UTF-16 or UTF-32 text is refused in one
line naming the file, the encoding and what to do.
"""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

from l0mem.audit.report import write_json
from tests.support.cli import one_line, run_l0mem
from tests.test_analysis import synthetic_report, synthetic_run

DATA = Path(__file__).parent / "data" / "reports"
OTHER = {
    "UTF-16": ("utf-16-le", codecs.BOM_UTF16_LE),
    "UTF-16 BE": ("utf-16-be", codecs.BOM_UTF16_BE),
    "UTF-32": ("utf-32-le", codecs.BOM_UTF32_LE),
}


def _with_bom(path: Path, out: Path) -> Path:
    out.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    return out


def _in(encoding: str, path: Path, out: Path) -> Path:
    codec, mark = OTHER[encoding]
    out.write_bytes(mark + path.read_text().encode(codec))
    return out


@pytest.fixture(scope="module")
def watch_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a run/watch report (l0mem.watch/1): this process watched for a moment."""
    path = tmp_path_factory.mktemp("watch") / "watch.json"
    args = ["-q", "--pid", str(os.getpid()), "--duration", "0.3", "--interval", "0.05"]
    proc = run_l0mem("watch", [*args, "--json", str(path)], dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return path


def test_the_library_reader_ignores_a_utf8_bom(tmp_path: Path) -> None:
    from l0mem.audit import read_json
    from l0mem.audit.loading import load_json_data

    plain = tmp_path / "plain.json"
    write_json(synthetic_report([synthetic_run(1.0)]), plain)
    marked = _with_bom(plain, tmp_path / "marked.json")
    assert load_json_data(marked) == load_json_data(plain)
    assert read_json(marked).to_dict() == read_json(plain).to_dict()


@pytest.mark.parametrize("position", ["baseline", "current"])
def test_compare_reads_a_report_with_a_utf8_bom_as_without(position: str, tmp_path: Path) -> None:
    names = {"baseline": "baseline.json", "current": "current-regressed.json"}
    runs = {}
    for kind in ("plain", "marked"):
        (tmp_path / kind).mkdir()
        paths = []
        for which, name in names.items():
            path = tmp_path / kind / name
            path.write_bytes((DATA / name).read_bytes())
            if kind == "marked" and which == position:
                _with_bom(DATA / name, path)
            paths.append(str(path))
        runs[kind] = run_l0mem("compare", paths, {})
    plain, marked = runs["plain"], runs["marked"]
    assert marked.returncode == plain.returncode == 1, marked.stderr
    assert marked.stdout == plain.stdout.replace(f"{tmp_path}/plain/", f"{tmp_path}/marked/")
    assert "BOM" not in marked.stderr


def test_matrix_reads_audit_and_run_reports_with_a_utf8_bom_as_without(
    tmp_path: Path, watch_report: Path
) -> None:
    audit = tmp_path / "audit.json"
    write_json(synthetic_report([synthetic_run(1.0)]), audit)
    plain = run_l0mem("matrix", [str(audit), str(watch_report), "--json", "-"], {})
    assert plain.returncode == 0, plain.stderr
    marked_dir = tmp_path / "marked"
    marked_dir.mkdir()
    paths = [
        _with_bom(audit, marked_dir / "audit.json"),
        _with_bom(watch_report, marked_dir / "watch.json"),
    ]
    marked = run_l0mem("matrix", [*map(str, paths), "--json", "-"], {})
    assert marked.returncode == 0, marked.stderr
    assert json.loads(marked.stdout) == json.loads(plain.stdout)
    assert "warning" not in marked.stderr  # neither was left out as "not a report"


@pytest.mark.parametrize("encoding", sorted(OTHER))
@pytest.mark.parametrize("command", ["compare", "matrix"])
def test_a_report_in_another_encoding_is_one_line_naming_it(
    command: str, encoding: str, tmp_path: Path
) -> None:
    other = _in(encoding, DATA / "baseline.json", tmp_path / "saved.json")
    args = [str(DATA / "baseline.json"), str(other)] if command == "compare" else [str(other)]
    proc = run_l0mem(command, args, {})
    assert proc.returncode == 4, proc.stderr
    line = one_line(proc, command)
    name = encoding.split()[0]
    assert f"{other}: not JSON as l0mem reads it: {name} text" in line, line
    assert f"iconv -f {name} -t UTF-8" in line and "Traceback" not in proc.stderr
