"""Exit codes and small helpers shared by the l0mem commands."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Documented process exit codes of the l0mem command line."""

    OK = 0
    REGRESSION = 1  # compare found a regression; audit --fail-on-mirror found a mirror
    USAGE = 2  # bad command-line usage (click's own code)
    NO_DEVICE = 3  # no Level Zero driver / no usable device for the request
    BAD_INPUT = 4  # an input file is missing, unreadable or malformed
    MISMATCH = 5  # inputs are well-formed but cannot be compared
    DRIVER_ERROR = 6  # the driver or runtime failed while working
    INTERRUPTED = 130  # Ctrl-C: device memory was freed, partial results written
