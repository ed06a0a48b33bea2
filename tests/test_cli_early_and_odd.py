"""Messages for odd requests and stops that come early: one clear line and the documented code.

A Ctrl-C while the command line loads or parses is a stop like any other
(128 + N with the signal named, never click's "Aborted!" with exit 1, nor a
doubled prefix); an empty command name is "command not found"; a kernel
thread is refused by name; as root a process that cannot be read is not
blamed on the user; a terminal too narrow for a table gets a table anyway.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from l0mem.probe import pids as pids_module
from tests.support import sim
from tests.support.cli import run_l0mem

PF_KTHREAD = 0x00200000


def _stop(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["parse_args", "get_command"])
def test_a_stop_while_the_line_is_parsed_or_the_command_found_is_130_with_one_line(
    where: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # click alone prints "Aborted!" and exits 1 there (and the group's name made the
    # prefix "l0mem l0mem:"): a CI gate reads 1 as a finding.
    import l0mem.cli as cli_module

    monkeypatch.setattr(cli_module._LazyGroup, where, _stop)
    monkeypatch.setattr(sys, "argv", ["l0mem", "info"])
    with pytest.raises(SystemExit) as ended:
        cli_module.main()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "l0mem info: interrupted by SIGINT\n"


def test_a_stop_while_the_command_line_loads_is_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.abc

    import l0mem._entry as entry

    class Stopped(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "l0mem.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "l0mem.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Stopped(), *sys.meta_path])
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "l0mem: interrupted by SIGINT\n"


def test_an_empty_command_name_is_not_found() -> None:
    proc = run_l0mem("run", ["--", ""], dict(os.environ))
    assert proc.returncode == 127, proc.stderr
    assert proc.stderr.strip() == "l0mem run: '' (an empty command name): command not found"


def _kernel_thread() -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            flags = int(text[text.rfind(")") + 2 :].split()[6])
        except (OSError, ValueError, IndexError):
            continue
        if flags & PF_KTHREAD:
            return int(entry.name)
    return None


def test_a_kernel_thread_is_refused_by_name() -> None:
    pid = _kernel_thread()
    if pid is None:
        pytest.skip("no kernel thread is visible in this PID namespace")
    proc = run_l0mem("watch", ["--pid", str(pid), "--duration", "0.2"], dict(os.environ))
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith(f"l0mem watch: process {pid} (") and "is a kernel thread" in line, line


def test_root_is_not_told_to_run_as_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    monkeypatch.setattr(pids_module.os, "geteuid", lambda: 0)
    text = pids_module.access_message("/proc/42/fdinfo", 42, str(tmp_path))
    assert "run as root" not in text and "not even root" in text
    monkeypatch.setattr(pids_module.os, "geteuid", lambda: os.stat(tmp_path / "42").st_uid + 1)
    assert "run as that user or root" in pids_module.access_message("/proc/42/fdinfo", 42, str(tmp_path))


def test_a_terminal_too_narrow_still_gets_its_words() -> None:
    proc = run_l0mem("info", [], sim.sim_env(devices=2), columns=5)
    assert proc.returncode == 0, proc.stderr
    assert "loader" in proc.stdout and "initialized by" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("make", "code", "said"),
    [
        ("script", 127, "cannot execute: a file it needs is not found (its interpreter /nonexistent/interp is not there)"),
        ("directory", 126, "is a directory"),
        ("on_path", 127, "command not found"),
        ("plain", 126, "permission denied (not executable)"),
        ("long", 127, "...: command not found"),
    ],
)
def test_a_command_that_cannot_start_is_said_as_a_shell_would(
    tmp_path: Path, make: str, code: int, said: str
) -> None:
    # The reason a shell gives, with its code: not "command not found" for a script whose
    # interpreter is missing, nor "permission denied" for a directory.
    env = dict(os.environ)
    if make == "script":
        name = tmp_path / "job.sh"
        name.write_text("#!/nonexistent/interp\necho hi\n")
        name.chmod(0o755)
        command = str(name)
    elif make == "directory":
        command = str(tmp_path)
    elif make == "on_path":
        (tmp_path / "adir").mkdir()  # a shell skips a directory on PATH
        env["PATH"] = f"{tmp_path}{os.pathsep}{env.get('PATH', '')}"
        command = "adir"
    elif make == "plain":
        name = tmp_path / "data.txt"
        name.write_text("not a program\n")
        command = str(name)
    else:
        command = "x" * 5000
    proc = run_l0mem("run", ["-qq", "--", command], env)
    assert proc.returncode == code, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("l0mem run: ") and line.endswith(said), line
    assert len(line) < 300, len(line)
