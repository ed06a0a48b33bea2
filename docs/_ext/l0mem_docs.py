"""What l0mem's documentation build adds to Sphinx: names that resolve as Python resolves them.

- ``.. l0mem-modules:: PACKAGE`` documents each module of a package: its docstring
  and what it defines beyond the names the package exports (those are documented
  once, on the package's page). Nothing is listed by hand.
- A reference resolves as Python would resolve the name in the module that makes
  it: an annotation's ``Event`` in :mod:`l0mem.core.appends` is the class that
  module imported, a docstring's ``:mod:`.kernels``` is a sibling module, and a
  name a package re-exports (``l0mem.backends.select.open_backend``) is documented
  under the package's name (``l0mem.backends.open_backend``).
- A reference to something l0mem has but documents only as part of what holds it
  (a dataclass field, a module's constant, a private helper) links to that holder.
  The name is looked up in Python first: a name l0mem does not have still fails.
- Click help is written for a terminal: ```l0mem info``` is code, ``*.prom``
  a star, not reStructuredText's emphasis, and a paragraph click keeps as it is
  (the exit codes) keeps its columns.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import pkgutil
import re
from types import ModuleType
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

PACKAGE = "l0mem"
logger = logging.getLogger(__name__)


class ModulesDirective(SphinxDirective):
    """``.. l0mem-modules:: PACKAGE``: each module of a package and what the package does not export."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        """Return the documentation of every module of the package, in name order."""
        package = importlib.import_module(self.arguments[0])
        exported = set(getattr(package, "__all__", ()))
        lines: list[str] = []
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            name = f"{package.__name__}.{info.name}"
            module = importlib.import_module(name)
            # What the module re-exports is documented where it is defined.
            elsewhere = {
                n
                for n in getattr(module, "__all__", ())
                if getattr(getattr(module, n, None), "__module__", name) != name
            }
            lines += [f".. rubric:: ``{name}``", "", f".. automodule:: {name}", "   :members:"]
            if exported | elsewhere:
                lines.append(f"   :exclude-members: {', '.join(sorted(exported | elsewhere))}")
            if info.name in exported:
                # The package exports an object of the module's name (l0mem.sycl.devices):
                # that name is the object's.
                lines.append("   :no-index:")
            lines.append("")
        return self.parse_text_to_nodes("\n".join(lines))


def _module(name: str) -> ModuleType | None:
    """Return the module ``name`` if it is one of l0mem's and imports, else None."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _declared(cls: type, name: str) -> bool:
    """Return whether instances of ``cls`` have ``name``: a field, a slot or an annotation.

    An annotation counts in the class body or as ``self.name: T = ...`` in a method.
    """
    if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
        return True
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return True
        if klass.__module__.startswith(PACKAGE + "."):
            try:
                annotations = ModuleAnalyzer.for_module(klass.__module__).annotations
            except PycodeError:
                continue
            if (klass.__qualname__, name) in annotations:
                return True
    return name in getattr(cls, "_fields", ())


def python_path(dotted: str) -> tuple[list[str], int] | None:
    """Return where Python finds the l0mem object ``dotted``, or None if l0mem has none.

    The path goes through the module that defines each class or function
    (``l0mem.watch.WatchSummary`` is ``l0mem.watch.summary.WatchSummary``), and
    comes with how many of its names are that module's; a field, slot or annotated
    attribute of a class counts as the class's.
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module(".".join(parts[:cut]))
        if module is not None:
            break
    else:
        return None
    path, obj = module.__name__.split("."), module
    module_len = len(path)
    for name in parts[cut:]:
        if hasattr(obj, name):
            child = getattr(obj, name)
            home = getattr(child, "__module__", None)
            qualname = getattr(child, "__qualname__", None)
            if isinstance(obj, ModuleType) and isinstance(home, str) and isinstance(qualname, str):
                if not home.startswith(PACKAGE + "."):
                    return None  # an object from outside l0mem
                path = [*home.split("."), *qualname.split(".")]
                module_len = len(home.split("."))
            else:
                path.append(name)
            obj = child
        elif isinstance(obj, type) and _declared(obj, name) and name == parts[-1]:
            path.append(name)
        else:
            return None
    return path, module_len


def _where(domain: Any, name: str) -> tuple[str, str] | None:
    """Return the page and anchor documenting ``name`` (an object or a module), or None."""
    entry = domain.objects.get(name)
    if entry is not None:
        return entry.docname, entry.node_id
    module = domain.modules.get(name)
    if module is not None:
        return module.docname, module.node_id
    return None


def _documented(domain: Any, path: list[str], module_len: int) -> str | None:
    """Return the name the object at ``path`` is documented by: its own, or a package's above."""
    if len(path) <= module_len:
        name = ".".join(path)
        return name if _where(domain, name) is not None else None
    for start in range(module_len, 0, -1):
        # l0mem.watch.summary.WatchSummary, then as l0mem.watch exports it, then l0mem.
        name = ".".join([*path[:start], *path[module_len:]])
        if _where(domain, name) is not None:
            return name
    return None


