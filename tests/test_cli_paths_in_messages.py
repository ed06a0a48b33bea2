"""Files named on the command line: one code per condition, and the name shown as it is.

An input l0mem cannot read is exit 4 with l0mem's line (not click's usage
error, exit 2), whatever the reason (missing, a directory, no permission);
an output that is a directory is exit 4 like every other output that cannot
be written; an existing output file is replaced without being read. A name
holding a newline or an escape sequence is shown with each control character
as its code, so the line keeps its reason and names the file that was given.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "reports"
# Root reads any file: drop the capabilities that let it, so that mode 000 refuses.
NO_DAC = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
]


def _l0mem(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "l0mem", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["compare", "matrix"])
def test_an_input_without_permission_is_exit_4_with_one_line(tmp_path: Path, command: str) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    locked = tmp_path / "locked.json"
    shutil.copy(DATA / "baseline.json", locked)
    locked.chmod(0)
    args = [str(locked), str(DATA / "current-same.json")] if command == "compare" else [str(locked)]
    proc = _l0mem(command, *args, prefix=tuple(NO_DAC))
    assert proc.returncode == 4, proc.stderr
    assert f"{locked}: cannot read (Permission denied)" in _one_line(proc)


@pytest.mark.parametrize("option", ["--json", "--markdown", "--csv"])
def test_an_output_that_is_a_directory_is_exit_4_like_any_unwritable_output(
    tmp_path: Path, option: str
) -> None:
    proc = _l0mem("matrix", str(DATA / "baseline.json"), option, str(tmp_path))
    assert proc.returncode == 4, proc.stderr
    assert f"{tmp_path}: cannot write (is a directory)" in _one_line(proc)


def test_an_existing_output_is_replaced_without_being_read(tmp_path: Path) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0)
    proc = _l0mem(
        "compare",
        str(DATA / "baseline.json"),
        str(DATA / "current-same.json"),
        "--json",
        str(out),
        prefix=tuple(NO_DAC),
    )
    assert proc.returncode == 0, proc.stderr
    out.chmod(0o644)
    assert out.read_text().startswith("{")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("bad\nname.json", "bad\\x0aname.json"),
        ("a\x1b[2Jb.json", "a\\x1b[2Jb.json"),
        ("cr\rover.json", "cr\\x0dover.json"),
    ],
)
def test_a_control_character_in_a_name_is_shown_as_its_code(
    tmp_path: Path, name: str, shown: str
) -> None:
    missing = _l0mem("matrix", str(tmp_path / name))
    assert missing.returncode == 4
    assert _one_line(missing).endswith(f"{shown}: no such file")
    compared = _l0mem("compare", str(tmp_path / name), str(DATA / "baseline.json"))
    assert compared.returncode == 4 and _one_line(compared).endswith(f"{shown}: no such file")
    written = _l0mem("matrix", str(DATA / "baseline.json"), "--json", str(tmp_path / "no" / name))
    assert written.returncode == 4
    assert f"{shown}: cannot write" in _one_line(written)


@pytest.mark.parametrize(
    ("first", "second"),
    [("-", "/dev/stdout"), ("/dev/stdout", "/dev/fd/1"), ("-", "-")],
)
def test_two_reports_on_standard_output_are_a_usage_error(first: str, second: str) -> None:
    # One stream holding a JSON report and a Markdown one parses as neither.
    proc = _l0mem("matrix", str(DATA / "baseline.json"), "--json", first, "--markdown", second)
    assert proc.returncode == 2, proc.stderr
    assert "both write standard output: give a file for one" in _one_line(proc)
    assert proc.stdout == ""
