"""A list-valued option given as a list of nothing is a usage error, never "all" or the default.

``--setups ""`` ran all six set-ups and ``p2p --device " "`` every device: an
empty string, only commas or only blanks, given on the command line, names
nothing, in every command and every option that takes a list (found by its
help text, so that a new one joins), and says what it takes.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from l0mem.audit.remedies import ALL_SETUPS
from l0mem.cli import cli
from tests.support.cli import never_reach_a_device

EMPTY = ("", ",", " ", " , ", ",,", "\t")


def _list_options() -> dict[tuple[str, str], click.Option]:
    """Return every option that takes a comma list, by (command, option)."""
    found: dict[tuple[str, str], click.Option] = {}

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                walk(command, f"{prefix}{name} ")
            elif command is not None:
                for p in command.params:
                    if isinstance(p, click.Option) and "comma" in (p.help or ""):
                        found[f"{prefix}{name}", p.opts[-1]] = p

    walk(cli, "")
    return found


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
@pytest.mark.parametrize(("command", "option"), sorted(LISTS), ids=" ".join)
def test_a_list_of_nothing_is_a_usage_error_naming_what_it_takes(
    command: str, option: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    never_reach_a_device(monkeypatch)
    result = CliRunner().invoke(cli, [*command.split(), option, value])
    assert result.exit_code == 2, (result.output, result.exception)
    text = " ".join(result.stderr.split())
    assert option in text and "names no" in text, text
    assert TAKES[option] in text, text
    assert result.stdout == ""


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
