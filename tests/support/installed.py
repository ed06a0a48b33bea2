"""l0mem as a user installs it: the wheel .ci/wheel builds, a fresh environment, no compiler on PATH.

Shared by the wheel's tests (tests/test_wheel.py) and the quick start's
timing (benchmarks/bench_quickstart.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from l0mem.trace import build

REPO = Path(__file__).resolve().parents[2]


def build_wheel(out: Path) -> Path:
    """Return the wheel ``.ci/wheel`` builds into ``out`` (with this environment's tools)."""
    proc = subprocess.run(
        ["bash", str(REPO / ".ci" / "wheel"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "L0MEM_VENV": str(Path(sys.executable).parents[1])},
    )
    if proc.returncode != 0:
        raise RuntimeError(f".ci/wheel failed: {proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def fresh_venv(root: Path, what: Path, env: Mapping[str, str] | None = None) -> Path:
    """Return a new virtual environment at ``root`` with ``what`` (a wheel or a source tree) pip-installed."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    proc = subprocess.run(
        [str(root / "bin" / "python"), "-m", "pip", "install", "-q", str(what)],
        capture_output=True,
        text=True,
        timeout=600,
        env=None if env is None else dict(env),
        cwd=what if what.is_dir() else None,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip install {what.name} failed: {proc.stderr[-3000:]}")
    return root


def as_user(base: Mapping[str, str], venv: Path, home: Path) -> dict[str, str]:
    """Return ``base`` as a user of the installed l0mem has it: its venv alone on PATH, no compiler.

    Nothing of this checkout (PYTHONPATH, its venv, a tracer or simulator
    built elsewhere) and an empty per-user cache under ``home``.
    """
    env = {
        k: v
        for k, v in base.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", build.PREBUILT_VAR, "L0MEM_SIM_LIBRARY")
    }
    (home / "cache").mkdir(parents=True, exist_ok=True)
    env.update(PATH=str(venv / "bin"), XDG_CACHE_HOME=str(home / "cache"), HOME=str(home))
    return env
