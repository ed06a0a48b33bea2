"""``l0mem --version``: l0mem's version, the Level Zero loader's and the SYCL runtime's.

Nothing here opens a device or initializes a driver: the loader is loaded to
ask ``zelLoaderGetVersions`` (which answers for the loader itself before any
``zeInit``), and the SYCL runtime's versions come from the installed
packages' metadata, without importing dpctl. Whatever is missing is said to
be, in the line where it would be.
"""

from __future__ import annotations

import importlib.metadata
import re

from l0mem import __version__

# The SYCL runtime as the Python packages l0mem's sycl extra installs name it.
SYCL_PACKAGES = ("dpctl", "intel-sycl-rt", "intel-opencl-rt")


def _loader_line() -> str:
    from l0mem._ze import LoaderNotFoundError, loader_path, loader_versions

    try:
        versions = loader_versions()
        path = loader_path()
    except LoaderNotFoundError as exc:
        return f"Level Zero loader: not found ({exc})"
    except Exception as exc:  # a loader that loads but cannot answer: say so, never crash
        return f"Level Zero loader: version unknown ({type(exc).__name__}: {exc})"
    loader = [v for name, v in versions if name == "loader"]
    if loader:
        version = ".".join(map(str, loader[0]))
    else:
        # Loaders before 1.9 list no components before zeInit: the file says its version.
        found = re.search(r"\.so\.(\d+\.\d+\.\d+)$", path or "")
        version = found.group(1) if found else "version unknown"
    return f"Level Zero loader {version} ({path or 'path unknown'})"


def _package(name: str) -> str:
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{name} not installed"


def version_text() -> str:
    """Return the lines ``l0mem --version`` prints."""
    sycl = ", ".join(_package(name) for name in SYCL_PACKAGES)
    return "\n".join((f"l0mem {__version__}", _loader_line(), f"SYCL runtime: {sycl}"))


__all__ = ["SYCL_PACKAGES", "version_text"]
