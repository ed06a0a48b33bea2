"""``l0mem run`` in a terminal: the workload gets the terminal's foreground, as a shell job does.

The workload runs in a process group of its own (so that a stop reaches all
of it); a background group that reads its terminal is stopped by SIGTTIN. In
a terminal l0mem hands the foreground to the workload's group and takes it
back after, so an interactive program (a chat front end, a REPL) reads its
input and Ctrl-C reaches it. The terminal here is a pseudo-terminal l0mem
runs in as a session leader, as in a login shell's window.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time

import psutil

from tests.support.cli import REPO_ROOT

HANG_S = 60.0


def _in_a_terminal(argv: list[str], typed: bytes, after: bytes = b"") -> tuple[int, bytes]:
    """Run ``argv`` on a new pseudo-terminal, type ``typed`` once ``after`` was shown.

    Return its wait status and everything it printed.
    """
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader with the terminal, in the foreground
        try:
            os.chdir(REPO_ROOT)
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "120"}
            os.execve(sys.executable, [sys.executable, *argv], env)
        finally:
            os._exit(127)
    output = b""
    deadline = time.monotonic() + HANG_S
    typed_yet = False
    try:
        while time.monotonic() < deadline:
            if not typed_yet and after in output:
                os.write(master, typed)
                typed_yet = True
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every process of the terminal closed it
                break
            if not chunk:
                break
            output += chunk
        else:
            raise AssertionError(f"hung (stopped reading its terminal?): {output!r}")
        _, status = os.waitpid(pid, 0)
        return status, output
    finally:
        os.close(master)
        _end_session(pid)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _end_session(sid: int) -> None:
    """Kill every process left in the terminal's session (a failed test's l0mem and workload)."""
    for proc in psutil.process_iter():
        try:
            if proc.pid != sid and os.getsid(proc.pid) == sid:
                proc.kill()
        except (psutil.Error, ProcessLookupError, PermissionError):
            pass


def test_an_interactive_workload_reads_the_terminal_and_ends() -> None:
    status, output = _in_a_terminal(
        ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", 'read line; echo "got:$line"'],
        b"hello\n",
    )
    assert b"got:hello" in output, output
    assert os.waitstatus_to_exitcode(status) == 0, output


def test_ctrl_c_in_the_terminal_reaches_the_workload_and_l0mem_reports() -> None:
    # Ctrl-C goes to the terminal's foreground group, the workload's: it ends by
    # SIGINT and l0mem, which kept watching, ends as the shell would say (130).
    status, output = _in_a_terminal(
        ["-m", "l0mem", "run", "--", "sh", "-c", "echo ready; sleep 30"], b"\x03", b"ready"
    )
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGINT, output
    assert b"verdict" in output, output  # the summary was shown: what was sampled is kept


# A shell's job control, small: l0mem runs as a job (its own group, in the
# foreground); when the job stops the shell takes the terminal back, says so,
# and after a moment puts the job in the foreground again and continues it.
_MINISHELL = """
import os, signal, sys, time
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpgrp())
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
os.setpgid(pid, pid)
os.tcsetpgrp(0, pid)
_, status = os.waitpid(pid, os.WUNTRACED)
if os.WIFSTOPPED(status):
    os.tcsetpgrp(0, os.getpgrp())
    print("MINISHELL: job stopped", flush=True)
    time.sleep(0.5)
    os.tcsetpgrp(0, pid)
    os.killpg(pid, signal.SIGCONT)
    _, status = os.waitpid(pid, 0)
