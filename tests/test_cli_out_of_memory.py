"""An allocation the driver refuses is named in every command's line: its size and its device."""

from __future__ import annotations

import re
from typing import Literal

import pytest

from l0mem._ze.errors import OutOfDeviceMemoryError, OutOfHostMemoryError
from tests.support import sim
from tests.support.cli import one_line, run_l0mem
from tests.support.own_memory import host_env

# Each command that allocates device memory, with a short run on the simulator.
COMMANDS = {
    "audit": ["audit", "-q", "--setups", "l0", "--size", "64MiB", "--steps", "3", "--settle", "0"],
    "p2p": ["p2p", "-q", "--sizes", "4K", "--reps", "1", "--warmup", "0"],
    "allreduce": ["allreduce", "-q", "--sizes", "16K", "--reps", "1", "--warmup", "0"],
    "bench kernels": [
        "bench",
        "kernels",
        "-q",
        "--elements",
        "1024",
        "--reps",
        "1",
        "--warmup",
        "0",
    ],
}
# "allocating 4 KiB (4,096 bytes) on device 1 (l0mem simulated GPU 1)", or of host memory for one.
NAMED = re.compile(
    r"allocating \d[\d.]* (?:B|KiB|MiB|GiB) \((?P<bytes>[\d,]+) bytes\) "
    r"(?P<where>on|of host memory for) device (?P<index>\d+) \(l0mem simulated GPU (?P<gpu>\d+)\)"
)


def _line(command: str, argv: list[str], at: int) -> re.Match[str]:
    """Return the naming in ``command``'s one line when its ``at``-th allocation runs out of memory."""
    env = host_env(sim.sim_env(devices=2, fail_alloc_at=at))
    proc = run_l0mem(argv[0], argv[1:], env)
    assert proc.returncode == 3, proc.stderr
    line = one_line(proc, command) if command != "audit" else proc.stderr.splitlines()[-1]
    assert "OUT_OF_DEVICE_MEMORY" in line, line
    found = NAMED.search(line)
    assert found is not None, line
    assert int(found["bytes"].replace(",", "")) > 0
    return found


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_allocation_the_driver_refuses_names_its_size_and_device(command: str) -> None:
    # The first allocation of each command, and for those over two devices a later one.
    for at in (1, 2) if command in ("p2p", "allreduce") else (1,):
        found = _line(command, COMMANDS[command], at)
        # On the simulator, device i of the run is "l0mem simulated GPU i" here.
        assert found["index"] == found["gpu"], found.group(0)


def test_the_audit_names_the_device_by_l0mems_index_not_the_set_ups() -> None:
    # The set-up's backend holds device 1 alone, as its device 0: the line says 1.
    found = _line("audit", [*COMMANDS["audit"], "--device", "1"], 1)
    assert (found["where"], found["index"], found["gpu"]) == ("on", "1", "1")


def test_a_host_allocation_is_named_as_one() -> None:
    # p2p's third allocation is the pinned host memory of its staged copies.
    found = _line("p2p", COMMANDS["p2p"], 3)
    assert found["where"] == "of host memory for", found.group(0)


@pytest.mark.parametrize(
    "error",
    [
        OutOfDeviceMemoryError(routine="zeMemAllocDevice"),
        OutOfHostMemoryError(routine="zeMemAllocHost", detail="the driver's words"),
        MemoryError("MemoryUSMDevice: USM allocation failed"),
        MemoryError(),
    ],
    ids=["device", "host", "sycl", "bare"],
)
def test_every_out_of_memory_error_keeps_its_class_and_names_the_allocation(
    error: BaseException,
) -> None:
    from l0mem.backends import FailedAllocation, failed_allocation
    from l0mem.backends.allocation import naming_allocation

    memory: Literal["device", "host"] = "host" if "Host" in str(error) else "device"
    with pytest.raises(type(error)) as caught, naming_allocation(3 << 20, 1, "GPU one", memory):
        raise error
    got = caught.value
    assert type(got) is type(error)
    text = str(got)
    assert "\n" not in text and "3 MiB (3,145,728 bytes)" in text and "device 1 (GPU one)" in text
    assert str(error).split(";")[0] in text  # the runtime's own words are kept
    failed = failed_allocation(got)
    assert isinstance(failed, FailedAllocation) and (failed.nbytes, failed.device) == (3 << 20, 1)
    assert failed.what("device 7 (x)").endswith("device 7 (x)")
    # Anything else passes through untouched.
    with pytest.raises(ValueError, match=r"^other$"), naming_allocation(1, 0, "x"):
        raise ValueError("other")
