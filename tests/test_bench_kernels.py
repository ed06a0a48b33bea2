"""The kernel benchmark runs and produces well-formed output (never checked for speed)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from l0mem.cli import cli
from l0mem.kernel_bench import SCHEMA, Measurement, run_kernel_bench, write_json
from l0mem.kernels import KERNELS
from l0mem.sycl import SyclBackend, SyclBuffer
from tests.support import sim

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--elements", "5000", "--repetitions", "2", "--warmup", "1"]


class _Tracking(SyclBackend):
    """A SyclBackend that remembers every allocation it handed out."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.handed_out: list[SyclBuffer] = []

    def allocate(self, device: int, nbytes: int) -> SyclBuffer:
        buf = super().allocate(device, nbytes)
        self.handed_out.append(buf)
        return buf


@pytest.fixture
def profiled() -> Iterator[_Tracking]:
    with _Tracking(["opencl:cpu"], profiling=True) as b:
        yield b


def test_measurement_summary() -> None:
    m = Measurement("x", 1000, (30, 10, 20))
    assert m.median_ns == 20
    assert m.gbps == pytest.approx(50.0)
    slow, fast = m.gbps_range
    assert slow == pytest.approx(1000 / 30) and fast == pytest.approx(100.0)
    assert m.spread == pytest.approx(1.0)
    d = m.to_dict()
    assert d["samples_ns"] == [30, 10, 20] and d["gbps"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="no samples"):
        _ = Measurement("y", 1, ()).median_ns


def test_run_with_device_timing(profiled: _Tracking) -> None:
    n = 10_000
    r = run_kernel_bench(profiled, elements=n, repetitions=3, warmup=1)
    assert r.timing == "device"
    assert r.backend == "sycl" and "opencl:cpu" in r.device
    assert r.copy.bytes_moved == 8 * n
    assert [m.name for m in r.kernels] == list(KERNELS)
    assert [m.bytes_moved for m in r.kernels] == [6 * n, 10 * n, 12 * n]
    for m in (r.copy, *r.kernels):
        assert len(m.samples_ns) == 3
        assert all(ns > 0 for ns in m.samples_ns)
    for m in r.kernels:
        assert r.ratio(m.name) == pytest.approx(m.gbps / r.copy.gbps)
    assert len(profiled.handed_out) == 4
    assert all(buf.closed for buf in profiled.handed_out), "benchmark buffers must be freed"


def test_falls_back_to_host_timing_without_profiling() -> None:
    with SyclBackend(["opencl:cpu"]) as b:
        r = run_kernel_bench(b, elements=1000, repetitions=2, warmup=0, kernels=["l0mem_f32_add"])
    assert r.timing == "host"
    assert [m.name for m in r.kernels] == ["l0mem_f32_add"]
    assert all(ns > 0 for ns in r.kernels[0].samples_ns)


def test_bad_arguments(profiled: _Tracking) -> None:
    with pytest.raises(ValueError, match="unknown kernel"):
        run_kernel_bench(profiled, elements=10, kernels=["l0mem_nope"])
    with pytest.raises(ValueError, match="elements"):
        run_kernel_bench(profiled, elements=0)
    with pytest.raises(ValueError, match="repetitions"):
        run_kernel_bench(profiled, elements=10, repetitions=0)
    assert profiled.handed_out == []


def test_json_is_written_atomically_and_round_trips(profiled: _Tracking, tmp_path: Path) -> None:
    r = run_kernel_bench(profiled, elements=2000, repetitions=2, warmup=0)
    path = tmp_path / "bench.json"
    write_json(path, r)
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    assert data["elements"] == 2000 and data["timing"] == "device" and data["simulated"] is False
    assert [k["name"] for k in data["kernels"]] == list(KERNELS)
    for k in data["kernels"]:
        assert k["ratio_to_copy"] == pytest.approx(k["gbps"] / data["copy"]["gbps"])
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]
    with pytest.raises(OSError):
        write_json(tmp_path / "missing" / "bench.json", r)


def test_cli_prints_ratios_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    res = CliRunner().invoke(cli, ["bench", "kernels", "--device", "opencl:cpu", *SMALL, "--json", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("copy", *KERNELS):
        assert name in res.output
    assert "x copy" in res.output and "opencl:cpu:0" in res.output
    data = json.loads(out.read_text())
    assert data["schema"] == SCHEMA and len(data["kernels"]) == 3


def test_cli_single_context_and_work_group_size() -> None:
    res = CliRunner().invoke(
        cli, ["bench", "kernels", "--context", "single", "--work-group-size", "64", *SMALL]
    )
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--device", "vulkan:gpu"], 2, "unknown backend 'vulkan'"),
        (["--device", "hip:accelerator"], 3, "no SYCL device matches 'hip:accelerator'"),
        (["--work-group-size", "100000"], 6, "exceeds"),
        (["--backend", "l0", "--work-group-size", "64"], 2, "--backend sycl only"),
    ],
)
def test_cli_errors(args: list[str], code: int, message: str) -> None:
    res = CliRunner().invoke(cli, ["bench", "kernels", *SMALL, *args])
    assert res.exit_code == code, res.output
    assert message in res.output


def test_cli_without_dpctl_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['dpctl'] = None\n"
        "from l0mem.cli import main\n"
        "sys.argv = ['l0mem', 'bench', 'kernels', '--elements', '10']\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "pip install 'l0mem[sycl]'" in lines[0]


def test_cli_on_the_level_zero_simulator(tmp_path: Path) -> None:
    out = tmp_path / "l0.json"
    code = (
        "import sys\n"
        "from l0mem.cli import main\n"
        f"sys.argv = ['l0mem', 'bench', 'kernels', '--backend', 'l0', '--device', '1', "
        f"'--elements', '5000', '--repetitions', '2', '--json', {str(out)!r}]\n"
        "main()\n"
    )
    proc = sim.run_python(code, timeout=120, devices=2)
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout
    data = json.loads(out.read_text())
    assert data["backend"] == "l0" and data["simulated"] is True
    assert data["timing"] == "device"
    assert [k["name"] for k in data["kernels"]] == list(KERNELS)


@pytest.fixture(scope="module")
def sweep_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_kernels_script", ROOT / "benchmarks" / "bench_kernels.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_script(sweep_script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep.json"
    status = sweep_script.main(
        ["--sizes", "default,64", "--elements", "3000", "--repetitions", "2", "--warmup", "0",
         "--json", str(out)]
    )
    assert status == 0
    data = json.loads(out.read_text())
    assert [run["work_group_size"] for run in data["runs"]] == [1024, 64]
    assert all(len(run["kernels"]) == 3 for run in data["runs"])
    assert "f32_to_bf16" in capsys.readouterr().out
    assert sweep_script.main(["--sizes", "big"]) == 2
