"""Result codes map to one exception class each, in the right category, with clear messages."""

from __future__ import annotations

import pickle
import re

import pytest

from l0mem._ze import T, check, errors

ERROR_CODES = sorted(
    int(m) for m in T.ze_result_t if m not in (T.ZE_RESULT_SUCCESS, T.ZE_RESULT_FORCE_UINT32)
)

USAGE = {
    "ZE_RESULT_ERROR_INVALID_ARGUMENT",
    "ZE_RESULT_ERROR_INVALID_NULL_HANDLE",
    "ZE_RESULT_ERROR_INVALID_NULL_POINTER",
    "ZE_RESULT_ERROR_INVALID_ENUMERATION",
    "ZE_RESULT_ERROR_INVALID_SIZE",
    "ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
    "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT",
    "ZE_RESULT_ERROR_INVALID_KERNEL_NAME",
    "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX",
    "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE",
    "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION",
}
RUNTIME = {
    "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
    "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    "ZE_RESULT_ERROR_DEVICE_LOST",
    "ZE_RESULT_ERROR_UNINITIALIZED",
    "ZE_RESULT_ERROR_NOT_AVAILABLE",
    "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE",
    "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
}


@pytest.mark.parametrize("code", ERROR_CODES, ids=[T.ze_result_t(c).name for c in ERROR_CODES])
def test_every_error_code_has_its_own_class(code: int) -> None:
    """error_class gives a dedicated subclass whose code and C name match."""
    cls = errors.error_class(code)
    assert cls is not errors.ZeError
    assert cls not in (errors.ZeUsageError, errors.ZeRuntimeError)
    assert issubclass(cls, errors.ZeUsageError) != issubclass(cls, errors.ZeRuntimeError)
    assert cls.code == code
    exc = cls(code, "zeSomething")
    assert exc.name == T.ze_result_t(code).name
    assert exc.explanation and exc.explanation != errors.ZeError.explanation


def test_classes_are_distinct_per_code() -> None:
    """No class serves two codes and every code has a class."""
    table = errors.all_error_classes()
    assert sorted(table) == ERROR_CODES
    assert len(set(table.values())) == len(table)


@pytest.mark.parametrize("name", sorted(USAGE))
def test_misuse_codes_are_usage_errors(name: str) -> None:
    """Bad arguments, handles, sizes and names are the caller's mistake."""
    assert issubclass(errors.error_class(getattr(T, name)), errors.ZeUsageError)


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_condition_codes_are_runtime_errors(name: str) -> None:
    """Memory exhaustion, lost devices and missing drivers are runtime conditions."""
    assert issubclass(errors.error_class(getattr(T, name)), errors.ZeRuntimeError)


def test_named_classes_exist() -> None:
    """The classes callers catch by name map to the expected codes."""
    assert (
        errors.error_class(T.ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) is errors.OutOfDeviceMemoryError
    )
    assert errors.error_class(T.ZE_RESULT_ERROR_DEVICE_LOST) is errors.DeviceLostError
    assert errors.error_class(T.ZE_RESULT_ERROR_INVALID_ARGUMENT) is errors.InvalidArgumentError


def test_message_format() -> None:
    """str() is 'routine: NAME (0xCODE): explanation' on one line."""
    exc = errors.OutOfDeviceMemoryError(routine="zeMemAllocDevice")
    text = str(exc)
    assert text == (
        "zeMemAllocDevice: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003): "
        "the device has no memory left for this allocation"
    )
    assert exc.code == 0x70000003 and exc.routine == "zeMemAllocDevice"


def test_detail_is_appended_on_one_line() -> None:
    """Extra detail (such as a build log) is flattened onto the same line."""
    exc = errors.ModuleBuildFailureError(routine="zeModuleCreate", detail="line 1\n  line 2\n")
    assert "\n" not in str(exc)
    assert str(exc).endswith("; line 1 line 2")


def test_check_raises_matching_class_and_passes_success() -> None:
    """check() is silent on success and raises the mapped class otherwise."""
    check(T.ZE_RESULT_SUCCESS, "zeInit")
    with pytest.raises(errors.InvalidNullHandleError) as info:
        check(T.ZE_RESULT_ERROR_INVALID_NULL_HANDLE, "zeContextDestroy")
    assert str(info.value).startswith("zeContextDestroy: ZE_RESULT_ERROR_INVALID_NULL_HANDLE (")
    with pytest.raises(errors.NotReadyError):
        check(T.ZE_RESULT_NOT_READY, "zeEventQueryStatus")


@pytest.mark.parametrize("code", [0x12345678, 0x7FFFFFFF, 0x70000099])
def test_unknown_codes_get_base_class_with_hex(code: int) -> None:
    """A code Level Zero does not define raises plain ZeError naming the hex code."""
    assert errors.error_class(code) is errors.ZeError
    with pytest.raises(errors.ZeError) as info:
        check(code, "zeFoo")
    assert type(info.value) is errors.ZeError
    assert f"0x{code:08x}" in str(info.value)
    assert str(info.value).startswith("zeFoo: unknown result code")
    assert info.value.name == ""


def test_negative_code_is_read_as_unsigned() -> None:
    """A code that arrives sign-extended still maps to its class."""
    signed = T.ZE_RESULT_ERROR_UNKNOWN - (1 << 32)
    assert errors.error_class(signed) is errors.UnknownError
    assert errors.ZeError(signed).code == T.ZE_RESULT_ERROR_UNKNOWN


def test_errors_survive_pickling() -> None:
    """Errors cross process boundaries (multiprocessing) intact."""
    exc = errors.DeviceLostError(routine="zeCommandQueueSynchronize", detail="after 3 s")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is errors.DeviceLostError
    assert str(back) == str(exc)


def test_every_message_is_one_line_and_names_code() -> None:
    """All classes render as one line containing their C name and hex code."""
    for code, cls in errors.all_error_classes().items():
        text = str(cls(code, "zeX"))
        assert "\n" not in text
        assert re.fullmatch(rf"zeX: {cls(code).name} \(0x{code:08x}\): .+", text), text


def test_loader_errors_are_os_errors_and_missing_function_is_separate() -> None:
    """Loader problems are OSErrors; a missing function is NotImplementedError, not ZeError."""
    assert issubclass(errors.LoaderNotFoundError, OSError)
    assert issubclass(errors.LoaderTooOldError, errors.LoaderError)
    assert issubclass(errors.MissingFunctionError, NotImplementedError)
    assert not issubclass(errors.MissingFunctionError, errors.ZeError)
