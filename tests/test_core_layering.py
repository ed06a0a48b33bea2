"""The rules particular to l0mem._ze and l0mem.core, checked on their source.

Core reaches C routines, structs and handle types through typed attributes,
never by name strings, and no module of either reads another object's private
attributes. What each package may import is checked for the whole package in
tests/test_layering.py.
"""

from __future__ import annotations

import ast
import enum
from pathlib import Path

import pytest

from l0mem._ze import enums, functions, scalars, structs

PACKAGE = Path(__file__).resolve().parents[1] / "l0mem"
ZE = sorted((PACKAGE / "_ze").glob("*.py"))
CORE = sorted((PACKAGE / "core").glob("*.py"))

C_NAMES = (
    {name for name, *_ in functions.FUNCTIONS}
    | {n for n in structs.__all__ if isinstance(getattr(structs, n), type)}
    | {n for n in scalars.__all__ if n.islower()}
    | {
        n
        for n in enums.__all__
        if isinstance(getattr(enums, n), type) and issubclass(getattr(enums, n), enum.IntEnum)
    }
)
# Private names of other libraries with no public spelling.
FOREIGN_PRIVATE = {
    ("loader.py", "_handle"),  # ctypes.CDLL._handle, documented: the dlopen() handle
    ("module.py", "_SimpleCData"),  # ctypes' base of the scalar types
    ("memory.py", "_l0mem_owner"),  # l0mem's own tag on a ctypes array it created
}


def _tree(path: Path) -> ast.Module:
    """Return the parsed source of ``path``."""
    return ast.parse(path.read_text(), str(path))


def _docstrings(tree: ast.Module) -> set[int]:
    """Return the ids of the docstring nodes of the module, its classes and functions."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_names_no_c_routine_struct_or_handle_by_string(path: Path) -> None:
    tree = _tree(path)
    docs = _docstrings(tree)
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]
    assert [s for s in strings if s in C_NAMES] == []


@pytest.mark.parametrize("path", ZE + CORE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_private_attribute_of_another_object(path: Path) -> None:
    reached = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or node.attr.endswith("_"):
            continue  # dunders and ctypes' sunder names (_fields_, _stype_)
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if (path.name, node.attr) not in FOREIGN_PRIVATE:
            reached.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert reached == []
