"""Exceptions for Level Zero result codes and for loading the Level Zero loader.

Every ``ze_result_t`` error code has one exception class. The classes fall in
two groups so callers can tell a bug in their own call (:class:`ZeUsageError`)
from a condition of the machine or driver (:class:`ZeRuntimeError`).
"""

from __future__ import annotations

from l0mem._ze import enums as E


class ZeError(Exception):
    """A Level Zero call returned a result other than ZE_RESULT_SUCCESS."""

    code: int = -1
    explanation: str = "the driver returned a result code this binding does not know"

    def __init__(
        self, code: int | None = None, routine: str = "", detail: str | None = None
    ) -> None:
        """Record ``code`` (default: the class's own), the failed ``routine`` and extra ``detail``."""
        if code is None:
            code = type(self).code
        code = int(code) & 0xFFFFFFFF
        super().__init__(code, routine, detail)
        self.code = code
        self.routine = routine
        self.detail = detail
        self.name = result_name(self.code)

    def __str__(self) -> str:
        """Return ``routine: NAME (0xCODE): explanation[; detail]`` on one line."""
        shown = self.name if self.name else "unknown result code"
        text = f"{shown} (0x{self.code:08x}): {self.explanation}"
        if self.routine:
            text = f"{self.routine}: {text}"
        if self.detail:
            text = f"{text}; {' '.join(self.detail.split())}"
        return text


class ZeUsageError(ZeError):
    """The call itself was wrong: a bad argument, handle, size, name or enumerator."""


class ZeRuntimeError(ZeError):
    """The call was well formed but the driver or device could not do it."""


class NotReadyError(ZeRuntimeError):
    """ZE_RESULT_NOT_READY."""

    code = E.ZE_RESULT_NOT_READY
    explanation = "the synchronization primitive is not signaled yet"


class DeviceLostError(ZeRuntimeError):
    """ZE_RESULT_ERROR_DEVICE_LOST."""

    code = E.ZE_RESULT_ERROR_DEVICE_LOST
    explanation = (
        "the device hung, was reset or removed, or its driver was updated "
        "(the kernel log, dmesg, says which; run again once the device is back)"
    )


class OutOfHostMemoryError(ZeRuntimeError):
    """ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY."""

    code = E.ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY
    explanation = "the host has no memory left for this request"


class OutOfDeviceMemoryError(ZeRuntimeError):
    """ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY."""

    code = E.ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY
    explanation = "the device has no memory left for this allocation"


class ModuleBuildFailureError(ZeRuntimeError):
    """ZE_RESULT_ERROR_MODULE_BUILD_FAILURE."""

    code = E.ZE_RESULT_ERROR_MODULE_BUILD_FAILURE
    explanation = "the driver could not build the module; see its build log"


class ModuleLinkFailureError(ZeRuntimeError):
    """ZE_RESULT_ERROR_MODULE_LINK_FAILURE."""

    code = E.ZE_RESULT_ERROR_MODULE_LINK_FAILURE
    explanation = "the driver could not link the modules; see the build log"


class DeviceRequiresResetError(ZeRuntimeError):
    """ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET."""

    code = E.ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET
    explanation = "the device must be reset before it can be used again"


class DeviceInLowPowerStateError(ZeRuntimeError):
    """ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE."""

    code = E.ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE
    explanation = "the device is in a low power state"


class DeviceIsNotVertexError(ZeRuntimeError):
    """ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX."""

    code = E.ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX
    explanation = "the device is not represented by a fabric vertex"


class VertexIsNotDeviceError(ZeRuntimeError):
    """ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE."""

    code = E.ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE
    explanation = "the fabric vertex does not represent a device"


class RemoteDeviceError(ZeRuntimeError):
    """ZE_RESULT_EXP_ERROR_REMOTE_DEVICE."""

    code = E.ZE_RESULT_EXP_ERROR_REMOTE_DEVICE
    explanation = "the fabric vertex is a remote device or sub-device"


class OperandsIncompatibleError(ZeUsageError):
    """ZE_RESULT_EXP_ERROR_OPERANDS_INCOMPATIBLE."""

    code = E.ZE_RESULT_EXP_ERROR_OPERANDS_INCOMPATIBLE
    explanation = "the operands of the comparison are not compatible"


