"""zeInitDrivers with a fallback to zeInit: the loader-matrix case of a new loader before old drivers."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from l0mem._ze import drivers as drv
from l0mem._ze import enums as E
from l0mem._ze.errors import UninitializedError, ZeError

HANDLES = (0x1000, 0x2000)


class FakeApi:
    """Answers zeInitDrivers with ``init_drivers_rc`` and reports HANDLES through zeInit."""

    def __init__(self, init_drivers_rc: int, drivers_found: int = 0, init_rc: int = 0) -> None:
        self.init_drivers_rc = init_drivers_rc
        self.drivers_found = drivers_found
        self.init_rc = init_rc
        self.calls: list[str] = []

    @staticmethod
    def _report(count_ref: Any, array: Any, n: int) -> None:
        count = ctypes.cast(count_ref, ctypes.POINTER(ctypes.c_uint32)).contents
        if array is not None:
            for i in range(min(count.value, n)):
                array[i] = HANDLES[i]
        count.value = n

    def zeInitDrivers(self, count_ref: Any, array: Any, desc: Any) -> int:
        self.calls.append("zeInitDrivers")
        if self.init_drivers_rc == E.ZE_RESULT_SUCCESS:
            self._report(count_ref, array, self.drivers_found)
        return int(self.init_drivers_rc)

    def zeInit(self, flags: int) -> int:
        self.calls.append("zeInit")
        return self.init_rc

    def zeDriverGet(self, count_ref: Any, array: Any) -> int:
        self.calls.append("zeDriverGet")
        self._report(count_ref, array, len(HANDLES))
        return 0


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(api: FakeApi) -> FakeApi:
        monkeypatch.setattr(drv, "api", lambda: api)
        monkeypatch.setattr(drv, "has_function", lambda name: name == "zeInitDrivers")
        monkeypatch.setattr(drv, "_state", {})
        return api

    return install


@pytest.mark.parametrize(
    "rc",
    [E.ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, E.ZE_RESULT_ERROR_UNINITIALIZED, E.ZE_RESULT_SUCCESS],
)
def test_falls_back_to_zeinit_where_zeinitdrivers_cannot_serve(fake, rc) -> None:
    api = fake(FakeApi(rc, drivers_found=0))
    assert drv.init() == list(HANDLES)
    assert api.calls == ["zeInitDrivers", "zeInit", "zeDriverGet", "zeDriverGet"]
    assert drv.init_path() == "zeInit"


def test_zeinitdrivers_is_used_when_it_finds_drivers(fake) -> None:
    api = fake(FakeApi(E.ZE_RESULT_SUCCESS, drivers_found=2))
    assert drv.init() == list(HANDLES)
    assert api.calls == ["zeInitDrivers", "zeInitDrivers"]
    assert drv.init_path() == "zeInitDrivers"


def test_other_zeinitdrivers_failures_are_raised(fake) -> None:
    api = fake(FakeApi(E.ZE_RESULT_ERROR_DEVICE_LOST))
    with pytest.raises(ZeError, match="zeInitDrivers"):
        drv.init()
    assert api.calls == ["zeInitDrivers"] and drv.init_path() is None


def test_the_fallback_reports_zeinit_s_own_failure(fake) -> None:
    fake(FakeApi(E.ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, init_rc=E.ZE_RESULT_ERROR_UNINITIALIZED))
    with pytest.raises(UninitializedError, match="zeInit"):
        drv.init()
    assert drv.init_path() is None