print("MINISHELL: exit", os.waitstatus_to_exitcode(status), flush=True)
"""


def test_ctrl_z_stops_l0mem_with_its_workload_and_fg_resumes_both() -> None:
    job = ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", "echo ready; sleep 4; echo done"]
    status, output = _in_a_terminal(["-c", _MINISHELL, *job], b"\x1a", b"ready")
    text = output.decode(errors="replace")
    # The shell saw its job stop (so it had the terminal back), continued it, and the
    # workload went on to its end, watched to the end: l0mem's summary and exit 0.
    assert "MINISHELL: job stopped" in text, text
    assert text.index("MINISHELL: job stopped") < text.index("done"), text
    assert "verdict" in text and "MINISHELL: exit 0" in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text


def test_ctrl_z_without_a_shell_to_stop_to_lets_the_workload_go_on() -> None:
    # l0mem leads its own session here: nothing could continue a stopped l0mem, so
    # the kernel discards its stop and l0mem continues the workload.
    status, output = _in_a_terminal(
        ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", "echo ready; sleep 1; echo done"],
        b"\x1a",
        b"ready",
    )
    assert b"done" in output and b"verdict" in output, output
    assert os.waitstatus_to_exitcode(status) == 0, output


# A shell that starts the job in the background (its own group, the terminal
# kept), optionally with `stty tostop`, and brings it to the foreground (fg)
# each time it stops, as a user would after "Stopped (tty input)".
_BACKGROUND_SHELL = """
import os, signal, sys, termios
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
if sys.argv[1] == "tostop":
    attrs = termios.tcgetattr(0)
    attrs[3] |= termios.TOSTOP
    termios.tcsetattr(0, termios.TCSANOW, attrs)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
os.setpgid(pid, pid)
stops = 0
while True:
    _, status = os.waitpid(pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        break
    stops += 1
    print("MINISHELL: job stopped", stops, flush=True)
    if stops > 5:
        os.killpg(pid, signal.SIGKILL)
        continue
    os.tcsetpgrp(0, pid)
    os.killpg(pid, signal.SIGCONT)
os.tcsetpgrp(0, os.getpgrp())
print("MINISHELL: exit", os.waitstatus_to_exitcode(status), "after", stops, "stops", flush=True)
"""


def test_a_job_started_in_the_background_gets_the_terminal_at_fg() -> None:
    # The workload reads the terminal from the background: it is stopped (SIGTTIN),
    # l0mem stops with it so the shell sees its job stop; at fg l0mem hands the
    # terminal to the workload, which reads what was typed and ends.
    job = ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", 'read line; echo "got:$line"']
    status, output = _in_a_terminal(
        ["-c", _BACKGROUND_SHELL, "plain", *job], b"hello\n", b"MINISHELL: job stopped"
    )
    text = output.decode(errors="replace")
    assert "got:hello" in text, text
    assert "MINISHELL: exit 0 after 1 stops" in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text


def test_with_tostop_a_background_job_writes_once_in_the_foreground() -> None:
    # With `stty tostop` a background group that writes is stopped (SIGTTOU): after
    # one fg the workload has the terminal and every write goes through.
    job = ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", "echo one; echo two; echo done"]
    status, output = _in_a_terminal(["-c", _BACKGROUND_SHELL, "tostop", *job], b"")
    text = output.decode(errors="replace")
    assert "one" in text and "two" in text and "done" in text, text
    assert "verdict" in text and "MINISHELL: exit 0 after 1 stops" in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text


def test_a_job_left_in_the_background_keeps_the_shell_s_terminal() -> None:
    # A workload that never touches the terminal runs to its end in the background;
    # l0mem never takes the terminal from the shell (it is the shell's at the end).
    shell = _BACKGROUND_SHELL.replace(
        'os.tcsetpgrp(0, os.getpgrp())\nprint("MINISHELL: exit"',
        'print("MINISHELL: owner", os.tcgetpgrp(0) == os.getpgrp(), flush=True)\n'
        'print("MINISHELL: exit"',
    )
    assert shell != _BACKGROUND_SHELL
    job = ["-m", "l0mem", "run", "--quiet", "--", "sh", "-c", "sleep 1"]
    status, output = _in_a_terminal(["-c", shell, "plain", *job], b"")
    text = output.decode(errors="replace")
    assert "MINISHELL: owner True" in text, text
    assert "MINISHELL: exit 0 after 0 stops" in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text
