"""l0mem.backends.kernels: metadata, the shipped module, and the launchers' checks (no device needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from l0mem.backends import DeviceBuffer, Event, kernels


@dataclass
class _Buf:
    nbytes: int
    device: int = 0
    address: int = 0x1000

    def view(self, offset: int, nbytes: int) -> DeviceBuffer:
        return _Buf(nbytes, self.device, self.address + offset)

    def close(self) -> None:
        pass


class _Done:
    def wait(self, timeout: float | None = None) -> None:
        pass

    def elapsed_ns(self) -> int | None:
        return None


@dataclass
class _Recorder:
    """Records launches instead of running them."""

    name: str = "fake"
    launches: list[tuple[str, int, list[object], int, tuple[Event, ...]]] = field(
        default_factory=list
    )

    def launch(
        self,
        kernel: str,
        device: int,
        args: Sequence[DeviceBuffer | int],
        global_size: int,
        *,
        wait_for: Sequence[Event] = (),
    ) -> Event:
        self.launches.append((kernel, device, list(args), global_size, tuple(wait_for)))
        return _Done()


def test_metadata_describes_the_contract() -> None:
    assert set(kernels.KERNELS) == {"l0mem_f32_to_bf16", "l0mem_bf16_add_to_f32", "l0mem_f32_add"}
    layout = {k: [(a.name, a.kind, a.elem_size) for a in v.args] for k, v in kernels.KERNELS.items()}
    assert layout["l0mem_f32_to_bf16"] == [("src", "buffer", 4), ("dst", "buffer", 2), ("n", "u64", 8)]
    assert layout["l0mem_bf16_add_to_f32"] == [("src", "buffer", 2), ("acc", "buffer", 4), ("n", "u64", 8)]
    assert layout["l0mem_f32_add"] == [("src", "buffer", 4), ("acc", "buffer", 4), ("n", "u64", 8)]
    # Bytes read + written per element: 4+2, 2+4+4, 4+4+4.
    assert [kernels.KERNELS[k].bytes_per_element() for k in kernels.KERNELS] == [6, 10, 12]


@pytest.mark.parametrize(
    ("fn", "kernel", "sizes"),
    [
        (kernels.compress_bf16, "l0mem_f32_to_bf16", (4, 2)),
        (kernels.decompress_add_bf16, "l0mem_bf16_add_to_f32", (2, 4)),
        (kernels.add_f32, "l0mem_f32_add", (4, 4)),
    ],
)
def test_launchers_pass_buffers_count_and_dependencies(fn, kernel, sizes) -> None:
    rec = _Recorder()
    a, b = _Buf(sizes[0] * 100, device=1), _Buf(sizes[1] * 100, device=1)
    dep = _Done()
    fn(rec, a, b, 100, wait_for=[dep])
    assert rec.launches == [(kernel, 1, [a, b, 100], 100, (dep,))]


def test_exact_sizes_are_enough_and_one_short_is_not() -> None:
    rec = _Recorder()
    kernels.compress_bf16(rec, _Buf(40), _Buf(20), 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="argument 'dst' holds 19 bytes, 10 elements need 20"):
        kernels.compress_bf16(rec, _Buf(40), _Buf(19), 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="argument 'acc' holds 39 bytes"):
        kernels.decompress_add_bf16(rec, _Buf(20), _Buf(39), 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="argument 'src' holds 39 bytes"):
        kernels.add_f32(rec, _Buf(39), _Buf(40), 10)  # type: ignore[arg-type]
    assert len(rec.launches) == 1


def test_different_devices_are_rejected() -> None:
    rec = _Recorder()
    with pytest.raises(ValueError, match="different devices"):
        kernels.add_f32(rec, _Buf(40, device=0), _Buf(40, device=1), 10)  # type: ignore[arg-type]
    assert rec.launches == []


def test_bad_counts() -> None:
    rec = _Recorder()
    with pytest.raises(ValueError, match=">= 0"):
        kernels.add_f32(rec, _Buf(40), _Buf(40), -1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        kernels.add_f32(rec, _Buf(40), _Buf(40), 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        kernels.add_f32(rec, _Buf(40), _Buf(40), True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.launch_elementwise(rec, "l0mem_mul", [_Buf(4), _Buf(4)], 1)  # type: ignore[arg-type]
    assert rec.launches == []


def test_zero_elements_launch_nothing_but_wait_for_dependencies() -> None:
    rec = _Recorder()
    waited: list[int] = []

    class _Dep(_Done):
        def wait(self, timeout: float | None = None) -> None:
            waited.append(1)

    ev = kernels.compress_bf16(rec, _Buf(0), _Buf(0), 0, wait_for=[_Dep(), _Dep()])  # type: ignore[arg-type]
    assert rec.launches == []
    ev.wait()
    assert waited == [1, 1]
    assert ev.elapsed_ns() == 0


def test_spirv_bytes_is_a_spirv_module() -> None:
    data = kernels.spirv_bytes()
    assert data[:4] == (0x07230203).to_bytes(4, "little")
    assert len(data) % 4 == 0
    for name in kernels.KERNELS:
        assert name.encode() in data


@dataclass
class _OwnedBuf(_Buf):
    """A buffer that names the backend it belongs to, as SyclBuffer does."""

    backend: object = None


def test_launch_arguments_are_checked_against_the_kernel_table() -> None:
    rec = _Recorder()
    a, b = _Buf(40), _Buf(40)
    bad: list[tuple[list[object], str]] = [
        ([a, b], "takes 3 arguments, got 2"),
        ([a, b, 10, 10], "takes 3 arguments, got 4"),
        ([a, b, True], "'n' must be an int, got bool"),
        ([a, b, 10.0], "'n' must be an int, got float"),
        ([a, b, -1], "'n' must be in 0..2\\*\\*64-1"),
        ([a, b, 1 << 64], "'n' must be in 0..2\\*\\*64-1"),
        ([a, 7, 10], "'acc' must be a device buffer, got int"),
        ([False, b, 10], "'src' must be a device buffer, got bool"),
        ([a, "acc", 10], "'acc' must be a device buffer, got str"),
        ([_OwnedBuf(40, backend=object()), b, 10], "'src' belongs to another backend"),
    ]
    for args, message in bad:
        with pytest.raises(kernels.KernelArgumentError, match=message):
            kernels.check_launch_args("l0mem_f32_add", args, rec)
    info = kernels.check_launch_args("l0mem_f32_add", [a, _OwnedBuf(40, backend=rec), 10], rec)
    assert info is kernels.KERNELS["l0mem_f32_add"]
    # The largest count is a valid scalar, but 40-byte buffers cannot hold it.
    with pytest.raises(kernels.KernelArgumentError, match="'src' holds 40 bytes"):
        kernels.check_launch_args("l0mem_f32_add", [a, b, (1 << 64) - 1], rec)
    with pytest.raises(kernels.KernelArgumentError, match="'acc' is on device 1, the launch on device 0"):
        kernels.check_launch_args("l0mem_f32_add", [a, _Buf(40, device=1), 10], rec, device=0)
    with pytest.raises(kernels.KernelArgumentError, match="unknown kernel"):
        kernels.check_launch_args("l0mem_mul", [a, b, 1], rec)


def test_argument_errors_are_value_errors_and_type_errors() -> None:
    # ValueError is the documented type; TypeError keeps older callers' handlers working.
    assert issubclass(kernels.KernelArgumentError, ValueError)
    assert issubclass(kernels.KernelArgumentError, TypeError)


def test_launchers_check_owner_and_scalar_before_launching() -> None:
    rec, other = _Recorder(), _Recorder()
    mine = _OwnedBuf(40, backend=rec)
    theirs = _OwnedBuf(40, backend=other)
    with pytest.raises(ValueError, match="'acc' belongs to another backend"):
        kernels.add_f32(rec, mine, theirs, 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'src' belongs to another backend"):
        kernels.compress_bf16(other, mine, _Buf(20), 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="element count must be an int, got bool"):
        kernels.add_f32(rec, mine, mine, False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'n' must be in 0\.\.2"):
        kernels.add_f32(rec, _Buf(1 << 70), _Buf(1 << 70), 1 << 64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'src' must be a device buffer"):
        kernels.add_f32(rec, 5, mine, 1)  # type: ignore[arg-type]
    assert rec.launches == [] and other.launches == []
    kernels.add_f32(rec, mine, _OwnedBuf(40, backend=rec), 10)  # type: ignore[arg-type]
    assert len(rec.launches) == 1
