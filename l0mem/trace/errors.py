"""Errors of the allocation tracer."""


class TraceError(Exception):
    """Allocation tracing cannot go on; str() is one clear line."""


class TraceBuildError(TraceError):
    """The tracer could not be built (no C compiler, or a compiler error); str() is one line."""
