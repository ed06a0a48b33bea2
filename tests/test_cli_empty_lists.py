"""A list-valued option given as a list of nothing is a usage error, never "all" or the default.

``--setups ""`` ran all six set-ups and ``p2p --device " "`` every device: an
empty string, only commas or only blanks, given on the command line, names
nothing, in every command and every option that takes a list (found by its
help text, so that a new one joins), and says what it takes.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from l0mem.audit.remedies import ALL_SETUPS
from l0mem.cli import cli
from tests.support.cli import command_params, never_reach_a_device, usage_error

EMPTY = ("", ",", " ", " , ", ",,", "\t")


def _list_options() -> dict[tuple[str, str], click.Option]:
    """Return every option that takes a comma list, by (command, option)."""
    return command_params(lambda p: isinstance(p, click.Option) and "comma" in (p.help or ""))


LISTS = _list_options()
# What each says it takes instead.
TAKES = {"--setups": ", ".join(ALL_SETUPS), "--device": "a device index", "--sizes": "64K,1M"}


def test_the_list_options_are_these() -> None:
    assert sorted(LISTS) == [
        ("allreduce", "--device"),
        ("allreduce", "--sizes"),
        ("audit", "--device"),
        ("audit", "--setups"),
        ("bench kernels", "--device"),
        ("p2p", "--device"),
        ("p2p", "--sizes"),
    ]


@pytest.mark.parametrize("value", EMPTY, ids=repr)
@pytest.mark.parametrize(("command", "option"), sorted(LISTS), ids=str)
def test_a_list_of_nothing_is_a_usage_error_naming_what_it_takes(
    command: str, option: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = usage_error([*command.split(), option, value], monkeypatch)
    assert option in text and "names no" in text, text
    assert TAKES[option] in text, text


@pytest.mark.parametrize("value", EMPTY, ids=repr)
def test_an_empty_sycl_filter_is_a_usage_error_not_every_device(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from l0mem.sycl import parse_filter

    # --sycl-device "" picked the default device and ran the SYCL set-ups.
    never_reach_a_device(monkeypatch)
    result = CliRunner().invoke(cli, ["audit", "--sycl-device", value])
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = result.stderr.splitlines()
    assert line.startswith("l0mem audit: error: ") and "SYCL device filter" in line, line
    if not value.strip():
        assert "empty SYCL device filter" in line and "opencl:cpu" in line, line
        with pytest.raises(ValueError, match="empty SYCL device filter"):
            parse_filter(value)


@pytest.mark.parametrize("value", EMPTY, ids=repr)
def test_the_python_api_refuses_a_device_spec_of_nothing_too(value: str) -> None:
    from l0mem.backends import DeviceSelectionError, select_devices
    from l0mem.cli.audit import device_indices

    with pytest.raises(DeviceSelectionError, match="names no device"):
        select_devices("l0", [value])
    with pytest.raises(DeviceSelectionError, match="names no device"):
        device_indices((value,))


def test_an_option_left_out_still_means_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from l0mem.cli.audit_options import setups_option

    assert setups_option(click.Context(cli), click.Option(["--setups"]), ()) == ALL_SETUPS
    assert setups_option(click.Context(cli), click.Option(["--setups"]), ("l0,,l0",)) == ("l0",)


def _path_params() -> dict[tuple[str, str], click.Parameter]:
    """Return every option and argument that names a file or directory, by (command, name)."""
    return command_params(lambda p: isinstance(p.type, click.Path))


PATHS = _path_params()


def test_every_path_parameter_is_found() -> None:
    # The walk finds them by type: a report argument or an output option added later joins.
    assert ("compare", "baseline") in PATHS and ("matrix", "reports") in PATHS
    assert ("audit", "--json") in PATHS and ("run", "--csv") in PATHS and ("demo", "--out") in PATHS
    assert len(PATHS) >= 20, sorted(PATHS)


@pytest.mark.parametrize("value", ["", " "], ids=repr)
@pytest.mark.parametrize(("command", "name"), sorted(PATHS), ids=str)
def test_an_empty_file_name_is_a_usage_error_not_the_current_directory(
    command: str, name: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # compare "" read "." ("is a directory, not a report file"); --json "" said ". cannot
    # be written": the empty name is the current directory to pathlib, never what was meant.
    never_reach_a_device(monkeypatch)
    param = PATHS[command, name]
    report = tmp_path / "r.json"
    report.write_text("{}")
    if isinstance(param, click.Argument):
        args = [value if p is param else str(report) for p in _arguments(command)]
    else:
        args = [name, value, *(str(report) for _ in _arguments(command))]
    result = CliRunner().invoke(cli, [*command.split(), *args])
    assert result.exit_code == 2, (result.output, result.exception)
    text = " ".join(result.stderr.split())
    assert "empty name names no file" in text, text
    assert result.stdout == ""


def _arguments(command: str) -> list[click.Argument]:
    """Return the positional arguments of ``command`` that name files (one value each)."""
    return [p for (c, _), p in PATHS.items() if c == command and isinstance(p, click.Argument)]
