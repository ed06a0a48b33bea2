"""The same Python kernel launchers through LevelZeroBackend on the simulated driver.

The simulator runs the kernels by name with its own C implementation, so this
checks l0mem.backends.kernels' plumbing on the Level Zero path (argument layout, sizes,
group rounding, ordering by events) and the simulator against the NumPy
reference; the SPIR-V itself is checked on the SYCL CPU device. Each case runs
in a fresh interpreter so the simulator never leaks into SYCL tests.
"""

from __future__ import annotations

import json

import pytest

from tests.support import sim

CASES = r"""
import json
import numpy as np
import l0mem.core as core
from l0mem.bf16 import bf16_to_f32, f32_to_bf16
from l0mem.backends.levelzero import LevelZeroBackend
from l0mem.core.commands import ImmediateCommandList
from l0mem.backends.kernels import add_f32, compress_bf16, decompress_add_bf16

# Every launch as [global size, group size, group count], to check the rounding.
LAUNCHES = []
_backend_launch = LevelZeroBackend.launch
_list_launch = ImmediateCommandList.launch


def backend_launch(self, kernel, device, args, global_size, **kw):
    LAUNCHES.append([global_size])
    return _backend_launch(self, kernel, device, args, global_size, **kw)


def list_launch(self, kernel, group_count, **kw):
    LAUNCHES[-1] += [kernel.group_size[0], group_count]
    return _list_launch(self, kernel, group_count, **kw)


LevelZeroBackend.launch = backend_launch
ImmediateCommandList.launch = list_launch

SPECIAL = np.array([
    0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3FFF8000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
    0xFF800001, 0x7FA12345, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x00018000, 0x007F8000,
], dtype=np.uint32)
PAD = 37


def add_mismatches(got, want):
    nan = np.isnan(want)
    bad = int((np.isnan(got) != nan).sum())
    return bad + int((got.view(np.uint32)[~nan] != want.view(np.uint32)[~nan]).sum())


def upload(b, dev, host, pad=PAD):
    tail = np.full(pad, 0x5A5A5A5A if host.itemsize == 4 else 0xA5A5).astype(
        np.uint32 if host.itemsize == 4 else np.uint16).view(host.dtype)
    full = np.concatenate([host, tail])
    buf = b.allocate(dev, max(full.nbytes, 1))
    if full.nbytes:
        b.upload(buf, full).wait()
    return buf


def read(b, buf, dtype, count):
    out = np.empty(count, dtype=dtype)
    if out.nbytes:
        b.download(buf, out).wait()
    return out


def run(mode):
    LAUNCHES.clear()
    devs = core.drivers()[0].devices()[:2]
    b = LevelZeroBackend(devs, context=mode)
    res = {}
    rng = np.random.default_rng(5)
    a, c = np.meshgrid(SPECIAL, SPECIAL)
    for n in (0, 1, 31, 1_000_003, a.size):
        special = n == a.size
        x = (a.ravel() if special else rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)).view(np.float32)
        y = (c.ravel() if special else rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)).view(np.float32)
        h = (y.view(np.uint32) >> 16).astype(np.uint16)
        dev = 1  # not device 0, so a wrong device index would show
        src, out = upload(b, dev, x), upload(b, dev, np.zeros(n, np.uint16))
        compress_bf16(b, src, out, n).wait()
        got = read(b, out, np.uint16, n + PAD)
        res[f"compress/{n}"] = int((got[:n] != f32_to_bf16(x)).sum()) + int((got[n:] != 0xA5A5).sum())
        acc, hb = upload(b, dev, y), upload(b, dev, h)
        decompress_add_bf16(b, hb, acc, n).wait()
        got = read(b, acc, np.float32, n + PAD)
        with np.errstate(all="ignore"):
            want = np.add(y, bf16_to_f32(h), dtype=np.float32)
        res[f"decompress_add/{n}"] = add_mismatches(got[:n], want) + int((got[n:].view(np.uint32) != 0x5A5A5A5A).sum())
        acc = upload(b, dev, y)
        add_f32(b, src, acc, n).wait()
        got = read(b, acc, np.float32, n + PAD)
        with np.errstate(all="ignore"):
            want = np.add(y, x, dtype=np.float32)
        res[f"add/{n}"] = add_mismatches(got[:n], want) + int((got[n:].view(np.uint32) != 0x5A5A5A5A).sum())
    # Ordering by events only: compress -> copy to the peer -> decompress-add there.
    n = 4099
    x = rng.standard_normal(n).astype(np.float32)
    s0, h0 = b.allocate(0, 4 * n), b.allocate(0, 2 * n)
    h1, acc1 = b.allocate(1, 2 * n), b.allocate(1, 4 * n)
    e0 = b.upload(s0, x)
    e1 = b.fill(acc1, np.float32(1.0).tobytes())
    e2 = compress_bf16(b, s0, h0, n, wait_for=[e0])
    e3 = b.copy(h1, h0, wait_for=[e2])
    e4 = decompress_add_bf16(b, h1, acc1, n, wait_for=[e1, e3])
    out = np.empty(n, np.float32)
    b.download(acc1, out, wait_for=[e4]).wait()
    res["chain"] = add_mismatches(out, np.add(np.float32(1.0), bf16_to_f32(f32_to_bf16(x)), dtype=np.float32))
    try:
        add_f32(b, s0, acc1, n)
        res["cross_device_error"] = "no error"
    except ValueError as exc:
        res["cross_device_error"] = str(exc)
    b.close()
    res["launches"] = list(LAUNCHES)
    return res


print(json.dumps({mode: run(mode) for mode in ("multi", "single")}))
"""


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, object]]:
    proc = sim.run_python(CASES, timeout=240, devices=2, device_memory="1G", peers="all")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("mode", ["multi", "single"])
@pytest.mark.parametrize("kernel", ["compress", "decompress_add", "add"])
@pytest.mark.parametrize("n", [0, 1, 31, 1_000_003, 441])
def test_bit_exact_against_reference(results, mode: str, kernel: str, n: int) -> None:
    # n == 441 is the special-value grid (21 x 21 pairs).
    assert results[mode][f"{kernel}/{n}"] == 0


@pytest.mark.parametrize("mode", ["multi", "single"])
def test_event_chain_across_devices(results, mode: str) -> None:
    assert results[mode]["chain"] == 0


@pytest.mark.parametrize("mode", ["multi", "single"])
def test_buffers_on_two_devices_are_rejected(results, mode: str) -> None:
    assert "different devices" in str(results[mode]["cross_device_error"])


@pytest.mark.parametrize("mode", ["multi", "single"])
@pytest.mark.parametrize("n", [4099, 1_000_003])  # a prime and an odd count
def test_launch_groups_are_full_and_cover_every_element(results, mode: str, n: int) -> None:
    launches = [entry for entry in results[mode]["launches"] if entry[0] == n]
    assert launches, f"no launch over {n} work-items"
    for _, group, groups in launches:
        assert group > 1
        assert groups * group >= n > (groups - 1) * group  # ceil(n / group) groups