def qualify(app: Sphinx, doctree: nodes.document) -> None:
    """Resolve names in references as Python resolves them in the module that makes them.

    A type in a signature (a ``refspecific`` reference without a leading dot) is
    the object of that name in the module's namespace; a docstring's leading dot
    is relative to the module's package, as in an import.
    """
    for node in doctree.findall(pending_xref):
        if node.get("refdomain") != "py" or not node.hasattr("refspecific"):
            continue
        module = _module(node.get("py:module") or "")
        target = node["reftarget"]
        if module is None or target.startswith(PACKAGE + "."):
            continue
        if node["refspecific"]:
            base = module.__name__ if hasattr(module, "__path__") else module.__package__
            found = python_path(f"{base}.{target}")
        else:
            found = python_path(f"{module.__name__}.{target}")
        if found is not None:
            node["reftarget"] = ".".join(found[0])
            node["refspecific"] = False


def _documenting(node: nodes.Node) -> str | None:
    """Return the full name of the object whose documentation holds ``node``, or None."""
    parent = node.parent
    while parent is not None and not isinstance(parent, addnodes.desc_content):
        parent = parent.parent
    if parent is None or parent.parent is None:
        return None
    for signature in parent.parent.findall(addnodes.desc_signature):
        if signature.get("module") and signature.get("fullname"):
            return f"{signature['module']}.{signature['fullname']}"
    return None


def resolve(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Element | None:
    """Resolve a reference to an l0mem object the Python domain did not find.

    The name is looked up in Python from the class and module that make the
    reference outwards, as the docstring's reader would; found, the reference goes
    to where the object is documented: under the name its package exports it by,
    or, for what is documented only as part of what holds it, to that holder (its
    class or its module).
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    if hasattr(builtins, target.split(".")[0]):
        return None  # a builtin is Python's (a method named memoryview is not the type)
    context = ".".join(p for p in (node.get("py:module"), node.get("py:class")) if p)
    tried = [target] if target.startswith(PACKAGE + ".") else []
    if not tried and context:
        # From the object whose docstring it is outwards, where the object is
        # defined (l0mem.estimate.windows is l0mem.estimate.steps.windows), then
        # from the class or module it is documented in.
        scopes = [context.split(".")]
        for name in (_documenting(node), context):
            defined = python_path(name) if name else None
            if defined is not None:
                scopes.insert(0, defined[0])
        for scope in scopes:
            tried += [".".join([*scope[:cut], target]) for cut in range(len(scope), 0, -1)]
    domain = env.get_domain("py")
    for dotted in tried:
        found = python_path(dotted)
        if found is None:
            continue
        path, module_len = found
        for length in range(len(path), module_len - 1, -1):
            name = _documented(domain, path[:length], module_len)
            if name is not None:
                docname, anchor = _where(domain, name) or ("", "")
                logger.debug("l0mem_docs: %s (in %s) resolved to %s", target, context, name)
                return make_refnode(app.builder, node["refdoc"], docname, anchor, contnode, name)
    return None


_LITERAL = re.compile(r"(``.+?``)")
_SINGLE_BACKTICKS = re.compile(r"(?<![`:\w])`([^`]+)`(?![`_\w])")
_LONE_STAR = re.compile(r"(?<![*\\])\*(?![*])")


def click_text(app: Sphinx, ctx: Any, lines: list[str]) -> None:
    """Make click help read as on a terminal.

    A paragraph click keeps as it is (``\\b``, such as the exit codes' table),
    which sphinx-click gives as a line block, is a literal block: its columns
    stay aligned. Elsewhere `code` is code and a lone * a star.
    """
    out: list[str] = []
    kept = False
    for line in lines:
        if line.startswith("|"):
            if not kept:
                out += ["", "::", ""]
                kept = True
            out.append("    " + line[2:])
            continue
        if kept:
            out.append("")
            kept = False
        if not line.lstrip().startswith(".."):
            pieces = _LITERAL.split(_SINGLE_BACKTICKS.sub(r"``\1``", line))
            line = "".join(p if p.startswith("``") else _LONE_STAR.sub(r"\\*", p) for p in pieces)
        out.append(line)
    lines[:] = out


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive, the name resolution and the click text."""
    app.setup_extension("sphinx_click")
    app.add_directive("l0mem-modules", ModulesDirective)
    app.connect("doctree-read", qualify)
    app.connect("missing-reference", resolve)
    for event in ("description", "usage", "options", "arguments", "envvars", "epilog"):
        app.connect(f"sphinx-click-process-{event}", click_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
