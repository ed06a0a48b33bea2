"""``l0mem info``: the Level Zero loader, drivers, devices and peer access.

Text goes to the terminal: the loader, then one block per device (so that
PCI addresses and UUIDs stay whole on an 80-column terminal), then the peer
matrix. ``--json PATH`` writes the same report atomically (temporary file,
fsync, rename; mode 0644; the path is checked before any driver is asked) as
JSON with these keys (schema ``l0mem.info/1``; docs/info-json.md, and
``l0mem/schemas/info.schema.json`` to validate it):

- ``schema``: ``"l0mem.info/1"``.
- ``l0mem_version``: version of l0mem that wrote the report.
- ``loader``: ``path`` (real path of libze_loader, or null), ``components``,
  a list of ``{"name", "version"}`` from ``zelLoaderGetVersions`` (empty on
  loaders without it), and ``init_path``: the call that initialized Level
  Zero, ``"zeInitDrivers"`` or ``"zeInit"`` (l0mem falls back to ``zeInit``
  where a new loader's ``zeInitDrivers`` cannot serve older drivers).
- ``alt_drivers``: the paths in ``ZE_ENABLE_ALT_DRIVERS`` (drivers the loader
  was told to use instead of the installed ones, e.g. l0mem's simulator);
  empty when unset.
- ``environment``: the variables that change driver, loader or runtime
  behaviour, as they were (:mod:`l0mem.driverenv`).
- ``drivers``: one object per driver with ``index``, ``driver_version`` (the
  raw 32-bit value), ``version`` (decoded as ``major.minor.build``, see
  :func:`l0mem.core.decode_driver_version`), ``uuid``, ``api_version``
  ("major.minor"), ``devices`` and ``peer_access``.
- each device: ``index`` (l0mem's device index, over all drivers: its
  position in :func:`l0mem.backends.level_zero_devices`, what ``--device``
  takes in every command), ``driver_index`` (its index within
  its driver), ``name``, ``type``, ``vendor_id`` and ``device_id``
  (hex strings), ``pci_address`` ("DDDD:BB:DD.F" or null), ``uuid``,
  ``memory_bytes`` (sum of the device memories), ``kernel_driver`` (the Linux
  driver bound in sysfs, e.g. xe or i915, or null), ``sub_devices`` (count).
- ``peer_access``: square matrix, ``peer_access[i][j]`` is true when device i
  can access memory of device j (``zeDeviceCanAccessPeer``); the diagonal is
  true.

Exit codes: as ``--help`` lists them (:mod:`l0mem.cli._exits`, the one table);
errors are mapped as in every measuring command (:func:`l0mem.cli._common.measuring`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from l0mem import __version__
from l0mem.cli._common import (
    check_outputs,
    escape,
    exit_epilog,
    measuring,
    output,
    rendering,
    save_json,
    to_stdout,
)
from l0mem.cli._options import (
    json_option,
)
from l0mem.cli.layout import pairs
from l0mem.units import format_bytes

SCHEMA = "l0mem.info/1"


def _hex(value: int) -> str:
    return f"0x{value:04x}"


def collect() -> dict[str, Any]:
    """Return the info report as a JSON-ready dict.

    Raises :class:`l0mem.backends.NoDeviceError` when there is no loader, no
    driver or no device, and the driver's error when a call fails.
    """
    from l0mem._ze import init_path, loader_path, loader_versions
    from l0mem.backends import level_zero_devices
    from l0mem.core import drivers
    from l0mem.driverenv import recorded_environment

    # The inventory every command selects from: its positions are the indices shown.
    flat = level_zero_devices()
    index_of = {dev: i for i, dev in enumerate(flat)}
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "l0mem_version": __version__,
        "loader": {
            "path": loader_path(),
            "components": [
                {"name": name, "version": ".".join(map(str, version))}
                for name, version in loader_versions()
            ],
            "init_path": init_path(),
        },
        "alt_drivers": [
            p for p in os.environ.get("ZE_ENABLE_ALT_DRIVERS", "").split(",") if p.strip()
        ],
        "environment": recorded_environment(os.environ),
        "drivers": [],
    }
    for drv in drivers():
        props = drv.properties
        devices = drv.devices()
        report["drivers"].append(
            {
                "index": drv.index,
                "driver_version": props.driver_version,
                "version": props.version,
                "uuid": props.uuid,
                "api_version": f"{props.api_version[0]}.{props.api_version[1]}",
                "devices": [
                    {
                        "index": index_of[dev],
                        "driver_index": dev.index,
                        "name": dev.name,
                        "type": dev.type,
                        "vendor_id": _hex(dev.vendor_id),
                        "device_id": _hex(dev.device_id),
                        "pci_address": dev.pci_address,
                        "uuid": dev.uuid,
                        "memory_bytes": dev.total_memory,
                        "kernel_driver": dev.kernel_driver,
                        "sub_devices": len(dev.sub_devices()),
                    }
                    for dev in devices
                ],
                "peer_access": [[a is b or a.can_access_peer(b) for b in devices] for a in devices],
            }
        )
    return report


# The command to run next, and what it answers: info says what is here, audit what it costs.
NEXT = "Next: l0mem audit (how much host memory each GiB of device memory takes here)"


def render(report: dict[str, Any], console: Console) -> None:
    """Print the report as rich tables, then the command to run next."""
    rows = [("path", str(report["loader"]["path"] or "unknown"))]
    rows += [(comp["name"], comp["version"]) for comp in report["loader"]["components"]]
    rows.append(("initialized by", report["loader"].get("init_path") or "-"))
    if report["alt_drivers"]:
        rows.append(("ZE_ENABLE_ALT_DRIVERS", ", ".join(report["alt_drivers"])))
    # Lines where the table is too wide: a path is copied from here, never folded mid-word.
    console.print(
        pairs(console, "Level Zero loader", [(k, escape(v)) for k, v in rows]), crop=False
    )
    if report["alt_drivers"]:
        console.print(
            "note: ZE_ENABLE_ALT_DRIVERS is set, so the drivers below are the ones named there "
            "(for example l0mem's simulator), not the installed runtime"
        )
    for drv in report["drivers"]:
        console.print(
            f"Driver {drv['index']}: version {drv['version']} "
            f"(raw {drv['driver_version']:#010x}), API {drv['api_version']}"
        )
        for dev in drv["devices"]:
            rows = [
                ("type", dev["type"]),
                ("vendor:device", f"{dev['vendor_id']}:{dev['device_id']}"),
                ("PCI address", dev["pci_address"] or "-"),
                ("UUID", dev["uuid"]),
                ("memory", format_bytes(dev["memory_bytes"])),
                ("kernel driver", dev["kernel_driver"] or "-"),
                ("sub-devices", str(dev["sub_devices"])),
            ]
            # Identifiers are copied from here into commands: never cut (pairs stacks them).
            title = escape(f"Device {dev['index']}: {dev['name']}")
            console.print(pairs(console, title, [(k, escape(v)) for k, v in rows]), crop=False)
        if len(drv["devices"]) > 1:
            console.print(
                f"Driver {drv['index']}: peer access (row device can access column device)"
            )
            peers = Table()
            peers.add_column("")
            for dev in drv["devices"]:
                peers.add_column(str(dev["index"]), justify="center")
            for pos, (dev, row) in enumerate(zip(drv["devices"], drv["peer_access"], strict=True)):
                peers.add_row(
                    str(dev["index"]),
                    *("-" if i == pos else ("yes" if ok else "no") for i, ok in enumerate(row)),
                )
            console.print(peers)
    console.print(NEXT)


@click.command(epilog=exit_epilog("info"))
@json_option
def info(json_path: Path | None) -> None:
    """Show the Level Zero loader, drivers, devices and peer access."""
    check_outputs("info", [("--json", json_path)])
    with measuring("info"):
        from l0mem._ze.guard import check_drivers_load

        check_drivers_load()  # a driver that hangs or crashes in zeInit takes a child, not l0mem
        report = collect()
    # The report first: a reader of the tables that goes away (| head) must not lose it.
    if json_path is not None:
        save_json("info", json_path, report)
    with rendering():
        render(report, output(stderr=to_stdout(json_path)))