class RtasBuildRetryError(ZeRuntimeError):
    """ZE_RESULT_EXP_RTAS_BUILD_RETRY."""

    code = E.ZE_RESULT_EXP_RTAS_BUILD_RETRY
    explanation = "the acceleration structure build needs a larger buffer; retry"


class RtasBuildDeferredError(ZeRuntimeError):
    """ZE_RESULT_EXP_RTAS_BUILD_DEFERRED."""

    code = E.ZE_RESULT_EXP_RTAS_BUILD_DEFERRED
    explanation = "the acceleration structure build was deferred to a parallel operation"


class InsufficientPermissionsError(ZeRuntimeError):
    """ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS."""

    code = E.ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS
    explanation = "the process lacks the permission this request needs"


class NotAvailableError(ZeRuntimeError):
    """ZE_RESULT_ERROR_NOT_AVAILABLE."""

    code = E.ZE_RESULT_ERROR_NOT_AVAILABLE
    explanation = "the resource is in use elsewhere or was removed"


class DependencyUnavailableError(ZeRuntimeError):
    """ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE."""

    code = E.ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE
    explanation = "an external dependency the driver needs is missing"


class DroppedDataError(ZeRuntimeError):
    """ZE_RESULT_WARNING_DROPPED_DATA."""

    code = E.ZE_RESULT_WARNING_DROPPED_DATA
    explanation = "the driver warns that data may have been dropped"


class UninitializedError(ZeRuntimeError):
    """ZE_RESULT_ERROR_UNINITIALIZED."""

    code = E.ZE_RESULT_ERROR_UNINITIALIZED
    explanation = "Level Zero is not initialized or no driver was found"


class UnsupportedVersionError(ZeRuntimeError):
    """ZE_RESULT_ERROR_UNSUPPORTED_VERSION."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_VERSION
    explanation = "the driver does not support the requested version"


class UnsupportedFeatureError(ZeRuntimeError):
    """ZE_RESULT_ERROR_UNSUPPORTED_FEATURE."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
    explanation = "the driver or device does not support this feature"


class InvalidArgumentError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_ARGUMENT."""

    code = E.ZE_RESULT_ERROR_INVALID_ARGUMENT
    explanation = "an argument is invalid"


class InvalidNullHandleError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_NULL_HANDLE."""

    code = E.ZE_RESULT_ERROR_INVALID_NULL_HANDLE
    explanation = "a handle argument is null or not valid"


class HandleObjectInUseError(ZeUsageError):
    """ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE."""

    code = E.ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
    explanation = "the object is still in use by the device"


class InvalidNullPointerError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_NULL_POINTER."""

    code = E.ZE_RESULT_ERROR_INVALID_NULL_POINTER
    explanation = "a pointer argument is null"


class InvalidSizeError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_SIZE."""

    code = E.ZE_RESULT_ERROR_INVALID_SIZE
    explanation = "a size argument is invalid (for example zero)"


class UnsupportedSizeError(ZeUsageError):
    """ZE_RESULT_ERROR_UNSUPPORTED_SIZE."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_SIZE
    explanation = "a size argument is larger than the device supports"


class UnsupportedAlignmentError(ZeUsageError):
    """ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT
    explanation = "an alignment argument is not supported by the device"


class InvalidSynchronizationObjectError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT."""

    code = E.ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT
    explanation = "the synchronization object is in an invalid state"


class InvalidEnumerationError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_ENUMERATION."""

    code = E.ZE_RESULT_ERROR_INVALID_ENUMERATION
    explanation = "an enumerator argument is not valid"


class UnsupportedEnumerationError(ZeUsageError):
    """ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION
    explanation = "an enumerator argument is not supported by the device"


class UnsupportedImageFormatError(ZeUsageError):
    """ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT."""

    code = E.ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT
    explanation = "the image format is not supported by the device"


class InvalidNativeBinaryError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_NATIVE_BINARY."""

    code = E.ZE_RESULT_ERROR_INVALID_NATIVE_BINARY
    explanation = "the native binary is not supported by the device"


