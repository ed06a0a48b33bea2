"""The field tables of the report pages (docs/) against l0mem's JSON Schemas (l0mem/schemas).

The schema is the definition; a page's table must list the same fields with
the same JSON types (``int or null`` for ``{"type": ["integer", "null"]}``),
so neither can gain, lose or retype a field alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from l0mem import schemas

DOCS = Path(__file__).resolve().parent.parent / "docs"

# (page, heading the table follows, which table under it, schema, object in the schema).
TABLES = [
    ("report-schema.md", "## Top level (`AuditReport`)", 0, "audit", ""),
    ("report-schema.md", "## `remedy_costs[]` (`RemedyCost`)", 0, "audit", "RemedyCost"),
    ("report-schema.md", "## `runs[]` (`SetupRun`)", 0, "audit", "SetupRun"),
    ("report-schema.md", "## `runs[].samples[]` (`Sample`)", 0, "audit", "Sample"),
    ("report-schema.md", "## `runs[].result` (`SetupAnalysis`)", 0, "audit", "SetupAnalysis"),
    ("report-schema.md", "### `NextSteps`", 0, "audit", "NextSteps"),
    ("report-schema.md", "### `SignalFit`", 0, "audit", "SignalFit"),
    ("report-schema.md", "## `analysis` (`AnalysisConfig`)", 0, "audit", "AnalysisConfig"),
    ("report-schema.md", "## Fingerprint", 0, "audit", "Fingerprint"),
    ("report-schema.md", "## Comparison output", 0, "compare", ""),
    ("watch-schema.md", "## Top level", 0, "watch", ""),
    ("watch-schema.md", "## `baseline`, `samples[]`", 0, "watch", "WatchSample"),
    ("watch-schema.md", "## Summary", 0, "watch", "Summary"),
    ("matrix.md", "# ", 0, "matrix", ""),
    ("matrix.md", "## `cells`", 0, "matrix", "Cell"),
    ("p2p-json.md", "# ", 0, "p2p", ""),
    ("p2p-json.md", "## `peers[]`", 0, "p2p", "Peer"),
    ("p2p-json.md", "## `copies[]`", 0, "p2p", "Copy"),
    ("p2p-json.md", "## `staging[]`", 0, "p2p", "Staging"),
    ("p2p-json.md", "## `checks[]`", 0, "p2p", "Check"),
    ("allreduce-json.md", "# ", 0, "allreduce", ""),
    ("allreduce-json.md", "## `results[]`", 0, "allreduce", "Result"),
    ("bench-kernels-json.md", "# ", 0, "bench.kernels", ""),
    ("bench-kernels-json.md", "## `copy`", 0, "bench.kernels", "Copy"),
    ("bench-kernels-json.md", "## `kernels[]`", 0, "bench.kernels", "Kernel"),
    ("info-json.md", "# ", 0, "info", ""),
    ("info-json.md", "## `loader`", 0, "info", "Loader"),
    ("info-json.md", "## `drivers[]`", 0, "info", "Driver"),
    ("info-json.md", "## `drivers[].devices[]`", 0, "info", "Device"),
]

_WORDS = {
    "string": "string",
    "strings": "string",
    "int": "integer",
    "number": "number",
    "bool": "boolean",
    "list": "array",
    "object": "object",
    "null": "null",
}
_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


def _table(page: str, heading: str, index: int) -> list[list[str]]:
    """Return the rows (cells) of the ``index``-th table after ``heading`` and before the next heading."""
    lines = (DOCS / page).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(heading))
    tables: list[list[list[str]]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if tables and tables[-1]:
                tables.append([])
            continue
        if not tables:
            tables.append([])
        tables[-1].append([c.strip() for c in line.strip("|").split(" | ")])
    found = [t for t in tables if t]
    return found[index]


def _types(schema: dict[str, Any], sub: Any) -> set[str]:
    """Return the JSON types ``sub`` admits, through references and alternatives."""
    if "$ref" in sub:
        return _types(schema, schema["$defs"][sub["$ref"].rsplit("/", 1)[1]])
    if "anyOf" in sub:
        return set().union(*(_types(schema, s) for s in sub["anyOf"]))
    if "enum" in sub or "const" in sub:
        return {_JSON_TYPES[type(v)] for v in sub.get("enum", [sub.get("const")])}
    kind = sub.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def _doc_types(text: str) -> set[str]:
    """Return the JSON types a table's type cell names: ``list of int or null`` is array and null."""
    text = re.sub(r"list of \w+", "list", text)
    return {_WORDS[w] for w in re.findall(r"[a-z]+", text) if w in _WORDS}


def _fields_and_table(
    page: str, heading: str, index: int, name: str, where: str
) -> tuple[dict[str, Any], dict[str, Any], list[list[str]]]:
    """Return the schema ``name``, the fields of its part ``where`` (top level: ""), and the page's table."""
    schema = schemas.load(name)
    part = schema["$defs"][where] if where else schema
    return schema, part["properties"], _table(page, heading, index)


@pytest.mark.parametrize(("page", "heading", "index", "name", "where"), TABLES)
def test_each_table_lists_the_schemas_fields_with_their_types(
    page: str, heading: str, index: int, name: str, where: str
) -> None:
    schema, fields, (header, _rule, *rows) = _fields_and_table(page, heading, index, name, where)
    documented: set[str] = set()
    for row in rows:
        names = re.findall(r"`([^`]+)`", row[0])
        documented |= set(names)
        if header[1] != "type":
            continue  # a table of defaults or of meanings only
        unknown = [n for n in names if n not in fields]
        assert not unknown, (
            f"{page} {heading}: {unknown} not in the schema's {where or 'top level'}"
        )
        schema_types = set().union(*(_types(schema, fields[n]) for n in names))
        if "integer" in schema_types and "number" in _doc_types(row[1]):
            schema_types = (schema_types - {"integer"}) | {"number"}
        assert _doc_types(row[1]) == schema_types, f"{page}: {names} is {row[1]!r} in the table"
    missing = sorted(set(fields) - documented)
    assert not missing, f"{page} {heading}: the schema's {missing} are not in the table"
    extra = sorted(documented - set(fields))
    assert not extra, f"{page} {heading}: {extra} are in the table but not in the schema"


def _inline(schema: dict[str, Any], sub: Any) -> dict[str, Any]:
    """Return the properties of the object ``sub`` defines in place (not a named part of its own), else {}."""
    if "$ref" in sub or sub.get("type") not in ("object", ["object", "null"]):
        return {}
    return dict(sub.get("properties", {}))


@pytest.mark.parametrize(("page", "heading", "index", "name", "where"), TABLES)
def test_objects_described_in_a_row_name_every_field_the_schema_gives_them(
    page: str, heading: str, index: int, name: str, where: str
) -> None:
    # An object defined in place (options, exit, floor_stop) is described in its
    # row's meaning: every field of it the schema has is named there.
    schema, fields, (_header, _rule, *rows) = _fields_and_table(page, heading, index, name, where)
    for row in rows:
        for field in re.findall(r"`([^`]+)`", row[0]):
            inner = _inline(schema, fields.get(field, {}))
            if not inner:
                continue
            named = set(re.findall(r"`([a-z_][a-z0-9_]*)`", " ".join(row[1:])))
            missing = sorted(set(inner) - named)
            assert not missing, f"{page}: {field} has {missing} in the schema, not in its row"
