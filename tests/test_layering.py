"""The layering of the whole l0mem package, checked on its source.

Layers, each importing only downward::

    _ze  ->  core, sycl  ->  backends  ->  allreduce, probe, trace, bench  ->  estimate  ->  audit, watch  ->  plots  ->  cli  ->  _entry  ->  __main__

``units``, ``files``, ``keepalive``, ``bf16``, ``driverenv``, ``jsonfields`` and ``schemas`` (the
reports' JSON Schemas) are leaves (and the
root ``l0mem`` holds only ``__version__``): they import nothing of l0mem, and every layer from
``backends`` up may import them. ``probe`` imports only leaves; ``bench``
measures ``allreduce`` and reads ``probe``. ``trace`` (the allocation tracer a
watched workload loads) imports only leaves too; ``estimate`` (signals, fits,
verdicts and their uncertainty) reads ``probe`` only, and both ``audit`` and
``watch`` judge with it, side by side (neither imports the other); ``watch``
(``l0mem run`` and ``watch``) reads ``probe`` and ``trace``; ``pytest_plugin`` (l0mem's
pytest plugin) reads ``probe`` and ``estimate``; ``plots`` draws the reports of ``audit``,
``watch`` and ``bench`` (``p2p``). Every import counts: at module
level, inside functions, under ``TYPE_CHECKING``, and a module named as a
string (``importlib.import_module``).

A private name (leading underscore) is private to the package that holds it:
``l0mem._ze`` to l0mem, ``l0mem.core._raw`` to ``l0mem.core``,
``l0mem.cli._common`` to ``l0mem.cli``. A module may import a private module
of its own package, never a private function, class or constant of another
module (tests may).

Every package ``__init__`` and top-level module says in its docstring what
it is for and, in a paragraph starting ``What it may import:``, exactly which
l0mem packages it may import (the table below), or ``nothing of l0mem``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "l0mem"
LEAVES = frozenset(
    {"units", "files", "bf16", "keepalive", "driverenv", "jsonfields", "text", "schemas"}
)
ROOT = "l0mem"  # l0mem/__init__.py: __version__ only

_BELOW_BACKENDS = frozenset({"_ze", "core", "sycl"})
_MEASUREMENT = frozenset({"backends", "allreduce", "probe", "bench"})
# unit -> the l0mem units it may import besides itself (leaves and root included).
ALLOWED: dict[str, frozenset[str]] = {
    "_ze": frozenset(),
    "core": frozenset({"_ze"}),
    "sycl": frozenset(),
    "backends": _BELOW_BACKENDS | LEAVES | {ROOT},
    "probe": LEAVES | {ROOT},
    "trace": LEAVES | {ROOT},
    "allreduce": _BELOW_BACKENDS | {"backends"} | LEAVES | {ROOT},
    "bench": _BELOW_BACKENDS | _MEASUREMENT | LEAVES | {ROOT},
    "estimate": frozenset({"probe"}) | LEAVES | {ROOT},
    "pytest_plugin": frozenset({"probe", "estimate"}) | LEAVES | {ROOT},
    "audit": _BELOW_BACKENDS | _MEASUREMENT | {"estimate"} | LEAVES | {ROOT},
    "watch": _BELOW_BACKENDS | _MEASUREMENT | {"trace", "estimate"} | LEAVES | {ROOT},
    "plots": frozenset({"bench", "estimate", "audit", "watch"}) | LEAVES | {ROOT},
    "cli": _BELOW_BACKENDS | _MEASUREMENT | {"trace", "estimate", "audit", "watch", "plots"} | LEAVES | {ROOT},
    "_entry": frozenset({"cli"}),
    "__main__": frozenset({"_entry"}),
    **{leaf: frozenset() for leaf in LEAVES},
    # text is the lowest leaf (it imports nothing): a file's name in an error is shown through it.
    "files": frozenset({"text"}),
    ROOT: frozenset(),
}
MODULE_NAME = re.compile(r"^l0mem(\.[A-Za-z_]\w*)+$")


def _units() -> dict[str, list[Path]]:
    """Return every unit of the package (subpackage or top-level module) with its files."""
    units: dict[str, list[Path]] = {ROOT: [PACKAGE / "__init__.py"]}
    for path in sorted(PACKAGE.iterdir()):
        if path.is_dir() and (path / "__init__.py").is_file():
            units[path.name] = sorted(path.rglob("*.py"))
        elif path.suffix == ".py" and path.name != "__init__.py":
            units[path.stem] = [path]
    return units


UNITS = _units()
FILES = [(unit, path) for unit, paths in UNITS.items() for path in paths]
HEADS = {
    unit: (PACKAGE / unit / "__init__.py") if (PACKAGE / unit).is_dir() else paths[0]
    for unit, paths in UNITS.items()
}


def _module_of(path: Path) -> str:
    """Return the dotted module name of a file of the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit_of(module: str) -> str:
    """Return the unit a dotted l0mem module name belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _imports(path: Path, source: str | None = None) -> list[tuple[int, str, str | None]]:
    """Return (line, module, name) for every l0mem import in ``path`` (or ``source``); name None for a module."""
    found: list[tuple[int, str, str | None]] = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, "<relative>", None))
        elif isinstance(node, ast.ImportFrom) and node.module and _is_l0mem(node.module):
            found.extend((node.lineno, node.module, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, None) for a in node.names if _is_l0mem(a.name))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and MODULE_NAME.match(node.value)
        ):
            found.append((node.lineno, node.value, None))
    return found


def _is_l0mem(module: str) -> bool:
    """Return True for l0mem or one of its modules."""
    return module == ROOT or module.startswith(ROOT + ".")


def _imported_units(path: Path) -> set[str]:
    """Return the units a file imports: of ``from l0mem import x`` the unit x when it is one."""
    units = set()
    for _, module, name in _imports(path):
        if module == ROOT and name in UNITS:
            units.add(name)
        elif module != "<relative>":
            units.add(_unit_of(module))
    return units


def test_the_table_covers_every_unit() -> None:
    assert set(UNITS) == set(ALLOWED)


@pytest.mark.parametrize(("unit", "path"), FILES, ids=lambda v: getattr(v, "name", v))
def test_imports_only_downward(unit: str, path: Path) -> None:
    imported = _imported_units(path) - {unit}
    assert imported <= ALLOWED[unit], (
        f"{path.relative_to(PACKAGE)} imports {sorted(imported - ALLOWED[unit])}"
    )


@pytest.mark.parametrize(("unit", "path"), FILES, ids=lambda v: getattr(v, "name", v))
def test_no_relative_imports(unit: str, path: Path) -> None:
    # Relative imports would hide which unit a module reaches into.
    assert [line for line, module, _ in _imports(path) if module == "<relative>"] == []


def _private_reach(path: Path, source: str | None = None) -> list[str]:
    """Return the imports in ``path`` (or ``source`` as if it were there) of private names it does not own."""
    me = _module_of(path)
    my_package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    bad = []
    for line, module, name in _imports(path, source):
        if module == "<relative>":
            continue
        parts = module.split(".")
        for k, part in enumerate(parts):
            # A private module is visible inside the package that holds it.
            owner = ".".join(parts[:k])
            if part.startswith("_") and not (my_package + ".").startswith(owner + "."):
                bad.append(f"line {line}: {module}")
        if name is None or not name.startswith("_") or name.startswith("__"):
            continue
        is_module = (PACKAGE.parent / module.replace(".", "/") / name).is_dir() or (
            PACKAGE.parent / module.replace(".", "/") / f"{name}.py"
        ).is_file()
        if not (is_module and module == my_package):
            bad.append(f"line {line}: {name} from {module}")
    return bad


@pytest.mark.parametrize(
    ("unit", "path"), [f for f in FILES if f[0] != "_ze"], ids=lambda v: getattr(v, "name", v)
)
def test_no_private_name_of_another_module(unit: str, path: Path) -> None:
    assert _private_reach(path) == []


def _may_import_paragraph(doc: str) -> str:
    """Return the docstring's paragraph that starts with "What it may import:" (or "")."""
    for paragraph in re.split(r"\n\s*\n", doc):
        if paragraph.lstrip().startswith("What it may import:"):
            return " ".join(paragraph.split())
    return ""


