"""Sphinx configuration of l0mem's documentation site.

Built offline (no intersphinx) with warnings as errors and nitpicky references:
``sphinx-build -W --keep-going -n -b html docs docs/_build/html``. MyST reads the
Markdown pages as they are; the CLI reference is generated from the click commands
(sphinx-click), the Python API reference from the docstrings (autodoc).
Nothing is mocked: l0mem imports without a GPU, a loader or dpctl.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

from l0mem import __version__  # noqa: E402

project = "l0mem"
author = "the l0mem authors"
copyright = "the l0mem authors"
version = release = __version__

extensions = [
    "myst_parser",
    # l0mem's docstrings are reStructuredText sentences, not Google or NumPy
    # sections: autodoc alone, no napoleon.
    "sphinx.ext.autodoc",
    "sphinx_click",
    "l0mem_docs",  # docs/_ext/l0mem_docs.py: the modules directive and name resolution
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

html_theme = "pydata_sphinx_theme"
html_title = f"l0mem {release}"

# Option names stay as typed: no "--help" turned into an en dash.
smartquotes = False

# Headings down to ### get anchors, so that pages link to each other's sections.
myst_heading_anchors = 3

# A class's members in the order its source defines them.
autodoc_member_order = "bysource"

# Nitpicky: every reference must resolve. What lies outside l0mem (builtins, the
# standard library, numpy, click, ...) has no target here, since the build uses no
# network (no intersphinx): only references to those are let go. Every reference
# to l0mem's own objects must resolve.
_OUTSIDE = (
    "builtins|typing|typing_extensions|collections|collections\\.abc|ctypes|_ctypes|os|"
    "pathlib|threading|subprocess|signal|enum|types|io|abc|contextlib|dataclasses|datetime|"
    "concurrent\\.futures|queue|selectors|socket|random|numpy|click|rich|dpctl|psutil|"
    "pytest|_pytest"
)
_BUILTINS = (
    "int|float|complex|str|bytes|bytearray|memoryview|bool|object|None|NoneType|list|dict|"
    "tuple|set|frozenset|type|slice|range|Ellipsis|BaseException|Exception|\\w+Error|\\w+Warning"
)
nitpick_ignore_regex = [
    ("py:.*", f"({_OUTSIDE})\\..+"),
    ("py:.*", f"({_BUILTINS})(\\[.*)?"),
]
