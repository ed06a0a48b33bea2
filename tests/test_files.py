"""The one report writer (:mod:`l0mem.files`): what it replaces, what it writes through, and modes."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from l0mem.files import ReportWriteError, check_writable, json_bytes, same_path, write_bytes
from tests.support.devnode import null_device


def test_a_new_file_is_0644_and_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    new = tmp_path / "new.json"
    write_bytes(new, b"1")
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    kept = tmp_path / "kept.json"
    kept.write_bytes(b"old")
    kept.chmod(0o600)
    write_bytes(kept, b"new")
    assert kept.read_bytes() == b"new"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_bytes(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "later.json")
    check_writable(link)
    write_bytes(link, b"x")
    assert link.is_symlink() and (tmp_path / "later.json").read_bytes() == b"x"


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _wait_for_reader(path: Path) -> int:
    """Return a writer's descriptor of the FIFO once the reader thread has it open.

    The caller closes it after the write under test, so that the reader does
    not see the end of the stream before that write.
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.01)
    raise AssertionError("the reader never opened the FIFO")


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = _read_fifo(fifo, got)
    held = _wait_for_reader(fifo)
    try:
        check_writable(fifo)
        write_bytes(fifo, b"report\n")
    finally:
        os.close(held)
    thread.join(10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_nobody_reads_fails_at_once_with_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    for path in (fifo, link):
        started = time.monotonic()
        with pytest.raises(ReportWriteError) as info:
            write_bytes(path, b"report\n")
        assert time.monotonic() - started < 5
        assert str(info.value) == f"{path}: cannot write (no process is reading this FIFO)"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()


def test_a_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    node = null_device(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(node)
    for path in (node, link):
        check_writable(path)
        write_bytes(path, b"report\n")
        assert stat.S_ISCHR(os.stat(node).st_mode)
    assert link.is_symlink()


def test_dash_is_standard_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    check_writable("-")
    write_bytes("-", b'{"a": 1}\n')
    assert capfd.readouterr().out == '{"a": 1}\n'
    assert list(tmp_path.iterdir()) == []


def test_same_path_follows_symlinks_and_knows_absent_files(tmp_path: Path) -> None:
    real = tmp_path / "a.json"
    real.write_text("{}")
    link = tmp_path / "l.json"
    link.symlink_to(real)
    assert same_path(real, link) and same_path(link, str(real))
    assert same_path(tmp_path / "x.json", tmp_path / "sub" / ".." / "x.json")
    assert not same_path(real, tmp_path / "b.json")
    assert same_path("-", "-") and not same_path("-", real)


@pytest.mark.parametrize("name", ["a" * 250 + ".json", "é" * 125 + ".j", "b" * 255], ids=len)
def test_a_name_at_the_file_systems_limit_is_written(tmp_path: Path, name: str) -> None:
    # The temporary file beside it was named after it whole, then past 255 bytes:
    # "File name too long" for a name the shell and touch write.
    target = tmp_path / name
    assert len(os.fsencode(name)) <= 255
    check_writable(target)
    write_bytes(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary left


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("value", [-0.0, -1e-9, -0.004])
def test_json_never_holds_a_signed_zero(value: float, strict: bool) -> None:
    # Every JSON l0mem writes (audit: strict; run, watch, p2p, ...: not) goes through json_bytes.
    import json

    data = {"release_slope": value, "fits": [{"slope": value}, (value, 1.5)], "n": 0}
    raw = json_bytes(data, strict=strict).decode()
    assert "-0.0," not in raw and "-0.0\n" not in raw and "-0.0]" not in raw, raw
    back = json.loads(raw)
    expected = 0.0 if value == 0.0 else value
    assert back == {"release_slope": expected, "fits": [{"slope": expected}, [expected, 1.5]], "n": 0}
    assert str(back["release_slope"]) == str(expected)  # 0.0, never -0.0


def test_json_keeps_what_strict_refuses_and_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        json_bytes({"x": float("nan")}, strict=True)
    assert json_bytes({"x": float("inf")}) == b'{\n  "x": null\n}\n'
    with pytest.raises(TypeError):
        json_bytes({"x": {1, 2}})
