"""Build hooks: the wheel carries the ``run --trace`` tracer and the simulated driver, built then.

The tracer is a shared library preloaded into a user's job, not a Python
extension, so the wheel is tagged for the platform but for no Python ABI
(``py3-none-<platform>``); ``.ci/wheel`` then checks its libraries against the
manylinux policy and gives it that tag (auditwheel). Without a C compiler the
wheel is built without the tracer and l0mem builds it on first use, as a
source checkout does. The simulated Level Zero driver (``tests/simdriver``,
what ``l0mem demo`` runs on where there is no Intel GPU) goes in where its
sources, gcc and the Level Zero headers are there (a checkout after
``.ci/dev setup``); a wheel without it says so when ``demo`` is run.
Everything else is in pyproject.toml.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
# Set (to 1) where a wheel without the tracer or the simulator must not be built: .ci/wheel.
REQUIRE = "L0MEM_WHEEL_REQUIRE_TRACER"


def _from_tree(name: str) -> ModuleType:
    """Return module ``name`` of this source tree (it and what it imports: standard library only)."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT))


def _built(what: str, build: Callable[[], None], failed: type[Exception]) -> bool:
    """Run ``build``; where it fails, stop (under .ci/wheel) or say the wheel goes without ``what``."""
    try:
        build()
    except failed as exc:
        if os.environ.get(REQUIRE) == "1":
            raise SystemExit(f"l0mem: {exc}") from None
        print(f"l0mem: wheel without {what} ({exc})")
        return False
    return True


class BuildWithTracer(build_py):
    """Build the Python files, then the simulated driver and the tracer beside them."""

    def run(self) -> None:
        super().run()
        out = Path(self.build_lib) / "l0mem"
        # A build directory is reused: nothing an earlier build left may ship unbuilt now.
        # An sdist holds no tests/: its wheel goes without the simulator.
        if (ROOT / "tests" / "support" / "sim.py").is_file():
            sim = _from_tree("tests.support.sim")
            target = out / "_sim" / sim.LIBRARY_NAME
            target.unlink(missing_ok=True)
            _built("the simulated driver", lambda: sim.build_into(target), sim.SimBuildError)
        build = _from_tree("l0mem.trace.build")
        tracer = out / "trace" / build.LIBRARY_NAME
        digest = tracer.with_name(build.PACKAGED_DIGEST.name)
        for left in (tracer, digest):
            left.unlink(missing_ok=True)
        what = "the tracer (built on first use instead)"
        if _built(what, lambda: build.build_into(tracer), build.TraceBuildError):
            digest.write_text(build.digest() + "\n")


class WithBinary(Distribution):
    """A distribution holding a binary: installed into platlib, its wheel tagged for the platform."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Tag the wheel for the platform the tracer was built for, for any Python 3."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=WithBinary, cmdclass={"build_py": BuildWithTracer, "bdist_wheel": PlatformWheel})