class InvalidGlobalNameError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_GLOBAL_NAME."""

    code = E.ZE_RESULT_ERROR_INVALID_GLOBAL_NAME
    explanation = "the module has no global variable of that name"


class InvalidKernelNameError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_KERNEL_NAME."""

    code = E.ZE_RESULT_ERROR_INVALID_KERNEL_NAME
    explanation = "the module has no kernel of that name"


class InvalidFunctionNameError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_FUNCTION_NAME."""

    code = E.ZE_RESULT_ERROR_INVALID_FUNCTION_NAME
    explanation = "the module has no function of that name"


class InvalidGroupSizeDimensionError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION."""

    code = E.ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION
    explanation = "a group size dimension is not valid for the kernel or device"


class InvalidGlobalWidthDimensionError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION."""

    code = E.ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION
    explanation = "a global width dimension is not valid for the kernel or device"


class InvalidKernelArgumentIndexError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX."""

    code = E.ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX
    explanation = "the kernel has no argument at that index"


class InvalidKernelArgumentSizeError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE."""

    code = E.ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE
    explanation = "the argument size does not match the kernel's argument"


class InvalidKernelAttributeValueError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE."""

    code = E.ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE
    explanation = "the kernel attribute value is not valid for the kernel or device"


class InvalidModuleUnlinkedError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED."""

    code = E.ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED
    explanation = "the module has imports and must be linked before creating kernels"


class InvalidCommandListTypeError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE."""

    code = E.ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
    explanation = "the command list type does not match the command queue type"


class OverlappingRegionsError(ZeUsageError):
    """ZE_RESULT_ERROR_OVERLAPPING_REGIONS."""

    code = E.ZE_RESULT_ERROR_OVERLAPPING_REGIONS
    explanation = "the copy source and destination overlap"


class ActionRequiredError(ZeRuntimeError):
    """ZE_RESULT_WARNING_ACTION_REQUIRED."""

    code = E.ZE_RESULT_WARNING_ACTION_REQUIRED
    explanation = "an action is required to complete the operation"


class InvalidKernelHandleError(ZeUsageError):
    """ZE_RESULT_ERROR_INVALID_KERNEL_HANDLE."""

    code = E.ZE_RESULT_ERROR_INVALID_KERNEL_HANDLE
    explanation = "the kernel handle is not valid for this operation"


class UnknownError(ZeRuntimeError):
    """ZE_RESULT_ERROR_UNKNOWN."""

    code = E.ZE_RESULT_ERROR_UNKNOWN
    explanation = "the driver reported an unknown or internal error"


def _collect() -> dict[int, type[ZeError]]:
    """Return the code -> class map built from every concrete subclass above."""
    table: dict[int, type[ZeError]] = {}
    stack: list[type[ZeError]] = [ZeError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "code" in vars(cls) and cls is not ZeError:
            if cls.code in table:
                raise RuntimeError(f"two error classes for 0x{cls.code:08x}")
            table[int(cls.code)] = cls
    return table


_BY_CODE = _collect()


def result_name(code: int) -> str:
    """Return the C name of result ``code``, or "" when Level Zero does not define it."""
    code = int(code) & 0xFFFFFFFF
    if code == E.ZE_RESULT_FORCE_UINT32:
        return ""
    try:
        return E.ze_result_t(code).name
    except ValueError:
        return ""


def error_class(code: int) -> type[ZeError]:
    """Return the exception class for result ``code`` (ZeError itself for unknown codes)."""
    return _BY_CODE.get(int(code) & 0xFFFFFFFF, ZeError)


def all_error_classes() -> dict[int, type[ZeError]]:
    """Return a copy of the code -> class map (one class per error result code)."""
    return dict(_BY_CODE)


class LoaderError(OSError):
    """The Level Zero loader library could not be used."""


class LoaderNotFoundError(LoaderError):
    """The Level Zero loader library could not be loaded."""


class LoaderTooOldError(LoaderError):
    """The library loaded but lacks functions l0mem cannot work without."""


class MissingFunctionError(NotImplementedError):
    """A function was called that the loaded Level Zero loader does not export."""


def check(rc: int, routine: str, detail: str | None = None) -> None:
    """Raise the ZeError subclass for result ``rc`` of ``routine``; do nothing on success."""
    if rc != E.ZE_RESULT_SUCCESS:
        raise error_class(rc)(rc, routine, detail)
