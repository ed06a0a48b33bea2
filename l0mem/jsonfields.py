"""Strict reading of l0mem's JSON reports: one-line errors that name the bad field.

Every check takes the value and its field path (``runs[2].samples[0].phase``)
and either returns the value, typed, or raises :class:`ReportFormatError`
whose message is that path and what is wrong with it. The data classes of
:mod:`l0mem.estimate` and :mod:`l0mem.audit` read themselves with these.

What it may import: nothing of l0mem.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any, cast


class ReportFormatError(ValueError):
    """A report (or part of one) is malformed; the message is one line naming the field."""


def fail(path: str, what: str) -> ReportFormatError:
    """Return the ReportFormatError for field ``path`` (``<root>`` when empty) saying ``what``."""
    return ReportFormatError(f"{path or '<root>'}: {what}")


def json_kind(value: object) -> str:
    """Return what a JSON value is, as field errors name it: ``null``, ``int``, ``str``, ``list``."""
    return "null" if value is None else type(value).__name__


_kind = json_kind


def obj(value: object, path: str) -> Mapping[str, Any]:
    """Return ``value`` as a JSON object, or raise naming ``path``."""
    if not isinstance(value, Mapping):
        raise fail(path, f"expected an object, got {_kind(value)}")
    return cast(Mapping[str, Any], value)


def field(data: Mapping[str, Any], key: str, path: str) -> Any:
    """Return ``data[key]``; raise when the field is missing."""
    if key not in data:
        raise fail(join(path, key), "missing field")
    return data[key]


def join(path: str, key: str) -> str:
    """Return the path of field ``key`` inside ``path``."""
    return f"{path}.{key}" if path else key


def string(value: object, path: str, *, empty: bool = False) -> str:
    """Return ``value`` as a string (non-empty unless ``empty``)."""
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {_kind(value)}")
    if not empty and not value:
        raise fail(path, "must not be empty")
    return value


def opt_string(value: object, path: str) -> str | None:
    """Return ``value`` as a non-empty string, or None for null."""
    return None if value is None else string(value, path)


def integer(value: object, path: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as an integer (not a bool) of at least ``minimum``."""
    # bool is an int subclass; true/false in a byte count is a bug, not a number.
    # JSON has one number type: 3.0 is the integer 3, as a JSON Schema validator says.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, f"expected an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise fail(path, f"must be >= {minimum}, got {value}")
    return value


def number(value: object, path: str) -> float:
    """Return ``value`` as a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(path, f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise fail(path, f"must be finite, got {value}")
    return float(value)


def opt_number(value: object, path: str) -> float | None:
    """Return ``value`` as a finite number, or None for null."""
    return None if value is None else number(value, path)


def boolean(value: object, path: str) -> bool:
    """Return ``value`` as true or false."""
    if not isinstance(value, bool):
        raise fail(path, f"expected true or false, got {_kind(value)}")
    return value


def opt_boolean(value: object, path: str) -> bool | None:
    """Return ``value`` as true or false, or None for null."""
    return None if value is None else boolean(value, path)


def choice(value: object, path: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` when it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise fail(path, f"expected one of {allowed}, got {value!r}")
    return value


def array(value: object, path: str) -> list[Any]:
    """Return ``value`` as a JSON list."""
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {_kind(value)}")
    return value


def str_map(value: object, path: str) -> dict[str, str]:
    """Return ``value`` as an object of strings."""
    data = obj(value, path)
    return {k: string(v, f"{path}[{k!r}]", empty=True) for k, v in data.items()}


def int_map(value: object, path: str) -> dict[str, int]:
    """Return ``value`` as an object of integers >= 0."""
    data = obj(value, path)
    return {string(k, path): integer(v, f"{path}[{k!r}]", minimum=0) for k, v in data.items()}


def json_value(value: object, path: str) -> Any:
    """Return ``value`` when it is plain JSON data (free-form parts of the report)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return number(value, path)
    if isinstance(value, list):
        return [json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise fail(path, f"object keys must be strings, got {_kind(k)}")
            out[k] = json_value(v, f"{path}[{k!r}]")
        return out
    raise fail(path, f"not JSON data: {_kind(value)}")


def json_obj(value: object, path: str) -> dict[str, Any]:
    """Return ``value`` as a JSON object of plain JSON data."""
    return cast(dict[str, Any], json_value(obj(value, path), path))


def items(value: object, path: str, parse: Any) -> list[Any]:
    """Return every item of the list ``value`` parsed by ``parse(item, item_path)``."""
    return [parse(item, f"{path}[{i}]") for i, item in enumerate(array(value, path))]


def check_utc_timestamp(text: str, path: str = "created") -> datetime.datetime:
    """Return the datetime of an ISO 8601 UTC timestamp; raise ReportFormatError otherwise."""
    try:
        # fromisoformat on Python 3.10 does not take the "Z" suffix.
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise fail(path, f"not an ISO 8601 timestamp: {text!r}") from None
    if when.utcoffset() != datetime.timedelta(0):
        raise fail(path, f"timestamp must be in UTC: {text!r}")
    return when


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC timestamp (second resolution)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")
