"""The wheel: built with the tracer inside, tagged manylinux, and tracing where no compiler is.

Built by ``.ci/wheel`` as a release is, installed into a fresh virtual
environment, and run there with a PATH that holds no C compiler and an empty
per-user cache: ``l0mem run --trace`` must trace with the tracer the wheel
carries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from l0mem.trace import build
from tests.support import sim
from tests.support.installed import as_user, build_wheel, fresh_venv

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "examples" / "peer_resident_job.py"
MIB = 1 << 20


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the wheel .ci/wheel builds."""
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_the_wheel_carries_the_tracer_built_from_its_source_and_a_manylinux_tag(
    wheel: Path,
) -> None:
    assert "-py3-none-manylinux_" in wheel.name and wheel.name.endswith("_x86_64.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert f"l0mem/trace/{build.LIBRARY_NAME}" in names
        assert "l0mem/_sim/libze_sim.so" in names  # what l0mem demo runs on
        digest = zf.read(f"l0mem/trace/{build.PACKAGED_DIGEST.name}").decode().strip()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert digest == build.digest()
    assert "Root-Is-Purelib: false" in meta


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a fresh virtual environment with the wheel (and its dependencies) installed."""
    return fresh_venv(tmp_path_factory.mktemp("venv") / "env", wheel)


def _packaged(venv: Path, env: dict[str, str], cwd: Path) -> str:
    """Return where the l0mem installed in ``venv`` finds a packaged tracer ("None": nowhere)."""
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import l0mem.trace.build as b; print(b.packaged())"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=True,
    ).stdout.strip()


def test_run_trace_traces_with_the_wheels_tracer_where_no_compiler_is(
    venv: Path, tmp_path: Path
) -> None:
    bin_dir = venv / "bin"
    assert all(shutil.which(cc, path=str(bin_dir)) is None for cc in build.COMPILERS)
    env = as_user(sim.sim_env(devices=2, mirror="peer-resident"), venv, tmp_path)
    cache = Path(env["XDG_CACHE_HOME"])
    report = tmp_path / "run.json"
    job = ["python", str(JOB), "--gib", "0.25", "--steps", "2", "--pause", "0.2", "--hold", "0.2"]
    proc = subprocess.run(
        [str(bin_dir / "l0mem"), "run", "--trace", "--quiet", "--json", str(report), "--", *job],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    data = json.loads(report.read_text())
    assert data["tracing"] is True
    allocated = [d["allocated_peak"] for d in data["trace"]["devices"]]
    assert max(allocated) == 256 * MIB, data["trace"]
    assert not any(cache.rglob(build.LIBRARY_NAME)), (
        "the tracer was built, not taken from the wheel"
    )
    # The l0mem that ran is the wheel's, not this checkout's.
    where = _packaged(venv, env, tmp_path)
    assert where.startswith(str(venv)) and where.endswith(build.LIBRARY_NAME)


def test_the_demo_runs_on_the_simulated_driver_the_wheel_carries(
    venv: Path, tmp_path: Path
) -> None:
    bin_dir = venv / "bin"
    # Nothing points it at a simulator: the one the wheel carries is the one it finds.
    user = {k: v for k, v in os.environ.items() if not k.startswith("ZESIM_")}
    env = as_user(user, venv, tmp_path)
    out = tmp_path / "demo"
    proc = subprocess.run(
        [str(bin_dir / "l0mem"), "demo", "--size", "32M", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    audit = json.loads((out / "audit.json").read_text())
    assert audit["runs"] and all(r["simulated"] for r in audit["runs"])
    assert json.loads((out / "run.json").read_text())["simulated"] is True


def test_the_installed_wheel_offers_its_pytest_plugin(venv: Path, tmp_path: Path) -> None:
    code = (
        "from importlib.metadata import entry_points; "
        "print(*sorted(e.name + '=' + e.value for e in entry_points(group='pytest11')))"
    )
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert "l0mem=l0mem.pytest_plugin" in found


@pytest.mark.parametrize("recorded", ["same", "other", "absent"])
def test_a_packaged_tracer_is_used_only_where_it_was_built_from_this_source(
    recorded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library, digest = tmp_path / build.LIBRARY_NAME, tmp_path / build.PACKAGED_DIGEST.name
    library.write_bytes(b"\x7fELF")
    if recorded != "absent":
        digest.write_text((build.digest() if recorded == "same" else "0" * 16) + "\n")
    monkeypatch.setattr(build, "PACKAGED", library)
    monkeypatch.setattr(build, "PACKAGED_DIGEST", digest)
    monkeypatch.delenv(build.PREBUILT_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if recorded == "same":
        assert build.packaged() == library and build.library() == library
    else:
        # A tracer left from another tracer.c is never preloaded: it is built anew.
        assert build.packaged() is None
        built = build.library()
        assert built != library and built.is_relative_to(tmp_path / "cache")


def _tree(dest: Path) -> Path:
    """Return a copy of this checkout's tracked files at ``dest``: what a user clones."""
    files = (
        subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def checkout_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a fresh environment that ``pip install .`` filled from a checkout, no compiler on PATH."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to copy")
    tree = _tree(tmp_path_factory.mktemp("checkout") / "l0mem")
    root = tmp_path_factory.mktemp("plain") / "env"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = str(root / "bin")
    return fresh_venv(root, tree, env)


def test_a_checkout_installs_and_audits_with_no_compiler(
    checkout_venv: Path, tmp_path: Path
) -> None:
    # The README's quick start: pip install . where no C compiler is. The install goes
    # without the tracer; the audit needs none.
    bin_dir = checkout_venv / "bin"
    assert all(shutil.which(cc, path=str(bin_dir)) is None for cc in build.COMPILERS)
    env = as_user(sim.sim_env(devices=2, mirror="peer-resident"), checkout_venv, tmp_path)
    assert _packaged(checkout_venv, env, tmp_path) == "None"
    report = tmp_path / "audit.json"
    proc = subprocess.run(
        [
            str(bin_dir / "l0mem"),
            "audit",
            "--setups",
            "l0,l0-peer-resident",
            "--size",
            "64M",
            "--quiet",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    verdicts = {r["setup"]: r["result"]["verdict"] for r in json.loads(report.read_text())["runs"]}
    # Beside a loaded machine a set-up may be inconclusive; never a wrong verdict.
    assert set(verdicts) == {"l0", "l0-peer-resident"}
    assert verdicts["l0"] in ("clean", "inconclusive"), proc.stdout
    assert verdicts["l0-peer-resident"] in ("mirror", "inconclusive"), proc.stdout


def test_run_trace_without_the_tracer_or_a_compiler_says_what_to_install(
    checkout_venv: Path, tmp_path: Path
) -> None:
    env = as_user(sim.sim_env(devices=2), checkout_venv, tmp_path)
    proc = subprocess.run(
        [str(checkout_venv / "bin" / "l0mem"), "run", "--trace", "--", "python", "-c", "pass"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l0mem run: ")
    assert "C compiler" in lines[0] and "install" in lines[0]