@pytest.mark.parametrize("unit", sorted(HEADS))
def test_docstring_says_what_it_is_for_and_what_it_may_import(unit: str) -> None:
    doc = ast.get_docstring(ast.parse(HEADS[unit].read_text())) or ""
    assert doc.splitlines() and len(doc.splitlines()[0]) > 20, f"{unit}: no purpose line"
    paragraph = _may_import_paragraph(doc)
    assert paragraph, f"{unit}: no 'What it may import:' paragraph"
    named = {_unit_of(m) for m in re.findall(r"\bl0mem(?:\.\w+)+", paragraph)} - LEAVES - {unit}
    assert named == ALLOWED[unit] - LEAVES - {ROOT, unit}
    if not ALLOWED[unit]:
        assert "nothing of l0mem" in paragraph


def test_the_checks_see_lazy_and_private_imports() -> None:
    # The checks must not pass by seeing nothing.
    assert "backends" in _imported_units(PACKAGE / "cli" / "info.py")  # inside a function
    by_name = {m for _, m, _ in _imports(PACKAGE / "cli" / "__init__.py")}
    assert "l0mem.cli.audit" in by_name  # a module named as a string, for importlib
    source = (
        "def f():\n"
        "    from l0mem.sycl._runtime import load_dpctl\n"
        "    from l0mem.core.device import _QUEUE_GROUP_COPY\n"
        "    from l0mem._ze.errors import ZeError\n"
        "    from l0mem.backends import _nothing\n"
    )
    assert _private_reach(PACKAGE / "backends" / "sycl.py", source) == [
        "line 2: l0mem.sycl._runtime",
        "line 3: _QUEUE_GROUP_COPY from l0mem.core.device",
        "line 5: _nothing from l0mem.backends",
    ]
    # Inside its own package a private module is fine, a private function of a sibling is not.
    source = "from l0mem.core import _raw\nfrom l0mem.core._raw import _call\n"
    assert _private_reach(PACKAGE / "core" / "device.py", source) == [
        "line 2: _call from l0mem.core._raw"
    ]
