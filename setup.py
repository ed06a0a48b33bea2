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

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
# Set (to 1) where a wheel without the tracer or the simulator must not be built: .ci/wheel.
REQUIRE = "L0MEM_WHEEL_REQUIRE_TRACER"


def _sim_build() -> ModuleType | None:
    """Return tests/support/sim.py (standard library only), or None where the tree has no simulator."""
    path = ROOT / "tests" / "support" / "sim.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("l0mem_sim_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trace_build() -> ModuleType:
    """Return l0mem.trace.build from this source tree (standard library only)."""
    sys.path.insert(0, str(ROOT))
    try:
        from l0mem.trace import build
    finally:
        sys.path.remove(str(ROOT))
    return build


class BuildWithTracer(build_py):
    """Build the Python files, then the tracer next to ``tracer.c`` with its digest."""

    def run(self) -> None:
        super().run()
        self._simulator()
        build = _trace_build()
        out = Path(self.build_lib) / "l0mem" / "trace"
        try:
            build.build_into(out / build.LIBRARY_NAME)
        except build.TraceBuildError as exc:
            if os.environ.get(REQUIRE) == "1":
                raise SystemExit(f"l0mem: {exc}") from None
            print(f"l0mem: wheel without the tracer ({exc}); it is built on first use")
            return
        (out / build.PACKAGED_DIGEST.name).write_text(build.digest() + "\n")

    def _simulator(self) -> None:
        sim = _sim_build()
        if sim is None:
            return
        try:
            sim.build_into(Path(self.build_lib) / "l0mem" / "_sim" / sim.LIBRARY_NAME)
        except sim.SimBuildError as exc:
            if os.environ.get(REQUIRE) == "1":
                raise SystemExit(f"l0mem: {exc}") from None
            print(f"l0mem: wheel without the simulated driver ({exc})")


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
