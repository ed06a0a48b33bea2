"""The README quick start, timed: install the wheel into a fresh environment, then ``l0mem demo`` to its answer.

    python -m benchmarks.bench_quickstart [--wheel PATH] [--json PATH]

Builds the wheel as a release is (``.ci/wheel``; not part of the user's
time) unless ``--wheel`` gives one, then times what a user does: a new
virtual environment and ``pip install`` of the wheel (its dependencies from
PyPI or pip's cache, as the user's machine has them), and ``l0mem demo``
with that environment alone on PATH (no C compiler) and an empty per-user
cache, to its exit. The README's figure ("install 6 s, l0mem demo 41 s")
is this script's output; the issue's bound is five minutes for the whole.
The demo runs on l0mem's simulated driver: its answer is a simulation's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.installed import as_user, build_wheel, fresh_venv

BOUND_S = 300.0  # the quick start's bound: an answer within five minutes


def measure(wheel: Path | None, work: Path) -> dict[str, float | str]:
    """Return the seconds each step of the quick start took (and the wheel timed)."""
    if wheel is None:
        started = time.monotonic()
        wheel = build_wheel(work / "dist")
        built_s = time.monotonic() - started
    else:
        built_s = 0.0
    started = time.monotonic()
    venv = fresh_venv(work / "env", wheel)
    install_s = time.monotonic() - started
    user = {k: v for k, v in os.environ.items() if not k.startswith("ZESIM_")}
    env = as_user(user, venv, work / "home")
    started = time.monotonic()
    proc = subprocess.run(
        [str(venv / "bin" / "l0mem"), "demo", "--out", str(work / "demo")],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=1200,
    )
    demo_s = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"l0mem demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {
        "wheel": wheel.name,
        "build_s": round(built_s, 1),
        "install_s": round(install_s, 1),
        "demo_s": round(demo_s, 1),
        "total_s": round(install_s + demo_s, 1),
        "bound_s": BOUND_S,
    }


def main(argv: list[str] | None = None) -> int:
    """Time the quick start and print each step; exit 1 past the five-minute bound."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a built wheel (default: build one)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="l0mem-quickstart-") as tmp:
        found = measure(args.wheel, Path(tmp))
    print(f"wheel {found['wheel']} (built in {found['build_s']} s, not counted)")
    print(f"install (venv + pip install): {found['install_s']} s")
    print(f"l0mem demo to its answer:     {found['demo_s']} s (l0mem's simulated driver)")
    print(f"total: {found['total_s']} s against a bound of {BOUND_S:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0 if float(found["total_s"]) <= BOUND_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
