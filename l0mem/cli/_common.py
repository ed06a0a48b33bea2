"""Exit codes and small helpers shared by the l0mem commands."""

from __future__ import annotations

import contextlib
import enum
import json
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., Any])


class ExitCode(enum.IntEnum):
    """Documented process exit codes of the l0mem command line."""

    OK = 0
    REGRESSION = 1  # compare found a regression; audit --fail-on-mirror found a mirror
    USAGE = 2  # bad command-line usage (click's own code)
    NO_DEVICE = 3  # no Level Zero driver / no usable device for the request
    BAD_INPUT = 4  # an input file is missing, unreadable or malformed
    MISMATCH = 5  # inputs are well-formed but cannot be compared
    DRIVER_ERROR = 6  # the driver or runtime failed while working
    INTERRUPTED = 130  # Ctrl-C: device memory was freed, partial results written


class Unavailable(Exception):
    """The requested backend or devices cannot be used here."""


class HostTooSmall(Exception):
    """The request needs more host memory than is available (a usage error, exit 2)."""


def notice(command: str, message: str) -> None:
    """Print the one line ``l0mem COMMAND: MESSAGE`` on stderr."""
    click.echo(f"l0mem {command}: {message}", err=True)


def fail(command: str, code: ExitCode, message: str) -> NoReturn:
    """Print a one-line error for ``command`` and exit with ``code``."""
    notice(command, message)
    raise SystemExit(int(code))


def _release_warning() -> type[Warning]:
    from l0mem.core import ReleaseWarning

    return ReleaseWarning


def _replay(caught: Sequence[warnings.WarningMessage], *, skip_release: bool) -> None:
    """Show the held warnings again, leaving out ReleaseWarnings when ``skip_release``."""
    release = _release_warning() if caught else Warning
    for w in caught:
        if skip_release and issubclass(w.category, release):
            continue
        warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def _memory_message(err: MemoryError) -> str:
    # NumPy and bytearray fail on the host (the former with its own subclass,
    # the latter with no message); the backends name the device they failed on.
    text = str(err).splitlines()[0] if str(err) else ""
    if not text or type(err).__module__.startswith("numpy"):
        return f"out of host memory{': ' + text if text else ''}"
    return f"out of device memory: {text}"


@contextlib.contextmanager
def measuring(command: str) -> Iterator[None]:
    """Turn a failure while ``command`` measures into its one-line error and exit code.

    Handles that fail to release during the teardown after a failure (every
    call fails once a device is lost) would each print a ReleaseWarning; they
    are dropped then, so the one line names the original failure.
    """
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
        except BaseException as err:
            failure: BaseException | None = err
        else:
            failure = None
    if failure is None:
        _replay(caught, skip_release=False)
        return
    _replay(caught, skip_release=True)
    # Objects the traceback still holds are freed at exit: keep that quiet too.
    warnings.simplefilter("ignore", _release_warning())
    try:
        raise failure
    except Unavailable as err:
        fail(command, ExitCode.NO_DEVICE, str(err))
    except HostTooSmall as err:
        fail(command, ExitCode.USAGE, str(err))
    except KeyboardInterrupt:
        fail(command, ExitCode.INTERRUPTED, "interrupted; device memory was freed")
    except click.ClickException:
        raise
    except MemoryError as err:
        fail(command, ExitCode.DRIVER_ERROR, _memory_message(err))
    except Exception as err:
        fail(command, ExitCode.DRIVER_ERROR, f"{type(err).__name__}: {err}".splitlines()[0])


# Options of the commands that measure on a backend (p2p, allreduce).
backend_option = click.option(
    "--backend",
    type=click.Choice(["l0", "sycl"]),
    default="l0",
    show_default=True,
    help="Level Zero binding or SYCL (dpctl).",
)
sub_devices_option = click.option(
    "--sub-devices",
    type=click.IntRange(min=2),
    help="SYCL: partition the selected device into N sub-devices (e.g. a CPU without GPUs).",
)
json_option = click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as JSON to PATH.",
)


def device_option(default_note: str = "") -> Callable[[_F], _F]:
    """Return the repeatable ``--device`` option; ``default_note`` ends its help text."""
    text = "Level Zero device index (or comma list) or SYCL filter string; repeatable."
    return click.option(
        "--device",
        "device_specs",
        multiple=True,
        help=f"{text} {default_note}" if default_note else text,
    )


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
        # The options are fine; this machine's device cannot serve them.
        raise Unavailable(
            f"{root.name.strip()} has {units} compute units, too few for {sub_devices} sub-devices"
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
        from l0mem.sycl import SyclBackend, SyclNoDeviceError

        devs = _sycl_devices(specs, sub_devices)
        try:
            backend = SyclBackend(devs, profiling=True)
        except SyclNoDeviceError as err:
            raise Unavailable(str(err)) from None
    else:
        if sub_devices is not None:
            raise click.UsageError("--sub-devices applies to --backend sycl only")
        from l0mem.core.backend import LevelZeroBackend

        backend = LevelZeroBackend(_l0_devices(specs), context="multi")
    try:
        yield backend
    except BaseException:
        close_quietly(backend)
        raise
    backend.close()


def close_quietly(backend: Any) -> None:
    """Close ``backend`` after a failure: its own errors and ReleaseWarnings are dropped.

    With a lost device every release fails too; the caller reports the
    failure that came first.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _release_warning())
        with contextlib.suppress(Exception):
            backend.close()


def _gib(nbytes: float) -> str:
    return f"{nbytes / (1 << 30):.1f} GiB"


def check_memory(
    backend: Any,
    devices: Sequence[int],
    *,
    per_device: int,
    largest: int,
    host: int,
    what: str,
) -> None:
    """Raise Unavailable when a device cannot hold ``per_device`` bytes (or one ``largest``
    allocation), HostTooSmall when the host lacks ``host`` bytes plus host-backed device memory."""
    import psutil

    from l0mem.p2p import device_memory, device_memory_is_host

    host_need = host
    for d in devices:
        total, max_alloc = device_memory(backend, d)
        name = backend.device_name(d)
        if total is not None and per_device > total:
            raise Unavailable(
                f"{what} need {_gib(per_device)} on device {d} ({name}), "
                f"which has {_gib(total)} of memory"
            )
        if max_alloc is not None and largest > max_alloc:
            raise Unavailable(
                f"{what} need one allocation of {_gib(largest)} on device {d} ({name}), "
                f"larger than its limit of {_gib(max_alloc)}"
            )
        if device_memory_is_host(backend, d):
            host_need += per_device
    available = int(psutil.virtual_memory().available)
    if host_need > available:
        raise HostTooSmall(
            f"{what} need about {_gib(host_need)} of host memory, {_gib(available)} available"
        )


def finite(data: Any) -> Any:
    """Return ``data`` with every non-finite float (inf, nan) replaced by None, for strict JSON."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as strict JSON (non-finite numbers as null) to ``path`` atomically (raises OSError)."""
    from l0mem.audit.report import atomic_write_bytes

    text = json.dumps(finite(data), indent=2, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode())


def save_json(command: str, path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically, or fail ``command`` with BAD_INPUT."""
    try:
        write_json(path, data)
    except OSError as err:
        fail(command, ExitCode.BAD_INPUT, str(err))
