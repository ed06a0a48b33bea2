"""Every number on the command line is written one way: ASCII digits (and, for real numbers, a
decimal point and an exponent), in every command and every option that takes one.

Python's int() and float() took ``1_000``, ``+5`` and ``٣`` for ``--reps`` and
``--interval`` while the sizes refused the first two and took the third.
"""

from __future__ import annotations

import click
import pytest

from l0mem.cli._numbers import FloatRange, IntRange
from tests.support.cli import command_params, usage_error

# Forms Python's int()/float() take that are not how l0mem reads a number.
NOT_NUMBERS = ("1_000", "+5", "\u0663", "\uff15", "1 000", "0x10", "nan", "inf", "1e", "\u0661.5")


def _numeric_options() -> dict[tuple[str, str], click.Option]:
    return command_params(
        lambda p: isinstance(p, click.Option)
        and isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType))
    )


NUMERIC = _numeric_options()


def test_every_numeric_option_reads_numbers_by_the_one_rule() -> None:
    assert len(NUMERIC) >= 15, sorted(NUMERIC)
    plain = [k for k, p in NUMERIC.items() if not isinstance(p.type, (IntRange, FloatRange))]
    assert plain == [], plain  # a new option with click's own IntRange/FloatRange joins here


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
@pytest.mark.parametrize(("command", "option"), sorted(NUMERIC), ids=str)
def test_a_number_written_otherwise_is_a_usage_error_saying_how(
    command: str, option: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [*command.split(), option, value]
    if command == "run":
        args += ["--", "true"]
    text = usage_error(args, monkeypatch)
    assert "ASCII digits" in text or "nan" in value or "inf" in value, text


@pytest.mark.parametrize(("form", "number"), [("5", 5), (" 5 ", 5), ("0.25", 0.25), ("1e-1", 0.1)])
def test_the_forms_it_takes(form: str, number: float) -> None:
    real = FloatRange(0.0, 10.0)
    assert real.convert(form, None, None) == pytest.approx(number)
    if float(number).is_integer():
        assert IntRange(0, 10).convert(form, None, None) == number


@pytest.mark.parametrize("value", ["\u0664K", "\uff11M", "+1G", "4_096"])
def test_sizes_take_ascii_digits_only(value: str) -> None:
    from l0mem.units import parse_size

    with pytest.raises(ValueError, match="bad size"):
        parse_size(value)


INT_OPTIONS = sorted(k for k, p in NUMERIC.items() if isinstance(p.type, IntRange))


@pytest.mark.parametrize("digits", [31, 4301, 20000])
@pytest.mark.parametrize(("command", "option"), INT_OPTIONS, ids=str)
def test_a_whole_number_of_thousands_of_digits_is_one_short_line(
    command: str, option: str, digits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # int() refuses past 4300 digits with a message quoting every one of them.
    args = [*command.split(), option, "9" * digits]
    if command == "run":
        args += ["--", "true"]
    text = usage_error(args, monkeypatch)
    assert f"a number of {digits} digits is not in the range" in text, text[:300]
    assert len(text) < 600, len(text)
