"""The ``l0mem`` command line (click + rich): parses options, renders results, maps errors.

What it is for: one module per command (``info``, ``audit``, ``compare``,
``p2p``, ``allreduce``, ``bench``, and :mod:`.run` for ``run`` and ``watch``;
the audit's tables in :mod:`.audit_view`, the watch's in :mod:`.run_view`,
``p2p``'s in :mod:`.p2p_view`)
and :mod:`._common`, the one failure path (``l0mem COMMAND: MESSAGE`` and a
documented exit code) with :mod:`._exits`, the exit codes, and :mod:`._options`, the
options the commands share;
:mod:`._signals` makes SIGTERM and SIGHUP end a command as Ctrl-C does.
Commands are imported lazily so that ``l0mem info`` does not pay for the SYCL
runtime and a missing optional dependency only affects the command needing it.

What it may import: every l0mem package below it (:mod:`l0mem.plots`, :mod:`l0mem.watch`,
:mod:`l0mem.audit`, :mod:`l0mem.estimate`, :mod:`l0mem.trace`, :mod:`l0mem.bench`, :mod:`l0mem.allreduce`, :mod:`l0mem.probe`,
:mod:`l0mem.backends`, :mod:`l0mem.core`, :mod:`l0mem.sycl`, :mod:`l0mem._ze`
and the leaves), through their public names; nothing imports the CLI but
the ``l0mem`` script's entry and ``python -m l0mem``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any, NoReturn

import click

from l0mem import __version__

# command name -> (module, attribute)
_COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("l0mem.cli.info", "info"),
    "audit": ("l0mem.cli.audit", "audit"),
    "compare": ("l0mem.cli.compare", "compare"),
    "matrix": ("l0mem.cli.matrix", "matrix"),
    "p2p": ("l0mem.cli.p2p", "p2p"),
    "allreduce": ("l0mem.cli.allreduce", "allreduce"),
    "bench": ("l0mem.cli.bench", "bench"),
    "run": ("l0mem.cli.run", "run"),
    "watch": ("l0mem.cli.run", "watch"),
    "demo": ("l0mem.cli.demo", "demo"),
}


# Commands that call the Level Zero driver in this process (the others do in children).
DRIVER_IN_PROCESS = frozenset({"info", "p2p", "allreduce", "bench"})

# ctx.meta key: the first word after "l0mem" that is no option (the subcommand).
_FIRST = "l0mem-first"
# ctx.meta key: the arguments after "l0mem", to name "bench kernels" in an error line.
_ARGV = "l0mem-argv"


class _LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return the names of the commands whose modules are present."""
        return sorted(
            name
            for name, (module, _) in _COMMANDS.items()
            if importlib.util.find_spec(module) is not None
        )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Return the command named ``cmd_name``, importing its module, or None."""
        entry = _COMMANDS.get(cmd_name)
        if entry is None or importlib.util.find_spec(entry[0]) is None:
            return None
        command = getattr(importlib.import_module(entry[0]), entry[1])
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry[0]}.{entry[1]} is not a click command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Find the subcommand in ``args``, remembering them to name the command in errors."""
        ctx.meta[_ARGV] = list(args)
        return super().resolve_command(ctx, args)

    def _name(self, ctx: click.Context) -> str:
        """Return the command the user ran as its one-line errors name it (``bench kernels``)."""
        argv = ctx.meta.get(_ARGV, [])
        # Stopped before the subcommand was resolved: the word the user typed, if it is one.
        name = ctx.invoked_subcommand or (argv[0] if argv and argv[0] in _COMMANDS else "")
        try:
            # An error's name: its own failure (a second stop while the module loads) is no reason to lose the line.
            command = self.get_command(ctx, name) if name else None
        except (KeyboardInterrupt, Exception):
            command = None
        rest = argv[1:]
        if isinstance(command, click.Group) and rest and rest[0] in command.commands:
            return f"{name} {rest[0]}"
        return name

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the command line; a stop while it is parsed ends l0mem as a command's stop does.

        click would print "Aborted!" and exit 1, which a CI gate reads as a finding.
        """
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt as exc:
            _interrupted_early(exc)
        # The subcommand, known before invoke resolves it (which command runs where).
        ctx.meta[_FIRST] = first = _first_word(args)
        if first in args:  # the name a parent waiting on the command gives it (resolved in a child)
            ctx.meta[_ARGV] = args[args.index(first) :]
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a stop signal, a closed stdout and a bug get their own exit codes.

        SIGTERM and SIGHUP end a command as Ctrl-C does (a measuring block frees
        device memory on the way out); each exits 128 + N and names the signal.
        click would turn an interrupt into exit 1, which a CI gate reads as a regression.
        """
        try:
            from l0mem.cli._common import ExitCode, error, interrupt_signal, signal_exit
            from l0mem.cli._signals import in_worker, stop_signals_interrupt
            from l0mem.cli._supervise import supervised
            from l0mem.files import discard
        except KeyboardInterrupt as exc:  # while the command line's own modules load
            _interrupted_early(exc)

        try:
            with stop_signals_interrupt(ignore_late=_AS_CONSOLE_SCRIPT[0]):
                if ctx.meta.get(_FIRST) in DRIVER_IN_PROCESS:
                    # A driver that crashes in a call takes only a child (the console script's).
                    supervised(lambda: self._name(ctx), _AS_CONSOLE_SCRIPT[0])
                    # The driver is called on this process's thread: keep the main one free.
                    return in_worker(
                        lambda: super(_LazyGroup, self).invoke(ctx), lambda: self._name(ctx)
                    )
                return super().invoke(ctx)
        except KeyboardInterrupt as err:
            code, name = signal_exit(interrupt_signal(err))
            error(self._name(ctx), f"interrupted by {name}")
            raise SystemExit(code) from None
        except BrokenPipeError:
            discard(sys.stdout)
            with contextlib.suppress(OSError, ValueError):
                error(self._name(ctx), "output closed early (broken pipe)")
            raise SystemExit(int(ExitCode.BAD_INPUT)) from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as err:
            # A bug of l0mem's own. click would exit 1, which a CI gate reads as a
            # finding: keep the traceback for the report, exit with the bug's own code.
            with contextlib.suppress(OSError):  # a terminal that hung up takes no traceback
                traceback.print_exc()
            error(
                self._name(ctx),
                f"internal error (a bug in l0mem {__version__}; please report it with the "
                f"traceback above): {type(err).__name__}",
            )
            raise SystemExit(int(ExitCode.INTERNAL)) from None


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from l0mem.cli.versions import version_text

    click.echo(version_text())
    ctx.exit()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show l0mem's version, the Level Zero loader's and the SYCL runtime's, and exit.",
)
def cli() -> None:
    """Measure host-memory mirroring of Intel GPU allocations (Level Zero and SYCL)."""


