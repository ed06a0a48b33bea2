"""Report paths of every command: no input overwritten, reports before tables, broken pipes quiet."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from l0mem.cli.audit import audit
from l0mem.cli.compare import compare
from tests.support import sim
from tests.support.cli import REPO_ROOT
from tests.support.devnode import null_device

DATA = Path(__file__).parent / "data" / "reports"
BASELINE = DATA / "baseline.json"
CURRENT = DATA / "current-regressed.json"


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


@pytest.mark.parametrize("through_link", [False, True])
def test_compare_refuses_to_write_over_its_input(tmp_path: Path, through_link: bool) -> None:
    a = _copy(BASELINE, tmp_path / "a.json")
    b = _copy(CURRENT, tmp_path / "b.json")
    out = b
    if through_link:
        out = tmp_path / "out.json"
        out.symlink_to(b)
    result = CliRunner().invoke(compare, [str(a), str(b), "--json", str(out)])
    assert result.exit_code == 2, result.output
    assert (
        result.stderr == f"l0mem compare: error: --json {out} is also CURRENT: give another path\n"
    )
    assert b.read_bytes() == CURRENT.read_bytes()


def test_compare_report_to_standard_output_sends_the_table_to_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a file named "-" would appear
    result = CliRunner().invoke(compare, [str(BASELINE), str(CURRENT), "--json", "-"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["schema"] == "l0mem.compare/1"
    assert "regression" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--json", "r", "--junit", "r"], "--junit {tmp}/r is also --json: give another path"),
        (["--json", "r", "--plot", "l.svg"], "--plot {tmp}/l.svg is also --json: give another path"),
        (
            ["--json", "-", "--junit", "-"],
            "--json - and --junit - both write standard output: give a file for one",
        ),
    ],
)
def test_audit_outputs_naming_one_file_are_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    import l0mem.cli.audit as cli_audit

    ran: list[object] = []
    monkeypatch.setattr(cli_audit, "run_audit", lambda *a, **k: ran.append(a))
    (tmp_path / "l.svg").symlink_to(tmp_path / "r")
    args = [a if a.startswith("-") else str(tmp_path / a) for a in args]
    result = CliRunner().invoke(audit, args)
    assert result.exit_code == 2, result.output
    assert (
        result.stderr == f"l0mem audit: error: {message.format(tmp=tmp_path)}\n"
    )
    assert ran == [] and not (tmp_path / "r").exists()


def _shell(
    command: str, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (with ``L0MEM`` standing for ``python -m l0mem``) in sh."""
    l0mem = f"{shlex.quote(sys.executable)} -m l0mem"
    return subprocess.run(
        ["sh", "-c", command.replace("L0MEM", l0mem)],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _reader_gone(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``l0mem ARGS`` with its standard output a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "l0mem", *args],
            env=env,
            cwd=REPO_ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def info_env() -> dict[str, str]:
    return sim.sim_env(devices=2)


def test_info_into_a_pipe_whose_reader_left_writes_the_report_and_exits_0(
    tmp_path: Path, info_env: dict[str, str]
) -> None:
    out = tmp_path / "x.json"
    proc = _reader_gone(["info", "--json", str(out)], info_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert len(json.loads(out.read_text())["drivers"]) == 1
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_compare_into_a_pipe_whose_reader_left_keeps_its_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    same = DATA / "current-same.json"
    proc = _reader_gone(["compare", str(BASELINE), str(same), "--json", str(out)], dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert json.loads(out.read_text())["regression"] is False
    proc = _reader_gone(
        ["compare", str(BASELINE), str(CURRENT), "--json", str(out)], dict(os.environ)
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert json.loads(out.read_text())["regression"] is True


def test_info_with_standard_output_closed_writes_the_report(
    tmp_path: Path, info_env: dict[str, str]
) -> None:
    out = tmp_path / "x.json"
    proc = _shell(f"L0MEM info --json {shlex.quote(str(out))} >&-", info_env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(out.read_text())["drivers"]


def test_audit_with_standard_output_closed_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    args = "--setups l0 --size 256MiB --steps 4 --settle 0"
    proc = _shell(f"L0MEM audit {args} --json {shlex.quote(str(out))} >&-", sim.sim_env())
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(out.read_text())["runs"]


def test_audit_json_into_a_fifo_with_no_reader_is_one_line_and_exit_4(tmp_path: Path) -> None:
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    args = "--setups l0 --size 256MiB --steps 4 --settle 0"
    proc = _shell(f"L0MEM audit {args} --json {shlex.quote(str(fifo))}", sim.sim_env())
    assert proc.returncode == 4, proc.stderr
    assert (
        f"l0mem audit: error: {fifo}: cannot write (no process is reading this FIFO)" in proc.stderr
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_compare_json_through_a_symlink_to_a_device_keeps_both(tmp_path: Path) -> None:
    # As root, --json /dev/null used to replace the device with a regular file;
    # a null device node of our own stands in for it.
    node = null_device(tmp_path)
    link = tmp_path / "out.json"
    link.symlink_to(node)
    for path in (node, link):
        result = CliRunner().invoke(compare, [str(BASELINE), str(CURRENT), "--json", str(path)])
        assert result.exit_code == 1, result.output
        assert stat.S_ISCHR(os.stat(node).st_mode)
    assert link.is_symlink()


def test_a_report_to_a_closed_standard_output_is_exit_4_before_any_work(
    info_env: dict[str, str],
) -> None:
    proc = _shell("L0MEM info --json - >&-", info_env)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr == "l0mem info: -: cannot write (standard output is closed)\n"


def test_info_report_to_standard_output_is_json_and_the_tables_go_to_stderr(
    info_env: dict[str, str],
) -> None:
    proc = _shell("L0MEM info --json -", info_env)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["drivers"]) == 1
    assert "Level Zero loader" in proc.stderr


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_json_to_dev_stdout_in_a_pipe_is_written_into_the_pipe(name: str) -> None:
    same = DATA / "current-same.json"
    proc = _shell(f"L0MEM compare {BASELINE} {same} --json {name} | cat", dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["regression"] is False


def test_json_to_dev_stdout_redirected_to_a_file_keeps_the_file_the_shell_opened(
    tmp_path: Path,
) -> None:
    # Replacing the file would leave the shell's descriptor on an unlinked inode:
    # the report would be in the file and the tables lost, or the other way round.
    out = tmp_path / "out.txt"
    same = DATA / "current-same.json"
    proc = _shell(
        f"L0MEM compare {BASELINE} {same} --json /dev/stdout > {shlex.quote(str(out))}",
        dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    report, end = json.JSONDecoder().raw_decode(text)
    assert report["regression"] is False
    assert "regression" in proc.stderr + text[end:]


@pytest.mark.parametrize("command", ["compare", "matrix"])
def test_a_report_to_a_reader_that_left_is_exit_4(command: str, tmp_path: Path) -> None:
    # The reader closed its end before l0mem wrote: the report was not delivered, and
    # exit 0 (or 1) would tell a CI job it was.
    code = tmp_path / "code"
    same = DATA / "current-same.json"
    proc = _shell(
        f"{{ L0MEM {command} {BASELINE} {same} --json -; echo $? > {shlex.quote(str(code))}; }}"
        " | sh -c 'exec 0<&-; sleep 2'",
        dict(os.environ),
    )
    assert code.read_text().strip() == "4", proc.stderr
    assert f"l0mem {command}:" in proc.stderr
