"""l0mem.text.printable: every control character shown as its code, the rest as written."""

from __future__ import annotations

import random
import re

import pytest

from l0mem.text import printable


def _control(c: str) -> bool:
    return ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0


@pytest.mark.parametrize("seed", range(50))
def test_no_control_character_survives_and_nothing_else_changes(seed: int) -> None:
    rng = random.Random(seed)
    pool = [chr(c) for c in [*range(0, 0x20), *range(0x20, 0xA0), 0xE9, 0x2713] if c != 0x5C]
    text = "".join(rng.choice(pool) for _ in range(60))
    shown = printable(text)
    assert not any(_control(c) for c in shown)
    # Each code read back as its character gives the text again (no backslash in it).
    assert re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), shown) == text


def test_kept_characters_stay_and_escape_sequences_are_shown() -> None:
    assert printable("a\x1b[2Jb\n\tc") == "a\\x1b[2Jb\\x0a\\x09c"
    assert printable("a\x1b[2Jb\n\tc", keep="\n\t") == "a\\x1b[2Jb\n\tc"
    assert printable("\x9b\x7fé✓") == "\\x9b\\x7fé✓"


STEERING = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]


@pytest.mark.parametrize("seed", range(30))
def test_no_bidi_override_or_line_separator_survives(seed: int) -> None:
    # A report's name with U+202E reads reversed on a terminal, in a CSV or a Markdown
    # table ("Trojan source"); U+2028 breaks a table's row where no newline is.
    rng = random.Random(seed)
    pool = [chr(c) for c in [*STEERING, 0x41, 0x7A, 0xE9, 0x200D, 0x1F600, 0x5D0]]
    text = "".join(rng.choice(pool) for _ in range(40))
    shown = printable(text)
    assert not any(ord(c) in STEERING for c in shown), shown
    assert re.sub(r"\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1), 16)), shown) == text
    assert "\u200d" in shown or "\u200d" not in text  # a joiner inside an emoji stays
