"""The backend set-ups the contract tests run against, what each must report, and witnesses.

A :class:`Case` opens one backend through :func:`l0mem.backends.open_backend`
(the CLI's entry) and states what its capability queries must answer here
(device count, contexts, copy routes, simulated or not). Witnesses look past
the backend where this machine can: the simulator's ground truth (bytes each
device holds, bytes moved between devices and the host) and, for SYCL,
dpctl's own view of events and USM allocations. A backend without a witness
skips only the tests that need one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

import pytest

from l0mem.backends import Backend, Event, NoDeviceError, RouteKind, open_backend
from l0mem.backends.select import ContextMode, Kind
from tests.support import ze_session

SIM_DEVICES = int(ze_session.DEFAULT_CONFIG["devices"])


def _all_pairs(n: int) -> frozenset[tuple[int, int]]:
    return frozenset(permutations(range(n), 2))


@dataclass(frozen=True)
class Case:
    """One backend set-up and what its capability queries must report."""

    id: str
    kind: Kind
    devices: tuple[int | str, ...]
    device_count: int
    context: ContextMode = "default"
    sub_devices: int | None = None
    simulated: bool = False
    host_backed: bool = True  # the simulator and a CPU device both keep memory in host RAM
    # Devices with the same label share a context.
    contexts: tuple[int, ...] = (0,)
    # Ordered pairs of distinct devices that copy directly; every other pair is staged.
    direct: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    # Simulator: the configured device behind each backend device, and the peer matrix.
    sim_index: tuple[int, ...] = ()
    sim_peers: str = "all"

    def open(self) -> Backend:
        """Return the backend, opened as the CLI opens it (skip if this machine cannot)."""
        if self.simulated:
            control = ze_session.simulator()
            ze_session.reset(control)
            control.set("peers", self.sim_peers)
        try:
            return open_backend(
                self.kind, list(self.devices), context=self.context, sub_devices=self.sub_devices
            )
        except NoDeviceError as err:
            if self.sub_devices is not None and (
                "too few" in str(err) or "cannot partition" in str(err)
            ):
                pytest.skip(f"the device cannot be partitioned here: {err}")
            raise

    def check_released(self) -> None:
        """Assert (simulator) that no device memory is left once every backend closed."""
        if not self.simulated:
            return
        control = ze_session.simulator()
        used = [control.device_used(i) for i in range(SIM_DEVICES)]
        ze_session.reset(control)
        assert used == [0] * SIM_DEVICES, f"device memory left after close: {used}"


CASES: tuple[Case, ...] = (
    Case(
        "l0-sim-multi",
        "l0",
        (0, 1, 2),
        3,
        simulated=True,
        contexts=(0, 0, 0),
        direct=_all_pairs(3),
        sim_index=(0, 1, 2),
    ),
    Case(
        "l0-sim-single",
        "l0",
        (3, 1),  # out of order: backend index 0 is simulator device 3
        2,
        context="single",
        simulated=True,
        contexts=(0, 1),
        sim_index=(3, 1),
    ),
    Case(
        "l0-sim-one-way-peers",
        "l0",
        (0, 1),
        2,
        simulated=True,
        contexts=(0, 0),
        direct=frozenset({(0, 1)}),  # device 1 cannot access device 0's memory
        sim_index=(0, 1),
        sim_peers="0>1",
    ),
    Case("sycl-cpu", "sycl", ("opencl:cpu",), 1),
    Case("sycl-cpu-single", "sycl", ("opencl:cpu",), 1, context="single"),
    Case("sycl-cpu-sub2", "sycl", ("opencl:cpu",), 2, sub_devices=2, contexts=(0, 1)),
)


def params() -> list[Any]:
    """Return CASES as pytest params (SYCL ones marked ``sycl``)."""
    return [
        pytest.param(c, id=c.id, marks=[pytest.mark.sycl] if c.kind == "sycl" else [])
        for c in CASES
    ]


def other_kind(case: Case) -> Case:
    """Return the first case of a backend kind other than ``case``'s."""
    return next(c for c in CASES if c.kind != case.kind)


# -- witnesses -------------------------------------------------------------


def route_taken(
    case: Case, backend: Backend, copy: Callable[[], Event], src: int, dst: int
) -> RouteKind | None:
    """Run ``copy`` (src to dst), wait, and return the route it took; None without a witness."""
    if case.simulated:
        control = ze_session.simulator()
        control.reset_counters()
        copy().wait()
        s, d = case.sim_index[src], case.sim_index[dst]
        direct = control.bytes_moved(s, d)
        down, up = control.bytes_moved(s, -1), control.bytes_moved(-1, d)
        if direct and not (down or up):
            return "direct"
        if down and up and not direct:
            return "staged"
        raise AssertionError(f"unclear route: {direct} bytes direct, {down} down, {up} up")
    if case.kind == "sycl":
        ev = copy()
        ev.wait()
        parts = len(ev.dpctl_events)  # type: ignore[attr-defined]
        assert parts in (1, 2), f"a copy of {parts} parts"
        return "direct" if parts == 1 else "staged"
    return None


class _UsmProbe:
    """A USM array interface at an address, for asking dpctl whether it is allocated."""

    def __init__(self, address: int, queue: Any) -> None:
        self.__sycl_usm_array_interface__ = {
            "data": (address, False),
            "shape": (1,),
            "strides": None,
            "typestr": "|u1",
            "version": 1,
            "syclobj": queue,
        }


def memory_witness(case: Case, backend: Backend) -> Callable[[int, int], bool] | None:
    """Return ``live(device, address)``: whether that allocation is still held (None: no witness).

    Made while the backend is open, usable after it closed. The simulator
    counts bytes per device, so there ``live`` says whether the device holds
    any memory: a test using it keeps at most one allocation per device.
    """
    if case.simulated:
        control = ze_session.simulator()

        def sim_live(device: int, address: int) -> bool:
            return control.device_used(case.sim_index[device]) > 0

        return sim_live
    if case.kind == "sycl":
        from l0mem.sycl import load_dpctl

        dpctl = load_dpctl()
        queues = [backend.queue_of(i) for i in range(backend.device_count())]  # type: ignore[attr-defined]

        def usm_live(device: int, address: int) -> bool:
            try:
                dpctl.memory.MemoryUSMDevice(_UsmProbe(address, queues[device]))
            except ValueError:
                return False
            return True

        return usm_live
    return None


def opened(case: Case) -> Iterator[Backend]:
    """Yield ``case``'s backend and close it afterwards (the fixtures' body)."""
    b = case.open()
    try:
        yield b
    finally:
        b.close()
