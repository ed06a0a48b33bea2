"""Reading audit reports back: bounded in size, depth and numbers, one-line errors.

A report may come from anywhere (an artifact of another machine, a CI cache,
a hostile user): a FIFO or device, a file of gigabytes, brackets nested a
million deep or numbers of a thousand digits all end in one
:class:`~l0mem.audit.model.ReportFormatError` line, in bounded time and memory.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from l0mem.audit.model import AuditReport, ReportFormatError, parse_schema
from l0mem.jsonfields import json_kind
from l0mem.text import excerpt, printable, whole_text

PathLike = str | os.PathLike[str]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# The largest report l0mem reads: real reports are a few hundred KiB, so this
# only bounds the memory and time a hostile or wrong file can cost.
MAX_REPORT_BYTES = 64 << 20
# The deepest nesting of arrays and objects read: real reports nest 6 deep;
# refusing deeper before parsing keeps every reader clear of RecursionError.
MAX_REPORT_DEPTH = 64
# Integers in a report are byte counts, nanoseconds and counters: all fit in
# 64 bits; a longer one would overflow the float arithmetic of the analysis.
# Floats (slopes, ratios, seconds) are held to the same magnitude.
_MAX_INT = 1 << 64
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")
# A \u escape of half a UTF-16 pair (D800-DFFF): the only way a surrogate gets in
# (raw UTF-8 cannot hold one). Looked for in the raw text, where it costs a scan at C
# speed: a report without one is never walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _read_capped(p: Path, name: str) -> bytes:
    """Return the bytes of the regular file ``p`` (``name`` in errors); raise ReportFormatError for anything else."""
    try:
        # stat first: opening a FIFO would block until a writer comes, and a
        # device could stream forever.
        st = p.stat()
    except FileNotFoundError:
        raise ReportFormatError(f"{name}: no such file") from None
    except OSError as exc:
        raise ReportFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ReportFormatError(f"{name}: is a directory, not a report file")
    if not stat.S_ISREG(st.st_mode):
        raise ReportFormatError(f"{name}: not a regular file (a FIFO, socket or device)")
    if st.st_size > MAX_REPORT_BYTES:
        raise ReportFormatError(
            f"{name}: too large for a report ({st.st_size} bytes, the limit is {MAX_REPORT_BYTES})"
        )
    try:
        # O_NONBLOCK: the path may have been swapped for a FIFO since the stat.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReportFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ReportFormatError(f"{name}: not a regular file (a FIFO, socket or device)")
            raw = f.read(MAX_REPORT_BYTES + 1)
        except OSError as exc:
            raise ReportFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ReportFormatError(f"{name}: too large for a report (over {MAX_REPORT_BYTES} bytes)")
    return raw


# Byte order marks of the encodings a report is not in (UTF-32 first: its LE mark
# starts with UTF-16's), and what each encoding is called.
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _without_bom(raw: bytes, name: str) -> bytes:
    """Return ``raw`` without a UTF-8 byte order mark; a UTF-16 or UTF-32 one is a one-line error.

    JSON is UTF-8 without a mark (RFC 8259), which lets a reader ignore one:
    an editor or a Windows tool that saved the report with it changed nothing
    in it. Text in another encoding is named as such, with what to do.
    """
    if raw.startswith(codecs.BOM_UTF8):
        return raw[len(codecs.BOM_UTF8) :]
    for mark, encoding in _OTHER_BOMS:
        if raw.startswith(mark):
            raise ReportFormatError(
                f"{name}: not JSON as l0mem reads it: {encoding} text (it starts with a "
                f"{encoding} byte order mark); save it as UTF-8 "
                f"(iconv -f {encoding} -t UTF-8 {name} > {name}.utf8)"
            )
    return raw


def _too_deep(raw: bytes) -> bool:
    """Return whether arrays and objects in ``raw`` nest over MAX_REPORT_DEPTH deep.

    Each pass deletes the innermost pairs, so a group nested d deep is gone
    after d passes: bounded work at C speed, where a loop over 64 MiB of
    brackets in Python would take seconds.
    """
    brackets = _STRINGS.sub(b"", raw).translate(_AS_PARENS, _NOT_BRACKETS)
    for _ in range(MAX_REPORT_DEPTH):
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            break
        brackets = shorter
    # Left over: deeper groups, or brackets never closed (which json would
    # still recurse into before it fails).
    return b"()" in brackets or brackets.count(b"(") > MAX_REPORT_DEPTH


def _parse_int(text: str) -> int:
    # Checked on the digits, before int() (whose own limit, 4300 digits, is far too lax).
    if len(text.lstrip("-")) > 20 or abs(int(text)) >= _MAX_INT:
        raise ValueError(f"integer {excerpt(text, 27)} out of range")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    # The integers' bound too: a finite 1e308 still overflows a difference or round().
    if not math.isfinite(value) or abs(value) >= _MAX_INT:
        raise ValueError(f"number {excerpt(text, 27)} out of range")
    return value


def _whole(value: Any) -> Any:
    """Return JSON data ``value`` with every string (keys too) through :func:`whole_text`."""
    if isinstance(value, str):
        return whole_text(value)
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, dict):
        return {whole_text(k): _whole(v) for k, v in value.items()}
    return value


def load_json_data(path: PathLike) -> dict[str, Any]:
    """Return the JSON object in ``path``; raise ReportFormatError (one line) when unreadable.

    Only a regular file of at most MAX_REPORT_BYTES, nested at most
    MAX_REPORT_DEPTH deep, with numbers of magnitude below 2**64, is read.
    A UTF-8 byte order mark before it is ignored; UTF-16 or UTF-32 text is
    refused by name. A lone surrogate escaped in a string (``"\\ud800"``,
    half a UTF-16 pair: valid JSON, no character, and no output can write
    it) is read as U+FFFD; an escaped pair is the character it encodes.
    """
    p = Path(path)
    name = printable(str(p))  # a newline in the name must not cut the reason off
    raw = _without_bom(_read_capped(p, name), name)
    if _too_deep(raw):
        raise ReportFormatError(
            f"{name}: not an l0mem report (nested over {MAX_REPORT_DEPTH} deep)"
        )
    try:
        data = json.loads(
            raw.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except UnicodeDecodeError:
        raise ReportFormatError(f"{name}: not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise ReportFormatError(
            f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ReportFormatError(f"{name}: not JSON ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise ReportFormatError(f"{name}: not an l0mem report (top level is not a JSON object)")
    if _SURROGATE_ESCAPE.search(raw):
        data = _whole(data)
    return data


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def schema_of(data: dict[str, Any], source: PathLike) -> tuple[int, int]:
    """Return (major, minor) of the report schema in ``data``; raise ReportFormatError."""
    if "schema" not in data:
        raise ReportFormatError(f"{source}: schema: missing field (not an l0mem audit report)")
    schema = data["schema"]
    if not isinstance(schema, str):  # there, but not a name: say what it is
        raise ReportFormatError(
            f"{source}: schema: expected a string, got {json_kind(schema)} "
            "(not an l0mem audit report)"
        )
    try:
        return parse_schema(schema)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{source}: {exc}") from None


def report_from_data(data: dict[str, Any], source: PathLike) -> AuditReport:
    """Return the report in ``data``; errors name ``source`` and the bad field."""
    schema_of(data, source)
    try:
        return AuditReport.from_dict(data)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{source}: {exc}") from None


def read_json(path: PathLike) -> AuditReport:
    """Return the report stored in ``path``; raise ReportFormatError with a one-line message."""
    return report_from_data(load_json_data(path), path)
