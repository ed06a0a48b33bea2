"""Hold reports to l0mem's JSON Schemas (l0mem/schemas): as shipped, and strictly.

The shipped schemas let objects carry keys they do not name (a reader ignores
keys it does not know, so a minor version can add some). Held strictly, every
object a schema describes field by field must have no other key: a field a
writer adds without adding it to the schema fails the test that wrote it.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema
import pytest

from l0mem import schemas


def strict(schema: Any) -> Any:
    """Return ``schema`` with every object that lists its properties closed to other keys."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@functools.cache
def validator(name: str, *, closed: bool = False) -> jsonschema.Draft202012Validator:
    """Return the validator of schema ``name`` (``closed``: held strictly)."""
    schema = schemas.load(name)
    return jsonschema.Draft202012Validator(strict(copy.deepcopy(schema)) if closed else schema)


def errors(report: Any, name: str, *, closed: bool = False) -> list[str]:
    """Return where and why ``report`` breaks schema ``name``, one line each (empty: it is valid)."""
    found = validator(name, closed=closed).iter_errors(report)
    return [f"{e.json_path}: {e.message[:200]}" for e in found]


def check_report(report: Any, name: str | None = None) -> None:
    """Fail the test unless ``report`` is valid under its schema, held strictly too."""
    name = name or schemas.name_of(report)
    assert name is not None, f"not an l0mem report: schema {report.get('schema')!r}"
    problems = errors(report, name, closed=True)
    if problems:
        pytest.fail(f"{name} report breaks its schema:\n" + "\n".join(problems[:20]))