def _fill_closed_std_fds() -> None:
    """Put /dev/null at each closed descriptor 0-2 (a shell's ``>&-``).

    Otherwise the next file the command opens would get that number, and a
    child process would print into it. Python has already made ``sys.stdout``
    None for a closed stdout, so the tables are simply not printed.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main() -> None:
    """Run the l0mem command line."""
    _fill_closed_std_fds()
    cli(prog_name="l0mem")


def _interrupted_early(exc: KeyboardInterrupt) -> NoReturn:
    """End l0mem for a stop that came before a command ran: 128 + N, the signal named."""
    from l0mem.cli._common import error, interrupt_signal, signal_exit

    code, name = signal_exit(interrupt_signal(exc))
    error(_command_word(), f"interrupted by {name}")
    raise SystemExit(code) from None


def _first_word(args: list[str]) -> str | None:
    """Return the first of ``args`` that is no option (the subcommand's name), or None."""
    return next((a for a in args if not a.startswith("-")), None)


def _command_word() -> str:
    """Return the command named on the command line, or "" where none is."""
    word = _first_word(sys.argv[1:])
    return word if word in _COMMANDS else ""


# Whether l0mem runs as its console script (the process exits after the command).
_AS_CONSOLE_SCRIPT = [False]


def as_console_script() -> None:
    """Set up the command line as the console script's process, which exits after the command.

    The commands that call the driver in this process run in a child
    (:mod:`l0mem.cli._supervise`), and a command that ends on a stop
    ignores any stop signal after it. An in-process caller (a test's
    ``CliRunner``) keeps its own process's signal handlers.
    """
    _AS_CONSOLE_SCRIPT[0] = True


__all__ = ["as_console_script", "cli", "main"]
