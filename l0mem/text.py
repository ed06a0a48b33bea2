"""Text from reports and other processes, shown as written and never obeyed.

A report's strings (a watched command's name, a stack label, a signal name
read from a driver's files) reach terminals, CSV and Markdown. A control
character among them (a terminal's escape sequence, a carriage return that
rewrites the line) would act instead of being read: :func:`printable` shows
each one as its code, ``\\x1b``. An error quoting what it refuses quotes at
most its start (:func:`excerpt`): a value of thousands of characters makes no
error line of thousands.

A report's JSON may escape one half of a UTF-16 pair alone (``"\\ud800"``):
no UTF-8 output can carry it, and :func:`whole_text` reads it as U+FFFD. A
name the system gives (a command line argument, a path) is bytes, which
Python keeps as such a surrogate where they are not UTF-8 (``\\udcff``):
:func:`os_text` shows each such byte as its code, ``\\xff``.

What it may import: nothing of l0mem (a leaf every layer may use).
"""

from __future__ import annotations

import re

# Characters that steer how the text around them reads without being seen: the
# bidirectional overrides and isolates (a name shown reversed, "Trojan source"),
# and the line and paragraph separators (a row that breaks where no newline is).
_STEERING = frozenset(
    [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
)


def _shown(ch: str, keep: str) -> str:
    code = ord(ch)
    if ch in keep:
        return ch
    if code < 0x20 or 0x7F <= code < 0xA0:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code in _STEERING else ch


def printable(text: str, keep: str = "") -> str:
    """Return ``text`` with every control character (C0, DEL, C1) as ``\\xNN`` and every bidi or line-separator one as ``\\uNNNN``; those in ``keep`` stay."""
    return "".join(_shown(ch, keep) for ch in text)


def xml_text(text: str, keep: str = "") -> str:
    """Return ``text`` as XML 1.0 carries it: controls as :func:`printable` shows them, lone surrogates as ``\\udcNN``."""
    shown = printable(text, keep).replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


# Halves of a UTF-16 pair: in a str only alone (json.loads joins an escaped pair).
_SURROGATES = re.compile("[\ud800-\udfff]")


def whole_text(text: str) -> str:
    """Return ``text`` with each lone surrogate (half a UTF-16 pair, no character) as U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


def _os_byte(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80-U+DCFF is a byte Python could not decode (surrogateescape): show the byte.
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def os_text(text: str) -> str:
    """Return a string the system gave (argv, a path) as text that encodes: a byte that is not UTF-8 as ``\\xNN``.

    Python gives such bytes as U+DC80-U+DCFF (``os.fsdecode``); any other lone
    surrogate is shown as its code (``\\ud800``). Everything else is kept as
    it is, control characters too: a format that cannot carry those shows
    them with :func:`printable`.
    """
    return text if _SURROGATES.search(text) is None else _SURROGATES.sub(_os_byte, text)


def excerpt(text: str, limit: int = 24) -> str:
    """Return ``text``, or its first ``limit - 3`` characters and "..." where it is longer than ``limit``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["excerpt", "os_text", "printable", "whole_text", "xml_text"]
