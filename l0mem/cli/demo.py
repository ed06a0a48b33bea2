"""``l0mem demo``: what a mirror and its remedy look like, on l0mem's simulated driver.

For a machine without an Intel GPU (or before auditing one): the audit of
two Level Zero set-ups, then ``run --trace`` on a small job that makes its
allocations resident on a peer device, then the same job under
``--no-peer-residency``. They run on l0mem's simulated Level Zero driver,
shipped in l0mem's wheel and loaded through ``ZE_ENABLE_ALT_DRIVERS`` in
place of any installed driver: two simulated GPUs whose memory made
resident on the peer is mirrored in host memory, as on the affected driver
stacks. Every line it prints and every report it writes says SIMULATOR; no
number it shows is a hardware result. ``$L0MEM_SIM_LIBRARY`` names a built
simulator instead (a checkout:
``tests/support/sim.py``). The reports go into ``--out`` (a new directory
by default), which is named at the end.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import click

import l0mem
from l0mem.cli._common import ExitCode, check_output, exit_epilog, fail, measuring, rendering
from l0mem.cli._paths import NamedPath
from l0mem.driverenv import recorded_environment
from l0mem.units import parse_size

SIM_VAR = "L0MEM_SIM_LIBRARY"
PACKAGED = Path(l0mem.__file__).parent / "_sim" / "libze_sim.so"
BANNER = "SIMULATION: l0mem's simulated Level Zero driver, not your hardware"
# The user's own loader stays: the demo runs through it (the one variable of the kind kept).
KEPT = frozenset({"L0MEM_ZE_LOADER"})
# How long a step may take once it was told to stop.
STOP_WAIT_S = 10.0


def simulator() -> Path | None:
    """Return the simulated driver to run on: ``$L0MEM_SIM_LIBRARY``, else the wheel's, else None."""
    named = os.environ.get(SIM_VAR)
    if named:
        return Path(named) if Path(named).is_file() else None
    return PACKAGED if PACKAGED.is_file() else None


def no_simulator() -> str:
    """Return why there is no simulated driver, and how to get one where l0mem is installed."""
    if os.environ.get(SIM_VAR):
        return f"{SIM_VAR}={os.environ[SIM_VAR]}: no such file"
    checkout = Path(l0mem.__file__).resolve().parent.parent
    if (checkout / "tests" / "support" / "sim.py").is_file():
        # An editable install of a checkout: its simulator is built from its tests/.
        build = "python -c 'from tests.support import sim; print(sim.build())'"
        return (
            "this checkout's simulated driver is not built: build it (gcc and the Level Zero "
            f"headers, libze-dev) and name it: {SIM_VAR}=$(cd {shlex.quote(str(checkout))} && "
            f"{build}) l0mem demo"
        )
    return (
        "this l0mem was installed without its simulated driver (built only where gcc and the "
        "Level Zero headers, libze-dev, were present): install l0mem's wheel (bash .ci/wheel "
        "builds one with it)"
    )


def demo_env(library: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment of the demo's steps: two simulated GPUs mirroring what a peer holds.

    Every variable that changes what a driver or runtime does (those a report
    records, the simulator's own among them) is left out, so no setting of the
    user's changes what the demo shows.
    """
    base = os.environ if base is None else base
    drop = set(recorded_environment(base)) - KEPT
    env = {k: v for k, v in base.items() if k not in drop}
    env.update(
        ZE_ENABLE_ALT_DRIVERS=str(library),
        ZES_ENABLE_SYSMAN="1",
        ZESIM_DEVICES="2",
        ZESIM_MIRROR="peer-resident",
    )
    return env


def steps(out: Path, size: int) -> list[tuple[str, list[str]]]:
    """Return the demo's steps: what each shows, and its l0mem arguments."""
    job = [sys.executable, "-m", "l0mem.cli.demo_job", "--gib", repr(size / (1 << 30))]
    job += ["--pause", "0.25", "--hold", "0.25"]
    return [
        (
            "the audit: plain Level Zero allocations, and the same made resident on the "
            "peer GPU (the simulator mirrors those), with the remedies that remove it",
            [
                *("audit", "--setups", "l0,l0-peer-resident", "--size", str(size)),
                *("--remedies", "--json", str(out / "audit.json")),
            ],
        ),
        (
            "a job of yours, watched: it makes its allocations resident on the peer",
            ["run", "--trace", "--json", str(out / "run.json"), "--", *job],
        ),
        (
            "the same job with residency on a peer refused (--no-peer-residency): no mirror",
            [
                *("run", "--no-peer-residency"),
                *("--json", str(out / "run-no-peer-residency.json"), "--", *job),
            ],
        ),
    ]


def _step(argv: list[str], env: Mapping[str, str]) -> int:
    """Run one step (``python -m l0mem ARGV``); on an interrupt stop it too, then re-raise."""
    proc = subprocess.Popen([sys.executable, "-m", "l0mem", *argv], env=dict(env))
    try:
        return proc.wait()
    except BaseException as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
        deadline = time.monotonic() + STOP_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise


def _say(text: str, nl: bool = True) -> None:
    """Print ``text``; a closed standard output is no failure (the steps write the reports)."""
    with rendering():
        click.echo(text, nl=nl)


def _out_dir(out: Path | None) -> Path:
    """Return the reports' directory, made now; a new one under the temporary directory by default."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix="l0mem-demo-"))
    try:
        out.mkdir(exist_ok=True)
    except OSError as exc:
        fail("demo", ExitCode.BAD_INPUT, f"cannot write reports into {out}: {exc.strerror or exc}")
    return out


@click.command(epilog=exit_epilog("demo"))
@click.option(
    "--out",
    type=NamedPath(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Write the reports here (default: a new directory under the temporary directory).",
)
@click.option(
    "--size",
    default="256M",
    show_default=True,
    metavar="SIZE",
    help="Device memory each step of the audit and the job allocates in all.",
)
def demo(out: Path | None, size: str) -> None:
    """Show what a mirror and its remedy look like, on l0mem's simulated driver (no GPU needed)."""
    try:
        nbytes = parse_size(size, minimum=16 << 20)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--size'") from None
    library = simulator()
    if library is None:
        fail("demo", ExitCode.NO_DEVICE, no_simulator())
    where = _out_dir(out)
    plan = steps(where, nbytes)
    for _, argv in plan:  # each report the steps write, checked as every command checks its own
        check_output("demo", Path(argv[argv.index("--json") + 1]))
    env = demo_env(library)
    _say(BANNER)
    with measuring("demo"):
        for number, (what, argv) in enumerate(plan, start=1):
            _say(f"\n== {number}. SIMULATION: {what}\n   l0mem {shlex.join(argv)}")
            code = _step(argv, env)
            if code >= 128:
                raise SystemExit(code)
            if code not in (ExitCode.OK, ExitCode.REGRESSION):
                fail("demo", ExitCode.DRIVER_ERROR, f"step {number} (l0mem {argv[0]}) ended {code}")
    _say(
        f"\n{BANNER}. The reports are in {where}. On a machine with Intel GPUs, "
        "`l0mem audit` measures its own driver stack."
    )


__all__ = ["BANNER", "PACKAGED", "SIM_VAR", "demo", "demo_env", "simulator", "steps"]
