"""JSON Schemas (draft 2020-12) of every report l0mem writes, shipped with the package.

One file per format, ``<name>.schema.json``: ``audit`` (``l0mem.audit``),
``watch`` (``l0mem.watch``, from ``run`` and ``watch``), ``compare``,
``matrix``, ``p2p``, ``allreduce``, ``bench.kernels`` (``l0mem.bench.kernels``)
and ``info``. Each file is the one machine-readable
definition of its format: the tests hold the reports the commands write, the
readers and the field tables of the documentation to it (docs/formats.md says
how to validate a report with it). A schema accepts every report of its major
version, since a minor version only adds optional fields.

What it may import: nothing of l0mem.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

NAMES: tuple[str, ...] = (
    "audit",
    "watch",
    "compare",
    "matrix",
    "p2p",
    "allreduce",
    "bench.kernels",
    "info",
)

# A report's "schema" field is "l0mem.<format>/<major>[.<minor>]"; a format may be dotted.
_REPORT_SCHEMA = re.compile(r"l0mem\.(\w+(?:\.\w+)*)/")


def path(name: str) -> Path:
    """Return the file of schema ``name`` (one of ``NAMES``), to hand to a validator."""
    if name not in NAMES:
        raise KeyError(f"no schema {name!r}; l0mem has {', '.join(NAMES)}")
    # The package is installed as files (never zipped), so the resource is a real path.
    return Path(str(resources.files(__name__).joinpath(f"{name}.schema.json")))


def load(name: str) -> dict[str, Any]:
    """Return schema ``name`` (one of ``NAMES``) as JSON data."""
    data: dict[str, Any] = json.loads(path(name).read_text(encoding="utf-8"))
    return data


def name_of(report: object) -> str | None:
    """Return the name of the schema a report claims (its ``schema`` field), or None for none of l0mem's."""
    field = report.get("schema") if isinstance(report, dict) else None
    found = _REPORT_SCHEMA.match(field) if isinstance(field, str) else None
    return found.group(1) if found and found.group(1) in NAMES else None


__all__ = ["NAMES", "load", "name_of", "path"]
