"""The kernel benchmark runs and produces well-formed output (never checked for speed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from rich.console import Console

import l0mem.bench.kernels
from l0mem.backends import SyclBackend, SyclBuffer
from l0mem.backends.kernels import KERNELS
from l0mem.bench.kernels import SCHEMA, KernelBenchResult, run_kernel_bench
from l0mem.bench.timing import FALLBACK_NOTE, Measurement
from l0mem.cli import cli
from l0mem.cli.bench import render
from l0mem.files import ReportWriteError, check_writable
from l0mem.files import write_json as write_json_data
from tests.support import sim

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--backend", "sycl", "--elements", "5000", "--reps", "2", "--warmup", "1"]


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


def test_run_with_device_timing(profiled: _Tracking) -> None:
    n = 10_000
    r = run_kernel_bench(profiled, elements=n, repetitions=3, warmup=1)
    assert r.timing == "device"
    assert r.backend == "sycl" and "opencl:cpu" in r.device
    assert r.copy is not None and r.no_hardware is None
    assert r.copy.bytes_moved == 8 * n
    assert list(r.kernels) == list(KERNELS)
    assert [m.bytes_moved for m in r.kernels.values()] == [6 * n, 10 * n, 12 * n]
    for m in (r.copy, *r.kernels.values()):
        assert len(m.samples_ns) == 3 and m.timing == "device"
        assert all(ns > 0 for ns in m.samples_ns)
    for name, m in r.kernels.items():
        assert r.ratio(name) == pytest.approx(m.gbps / r.copy.gbps)
    assert len(profiled.handed_out) == 4
    assert all(buf.closed for buf in profiled.handed_out), "benchmark buffers must be freed"


def test_falls_back_to_host_timing_without_profiling() -> None:
    with SyclBackend(["opencl:cpu"]) as b:
        r = run_kernel_bench(b, elements=1000, repetitions=2, warmup=0, kernels=["l0mem_f32_add"])
    assert r.timing == "host" and r.copy is not None and r.copy.timing == "host"
    assert list(r.kernels) == ["l0mem_f32_add"]
    assert r.kernels["l0mem_f32_add"].timing == "host"
    assert all(ns > 0 for ns in r.kernels["l0mem_f32_add"].samples_ns)


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
    write_json_data(path, r.to_dict())
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    assert data["elements"] == 2000 and data["timing"] == "device" and data["simulated"] is False
    assert [k["name"] for k in data["kernels"]] == list(KERNELS)
    assert data["copy"]["name"] == "copy" and data["copy"]["bytes_moved"] == 8 * 2000
    for k in (data["copy"], *data["kernels"]):
        assert len(k["samples_ns"]) == 2 and k["timing"] == "device"
        assert k["min_ns"] <= k["median_ns"] <= k["max_ns"]
        assert k["gbps_min"] <= k["gbps"] <= k["gbps_max"]
        assert k["gbps"] == pytest.approx(k["bytes_moved"] / k["median_ns"])
        assert k["spread"] == pytest.approx((k["max_ns"] - k["min_ns"]) / k["median_ns"])
    for k in data["kernels"]:
        assert k["ratio_to_copy"] == pytest.approx(k["gbps"] / data["copy"]["gbps"])
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]
    with pytest.raises(OSError):
        write_json_data(tmp_path / "missing" / "bench.json", r.to_dict())


def test_cli_prints_ratios_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    res = CliRunner().invoke(
        cli, ["bench", "kernels", "--device", "opencl:cpu", *SMALL, "--json", str(out)]
    )
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
        (["--work-group-size", "100000"], 2, "exceeds"),
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
        "sys.argv = ['l0mem', 'bench', 'kernels', '--backend', 'sycl', '--elements', '10']\n"
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
        f"'--elements', '5000', '--reps', '2', '--json', {str(out)!r}]\n"
        "main()\n"
    )
    proc = sim.run_python(code, timeout=120, devices=2)
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout
    data = json.loads(out.read_text())
    assert data["backend"] == "l0" and data["simulated"] is True
    assert data["timing"] == "device"
    assert [k["name"] for k in data["kernels"]] == list(KERNELS)


def test_cli_timestamp_not_ready_falls_back_to_host_timing_with_a_note(tmp_path: Path) -> None:
    # Issue 9: NOT_READY for a completed kernel's timestamp crashed the command (exit 6).
    out = tmp_path / "l0.json"
    code = (
        "import sys\n"
        "from l0mem.cli import main\n"
        f"sys.argv = ['l0mem', 'bench', 'kernels', '--backend', 'l0', "
        f"'--elements', '5000', '--reps', '2', '--json', {str(out)!r}]\n"
        "main()\n"
    )
    proc = sim.run_python(code, timeout=120, devices=1, timestamp_not_ready=1)
    assert proc.returncode == 0, proc.stderr
    assert "Note: no device timing" in " ".join(proc.stdout.split())
    data = json.loads(out.read_text())
    assert data["timing"] == "host" and data["note"] == FALLBACK_NOTE
    assert all(ns > 0 for k in data["kernels"] for ns in k["samples_ns"])


@pytest.fixture(scope="module")
def sweep_script() -> ModuleType:
    import benchmarks.bench_kernels

    return benchmarks.bench_kernels


def test_sweep_script(
    sweep_script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep.json"
    status = sweep_script.main(
        [
            "--work-group-sizes",
            "default,64",
            "--elements",
            "3000",
            "--reps",
            "2",
            "--warmup",
            "0",
            "--json",
            str(out),
        ]
    )
    assert status == 0
    data = json.loads(out.read_text())
    assert [run["work_group_size"] for run in data["runs"]] == [1024, 64]
    assert all(len(run["kernels"]) == 3 for run in data["runs"])
    assert "f32_to_bf16" in capsys.readouterr().out
    assert sweep_script.main(["--work-group-sizes", "big"]) == 2


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []

    def spy(*args: object, **kwargs: object) -> KernelBenchResult:
        calls.append(args)
        raise AssertionError("measured although the options were bad")

    monkeypatch.setattr(l0mem.bench.kernels, "run_kernel_bench", spy)
    return calls


def test_cli_bad_work_group_size_is_a_usage_error_found_before_measuring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _no_measuring(monkeypatch)
    res = CliRunner().invoke(cli, ["bench", "kernels", *SMALL, "--work-group-size", "8193"])
    assert res.exit_code == 2, res.output
    assert "--work-group-size" in res.output and "exceeds the kernels' limit 8192" in res.output
    assert calls == []


@pytest.mark.parametrize("backend", ["auto", "l0"])
def test_cli_work_group_size_with_level_zero_is_refused_before_a_device_is_opened(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    import l0mem.backends
    import l0mem.cli.bench

    calls = _no_measuring(monkeypatch)

    def resolved_to_level_zero(kind: str, specs: object) -> tuple[str, list[object]]:
        assert kind == backend
        return "l0", [object()]

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("a device was opened although the options were bad")

    monkeypatch.setattr(l0mem.backends, "select_devices", resolved_to_level_zero)
    monkeypatch.setattr(l0mem.cli.bench, "open_backend", no_open)
    args = ["bench", "kernels", "--backend", backend, "--work-group-size", "64"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    where = " on this machine" if backend == "auto" else ""
    assert (
        f"--work-group-size applies to --backend sycl only; --backend {backend} "
        f"selects Level Zero{where}"
    ) in res.output
    assert calls == []


def test_cli_work_group_size_applies_when_auto_resolves_to_sycl(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    args = ["bench", "kernels", *SMALL[2:], "--device", "opencl:cpu", "--work-group-size", "16"]
    res = CliRunner().invoke(cli, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["backend"] == "sycl"


def test_run_takes_simulated_from_the_backend() -> None:
    class Simulated(SyclBackend):
        @property
        def simulated(self) -> bool:
            return True

    with Simulated(["opencl:cpu"]) as b:
        one = ["l0mem_f32_add"]
        assert run_kernel_bench(b, elements=100, repetitions=1, warmup=0, kernels=one).simulated
        told = run_kernel_bench(
            b, elements=100, repetitions=1, warmup=0, kernels=one, simulated=False
        )
        assert told.simulated is False


@pytest.mark.parametrize(
    ("where", "why"), [("missing/k.json", "no such directory"), ("plain/k.json", "not a directory")]
)
def test_cli_unwritable_json_fails_before_measuring(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, why: str
) -> None:
    calls = _no_measuring(monkeypatch)
    (tmp_path / "plain").write_text("a file, not a directory")
    target = tmp_path / where
    res = CliRunner().invoke(cli, ["bench", "kernels", *SMALL, "--json", str(target)])
    assert res.exit_code == 4, res.output
    assert res.output == f"l0mem bench kernels: {target}: cannot write ({why})\n"
    assert calls == []
    assert [p.name for p in tmp_path.iterdir()] == ["plain"], "the probe must not leave files"


def test_check_writable(tmp_path: Path) -> None:
    check_writable(tmp_path / "fine.json")
    (tmp_path / "old.json").write_text("{}")
    check_writable(tmp_path / "old.json")
    with pytest.raises(ReportWriteError, match="no such directory"):
        check_writable(tmp_path / "nope" / "x.json")
    with pytest.raises(ReportWriteError, match="is a directory"):
        check_writable(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]


def test_cli_without_a_sycl_device_exits_3_with_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZE_ENABLE_ALT_DRIVERS"}
    env["OCL_ICD_FILENAMES"] = "/nonexistent.so"
    for extra in ([], ["--device", "opencl:cpu"]):
        proc = subprocess.run(
            [sys.executable, "-m", "l0mem", "bench", "kernels", *SMALL, *extra],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
        assert proc.returncode == 3, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("l0mem bench kernels: no")
        assert "SYCL device" in lines[0]


def _big_result() -> KernelBenchResult:
    n = 1 << 28  # 1 GiB per FP32 buffer: the widest numbers a real run prints

    def m(per: int, ns: tuple[int, ...]) -> Measurement:
        return Measurement(ns, per * n, "device")

    return KernelBenchResult(
        backend="sycl",
        device="Intel(R) Data Center GPU Max 1550 [level_zero:gpu:0]",
        elements=n,
        repetitions=3,
        warmup=1,
        copy=m(8, (2_000_000, 2_100_000, 1_900_000)),
        kernels={
            "l0mem_f32_to_bf16": m(6, (1_700_000, 1_600_000, 1_650_000)),
            "l0mem_bf16_add_to_f32": m(10, (2_500_000, 2_600_000, 2_400_000)),
            "l0mem_f32_add": m(12, (3_000_000, 3_100_000, 2_900_000)),
        },
    )


def test_table_numbers_are_not_cut_at_80_columns() -> None:
    result = _big_result()
    out = io.StringIO()
    render(result, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert result.copy is not None
    for name, m in (("copy", result.copy), *result.kernels.items()):
        row = next(line for line in text.splitlines() if line.startswith(f"│ {name} "))
        assert f"{m.bytes_moved / (1 << 20):,.1f}" in row
        assert f"{m.gbps:.2f}" in row and f"{m.gbps_min:.1f}-{m.gbps_max:.1f}" in row
        assert f"{m.spread:.0%}" in row
    assert "2,048.0" in text  # the copy moves 2 GiB


def test_cli_table_fits_80_columns() -> None:
    res = CliRunner().invoke(cli, ["bench", "kernels", *SMALL], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    for name in ("copy", *KERNELS):
        assert any(line.startswith(f"│ {name} ") for line in res.output.splitlines()), name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--elements", "0"], "--elements: must be >= 1"),
        (["--reps", "-1"], "--reps"),
        (["--warmup", "x"], "--warmup: expected an integer"),
        (["--work-group-sizes", "64,0"], "--work-group-sizes: work-group sizes must be positive"),
        # --sizes means bytes per buffer in l0mem; the sweep's option names what it sweeps.
        (["--sizes", "64"], "unrecognized arguments: --sizes"),
    ],
)
def test_sweep_script_rejects_bad_numbers_as_usage(
    sweep_script: ModuleType, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert sweep_script.main(args) == 2
    assert message in capsys.readouterr().err


def test_sweep_script_checks_everything_before_measuring(
    sweep_script: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_sweep(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured although the options were bad")

    monkeypatch.setattr(sweep_script, "sweep", no_sweep)
    missing = tmp_path / "missing" / "s.json"
    assert sweep_script.main(["--json", str(missing)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{missing}: cannot write (no such directory)" in err
    assert sweep_script.main(["--work-group-sizes", "64,100000"]) == 2
    assert "exceeds the kernels' limit" in capsys.readouterr().err
    assert sweep_script.main(["--device", "hip:gpu"]) == 3
    assert "no SYCL device matches 'hip:gpu'" in capsys.readouterr().err


def test_sweep_script_reports_failures_in_one_line(
    sweep_script: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    small = ["--work-group-sizes", "64", "--elements", "100", "--reps", "1", "--warmup", "0"]
    out = tmp_path / "s.json"

    def broken_write(path: Path, payload: object) -> None:
        raise ReportWriteError.of(path, PermissionError(13, "Permission denied", str(path)))

    monkeypatch.setattr(sweep_script, "write_json", broken_write)
    assert sweep_script.main([*small, "--json", str(out)]) == 4
    assert capsys.readouterr().err == f"bench_kernels.py: {out}: cannot write (Permission denied)\n"

    def failing_sweep(*args: object, **kwargs: object) -> None:
        raise RuntimeError("device lost\nsecond line")

    monkeypatch.setattr(sweep_script, "sweep", failing_sweep)
    assert sweep_script.main(small) == 6
    assert capsys.readouterr().err == "bench_kernels.py: RuntimeError: device lost\n"


@pytest.mark.parametrize("columns", [80, 120])
def test_the_answer_comes_first_and_names_every_kernel_against_the_goal(
    tmp_path: Path, columns: int
) -> None:
    from l0mem.cli.bench import GOAL_RATIO
    from tests.support.cli import run_l0mem
    from tests.support.widths import assert_whole_at

    out = tmp_path / "k.json"
    args = ["kernels", "--backend", "l0", "--elements", "65536", "--reps", "2", "--warmup", "0"]
    proc = run_l0mem("bench", [*args, "--json", str(out)], sim.sim_env(devices=1), columns=columns)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    answer, table = proc.stdout.split("\n\n", 1)
    said = " ".join(answer.split())
    assert said.startswith(f"[SIMULATOR] Against a copy of {data['copy']['gbps']:.2f} GB/s: ")
    for k in data["kernels"]:
        assert f"{k['name']} {k['ratio_to_copy']:.2f}x" in said
        below = k["ratio_to_copy"] < GOAL_RATIO
        assert (f"below the goal ({GOAL_RATIO:.2f}x)" in said) or not below
    assert_whole_at(table, columns, [f"{k['gbps']:.2f}" for k in data["kernels"]])
