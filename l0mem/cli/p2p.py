"""``l0mem p2p``: peer access matrix and measured copy bandwidth between devices.

For every ordered device pair the command shows whether the first device can
access the second one's memory, whether atomics work across, the P2P
bandwidth and latency where the Level Zero driver reports them, and how l0mem
copies between the two (direct or host-staged, and why). It then times, for
each size of the sweep, the same-device copy (the reference), the direct
device-to-device copy and the host-staged copy (device to host to device) for
every ordered pair: median GB/s with the slowest-fastest range and the spread.
Device event timestamps are used where the backend has them, the host clock
otherwise. ``--json PATH`` writes the run atomically (schema ``l0mem.p2p/1``,
documented in docs/p2p-json.md). Numbers from l0mem's simulated driver are
labelled as a simulator's.

Exit codes: 0 on success, 2 on bad options, 3 when the backend or the
requested devices are unavailable (including a missing dpctl for
``--backend sycl``), 4 when the JSON file cannot be written, 6 when the driver
or runtime fails while measuring, 130 on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from l0mem.cli._common import ExitCode


class Unavailable(Exception):
    """The requested backend or devices cannot be used here."""


def fail(command: str, code: ExitCode, message: str) -> NoReturn:
    """Print a one-line error for ``command`` and exit with ``code``."""
    click.echo(f"l0mem {command}: {message}", err=True)
    raise SystemExit(int(code))


def sizes_option(value: str, param_hint: str) -> list[int]:
    """Return the parsed size list of an option value or raise click.BadParameter."""
    from l0mem.p2p import parse_sizes

    try:
        return parse_sizes(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint=param_hint) from None


def _l0_devices(specs: Sequence[str]) -> list[Any]:
    from l0mem._ze.errors import LoaderError, UninitializedError
    from l0mem.core import drivers

    try:
        found = drivers()
    except (LoaderError, UninitializedError) as err:
        raise Unavailable(f"no usable Level Zero driver: {err}") from None
    devs = found[0].devices() if found else []
    if not devs:
        raise Unavailable("no Level Zero device found")
    if not specs:
        return list(devs)
    chosen = []
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            if not part.isdigit() or int(part) >= len(devs):
                raise click.BadParameter(
                    f"expected a Level Zero device index 0..{len(devs) - 1}, got {part!r}",
                    param_hint="--device",
                )
            if devs[int(part)] in chosen:
                raise click.BadParameter(f"device {part} given twice", param_hint="--device")
            chosen.append(devs[int(part)])
    return chosen


def _sycl_devices(specs: Sequence[str], sub_devices: int | None) -> list[Any]:
    from l0mem.sycl import SyclUnavailableError, find_devices, load_dpctl, parse_filter

    try:
        dpctl = load_dpctl()
    except SyclUnavailableError as err:
        raise Unavailable(str(err)) from None
    chosen: list[Any] = []
    for spec in specs:
        try:
            parse_filter(spec)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--device") from None
        found = find_devices(spec)
        if not found:
            raise Unavailable(f"no SYCL device matches {spec!r}")
        chosen.append(found[0])
    if not chosen:
        chosen = list(dpctl.get_devices(backend="level_zero", device_type="gpu"))
        if not chosen:
            try:
                chosen = [dpctl.select_default_device()]
            except Exception as err:
                raise Unavailable(f"no SYCL device found: {err}") from None
    if sub_devices is None:
        return chosen
    if len(chosen) != 1:
        raise click.UsageError("--sub-devices partitions one device: select exactly one")
    root = chosen[0]
    units = int(root.max_compute_units)
    per = units // sub_devices
    if per < 1:
        raise click.BadParameter(
            f"{root.name.strip()} has {units} compute units, too few for {sub_devices} sub-devices",
            param_hint="--sub-devices",
        )
    try:
        return list(root.create_sub_devices(partition=[per] * sub_devices))
    except Exception as err:
        raise Unavailable(f"cannot partition {root.name.strip()}: {err}") from None


@contextlib.contextmanager
def open_backend(
    kind: str, specs: Sequence[str] = (), sub_devices: int | None = None
) -> Iterator[Any]:
    """Yield an open backend ("l0" or "sycl") over the selected devices; close it afterwards."""
    backend: Any
    if kind == "sycl":
        from l0mem.sycl import SyclBackend

        devs = _sycl_devices(specs, sub_devices)
        backend = SyclBackend(devs, profiling=True)
    else:
        if sub_devices is not None:
            raise click.UsageError("--sub-devices applies to --backend sycl only")
        from l0mem.core.backend import LevelZeroBackend

        backend = LevelZeroBackend(_l0_devices(specs), context="multi")
    try:
        yield backend
    finally:
        backend.close()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically (raises OSError on failure)."""
    from l0mem.audit.report import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell(c: Any) -> str:
    if c is None:
        return ""
    if c.skipped:
        return "n/a"
    return f"{_gbps(c.gbps)} ({_gbps(c.gbps_min)}-{_gbps(c.gbps_max)})"


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def render(result: Any, console: Console) -> None:
    """Print a :class:`l0mem.p2p.P2PResult` as rich tables."""
    devices = Table(title=f"Devices ({result.backend})")
    devices.add_column("#", justify="right")
    devices.add_column("name")
    for i, name in enumerate(result.devices):
        devices.add_row(str(i), escape(name))
    console.print(devices)
    if result.peers:
        peers = Table(title="Peer access (src can access dst)")
        for col in ("src", "dst", "access", "atomics", "P2P bandwidth", "latency", "l0mem copies"):
            peers.add_column(col)
        for p in result.peers:
            peers.add_row(
                str(p.src),
                str(p.dst),
                "?" if p.can_access is None else ("yes" if p.can_access else "no"),
                "?" if p.atomics is None else ("yes" if p.atomics else "no"),
                "-" if p.bandwidth is None else f"{p.bandwidth} {p.bandwidth_unit}",
                "-" if p.latency is None else f"{p.latency} {p.latency_unit}",
                p.route if p.route == "direct" else f"{p.route}: {p.route_reason}",
            )
        console.print(peers)
    table = Table(title="Copy bandwidth, GB/s (1e9 bytes/s): median (slowest-fastest)")
    for col in ("size", "src>dst", "same device", "direct", "host-staged", "timing"):
        table.add_column(col, justify="right")
    rows: dict[tuple[int, int, int], dict[str, Any]] = {}
    for c in result.copies:
        rows.setdefault((c.nbytes, c.src, c.dst), {})[c.kind] = c
    for (nbytes, src, dst), kinds in rows.items():
        timings = sorted({c.timing for c in kinds.values() if not c.skipped})
        table.add_row(
            _size(nbytes),
            f"{src}>{dst}",
            *(_cell(kinds.get(k)) for k in ("same_device", "direct", "staged")),
            "/".join(timings) or "-",
        )
    console.print(table)
    skipped = sorted({f"{c.src}>{c.dst}: {c.skipped}" for c in result.copies if c.skipped})
    if skipped:
        console.print("Not measured (direct): " + "; ".join(skipped))
    console.print(f"{result.reps} repetitions after {result.warmup} warm-up rounds per copy.")
    if len(result.devices) < 2:
        console.print("Only one device: no pairs to measure (SYCL: try --sub-devices 2).")
    for note in result.notes:
        style = "yellow" if "simulat" in note else "dim"
        console.print(f"[{style}]{escape(note)}[/{style}]")


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["l0", "sycl"]),
    default="l0",
    show_default=True,
    help="Level Zero binding or SYCL (dpctl).",
)
@click.option(
    "--device",
    "device_specs",
    multiple=True,
    help="Level Zero device index (or comma list) or SYCL filter string; repeatable. Default: all.",
)
@click.option(
    "--sub-devices",
    type=click.IntRange(min=2),
    help="SYCL: partition the selected device into N sub-devices (e.g. a CPU without GPUs).",
)
@click.option(
    "--sizes",
    default="1M,16M,64M",
    show_default=True,
    help="Copy sizes in bytes, comma-separated, with optional K/M/G (binary) suffix.",
)
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as JSON to PATH.",
)
def p2p(
    backend: str,
    device_specs: tuple[str, ...],
    sub_devices: int | None,
    sizes: str,
    reps: int,
    warmup: int,
    json_path: Path | None,
) -> None:
    """Show peer access between devices and measure direct, host-staged and same-device copies."""
    from l0mem.p2p import run_p2p

    size_list = sizes_option(sizes, "--sizes")
    try:
        with open_backend(backend, device_specs, sub_devices) as b:
            result = run_p2p(b, sizes=size_list, reps=reps, warmup=warmup)
    except Unavailable as err:
        fail("p2p", ExitCode.NO_DEVICE, str(err))
    except KeyboardInterrupt:
        fail("p2p", ExitCode.INTERRUPTED, "interrupted; device memory was freed")
    except click.ClickException:
        raise
    except MemoryError as err:
        fail("p2p", ExitCode.DRIVER_ERROR, f"out of device memory: {err}")
    except Exception as err:
        fail("p2p", ExitCode.DRIVER_ERROR, f"{type(err).__name__}: {err}".splitlines()[0])
    render(result, Console())
    if json_path is not None:
        try:
            write_json(json_path, result.to_dict())
        except OSError as err:
            fail("p2p", ExitCode.BAD_INPUT, str(err))


__all__ = ["Unavailable", "fail", "open_backend", "p2p", "render", "sizes_option", "write_json"]
