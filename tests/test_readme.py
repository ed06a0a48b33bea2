"""The README's Python examples run as written, against the simulated driver.

The README and the documentation pages (docs/) name only options the commands
have, and the user guide's table of shared options is the commands' own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import sim
from tests.support.own_memory import host_env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
OPTIONS_PAGE = ROOT / "docs" / "guide" / "options.md"


def _python_blocks() -> list[str]:
    """Return the README's fenced Python code blocks."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _block_with(text: str) -> str:
    """Return the one README Python block containing ``text``."""
    (block,) = [b for b in _python_blocks() if text in b]
    return block


def test_readme_has_the_backend_and_the_core_example() -> None:
    assert len(_python_blocks()) == 2


@pytest.mark.parametrize(("peers", "route"), [("all", "direct"), ("none", "staged")])
def test_readme_backend_example_copies_between_the_devices_info_lists(
    peers: str, route: str
) -> None:
    block = _block_with("backend.copy_route(0, 1)")
    proc = sim.run_python(block, timeout=120, devices=2, peers=peers)
    assert proc.returncode == 0, proc.stderr
    # backend name, device 1's name, the route and why, then the bytes that arrived.
    assert proc.stdout.startswith(f"l0 l0mem simulated GPU 1 {route} "), proc.stdout
    assert proc.stdout.rstrip().endswith(" 5a5a5a5a"), proc.stdout


def test_readme_python_example_runs_makes_the_mirror_and_measures_it() -> None:
    block = _block_with("backend.make_resident(buf, 1)")
    # The simulator in peer-resident mode mirrors on make_resident: the example's
    # comment is ground truth there, and the mirror is released with the buffer.
    probe = (
        "\nfrom tests.support.sim import SimControl\n"
        "ctl = SimControl.from_env()\n"
        "print('mirror-after', ctl.mirror_bytes())\n"
    )
    code = block.replace(
        "        backend.make_resident(buf, 1)",
        "        backend.make_resident(buf, 1)\n"
        "        from tests.support.sim import SimControl\n"
        "        print('mirror-during', SimControl.from_env().mirror_bytes())",
    )
    assert code != block
    # On the quiet host (only this process moves memory) the cost is the mirror's.
    env = host_env(sim.sim_env(devices=2, mirror="peer-resident"), "quiet")
    proc = sim.run_python_env(code + probe, env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"mirror-during {1 << 30}" in proc.stdout
    assert "mirror-after 0" in proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.endswith("per GiB made resident")]
    assert 1020 <= int(line.split()[0]) <= 1040, line


def _command_options() -> dict[str, set[str]]:
    """Return every l0mem command (``bench kernels`` by its full name) and its option names."""
    import click

    from l0mem.cli import cli

    ctx = click.Context(cli)
    commands: dict[str, click.Command] = {}
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            commands.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            commands[name] = command
    return {name: {o for p in c.params for o in p.opts} for name, c in commands.items()}


MEASURING = ("p2p", "allreduce", "bench kernels")


def test_shared_options_table_names_exactly_the_commands_that_take_each_option() -> None:
    section = OPTIONS_PAGE.read_text().split("# Options the measuring commands share", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("| `--")]
    options = _command_options()
    listed: dict[str, set[str]] = {}
    for row in rows:
        option_cell, commands_cell = row.split(" | ")[:2]
        option = re.search(r"--[a-z-]+", option_cell)
        assert option is not None, row
        if commands_cell.startswith("every command but "):
            named = set(options) - set(re.findall(r"`([a-z0-9 ]+)`", commands_cell))
        elif commands_cell == "every command":
            named = set(options)
        else:
            named = set(re.findall(r"`([a-z0-9 ]+)`", commands_cell))
        for spelled in re.findall(r"(?<![\w-])--?[a-z][a-z-]*", option_cell):
            listed[spelled] = named  # every spelling of the row's option (-q, --quiet)
        # Every command named takes the option; no measuring command that takes it is left out.
        takes = {c for c in set(MEASURING) | named if option.group() in options[c]}
        assert named == takes, (option.group(), named, takes)
    # Every option the measuring commands share is in the table.
    shared = set.intersection(*(options[c] for c in MEASURING)) - {"--help"}
    assert shared <= set(listed), shared - set(listed)


def test_readme_names_no_option_a_command_lacks() -> None:
    # `l0mem COMMAND ... --option` in the commands table (docs/guide/commands.md), the
    # README and every other page: each option exists.
    options = _command_options()
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text() for p in pages if "_build" not in p.parts)
    assert "`l0mem bench kernels [" in text  # the commands table is among them
    for command, args in re.findall(r"`l0mem ((?:bench )?[a-z0-9]+) (\[[^`]*)`", text):
        for option in re.findall(r"--[a-z-]+", args):
            assert option in options[command], (command, option)


def test_readme_is_a_users_page_of_at_most_200_lines() -> None:
    # The rest lives in the documentation site (docs/).
    assert len(README.read_text().splitlines()) <= 200


def test_no_help_text_names_an_option_its_command_lacks() -> None:
    # The options part of every --help (the exit table, shared by all, is checked above):
    # `watch --help` once sent its users to --host-floor, which watch refuses.
    import click
    from click.testing import CliRunner

    from l0mem.cli import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        group = cli.get_command(ctx, name)
        assert group is not None
        subs = group.commands if isinstance(group, click.Group) else {"": group}
        for sub, command in subs.items():
            argv = [name, sub] if sub else [name]
            opts = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            result = CliRunner().invoke(cli, [*argv, "--help"], env={"COLUMNS": "200"})
            assert result.exit_code == 0, result.output
            # click may wrap a long option name at its hyphen: join it again.
            text = re.sub(r"-\n\s+", "-", result.output.split("Exit codes:")[0])
            named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)) - {"--help"}
            assert named <= opts, (argv, named - opts)
