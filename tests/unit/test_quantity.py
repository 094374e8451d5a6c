"""Quantities: apimachinery's parsing rules, nano precision and MilliValue()/Value() rounding.

Cases with an upstream counterpart come from quantity_test.go TestQuantityParse.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.quantity import QuantityError, milli_value, parse_quantity, value

Ki = 2**10
Mi = 2**20
Gi = 2**30


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("0Mi", Fraction(0), id="zero with a binary suffix"),
        pytest.param("0m", Fraction(0), id="zero with a decimal suffix"),
        pytest.param("1", Fraction(1), id="quantity-less number"),
        pytest.param("1Ki", Fraction(Ki), id="Ki"),
        pytest.param("7Mi", Fraction(7 * Mi), id="Mi"),
        pytest.param("6Gi", Fraction(6 * Gi), id="Gi"),
        pytest.param("5Ti", Fraction(5 * 2**40), id="Ti"),
        pytest.param("4Pi", Fraction(4 * 2**50), id="Pi"),
        pytest.param("3Ei", Fraction(3 * 2**60), id="Ei"),
        pytest.param("5n", Fraction(5, 10**9), id="n"),
        pytest.param("4u", Fraction(4, 10**6), id="u"),
        pytest.param("3m", Fraction(3, 1000), id="m"),
        pytest.param("8k", Fraction(8000), id="k"),
        pytest.param("7M", Fraction(7 * 10**6), id="M"),
        pytest.param("6G", Fraction(6 * 10**9), id="G"),
        pytest.param("5T", Fraction(5 * 10**12), id="T"),
        pytest.param("2P", Fraction(2 * 10**15), id="P"),
        pytest.param("1E", Fraction(10**18), id="E is exa, not an exponent"),
        pytest.param("1E-3", Fraction(1, 1000), id="decimal exponent E-3"),
        pytest.param("1e3", Fraction(1000), id="decimal exponent e3"),
        pytest.param("1.3E+6", Fraction(1_300_000), id="decimal exponent with + sign"),
        pytest.param("0.5e-2", Fraction(5, 1000), id="fraction with exponent"),
        pytest.param("100.035k", Fraction(100_035), id="fraction with k"),
        pytest.param("0.0005k", Fraction(1, 2), id="small fraction with k"),
        pytest.param("6.987654321G", Fraction(6_987_654_321), id="long fraction with G"),
        pytest.param("100.035Ki", Fraction(10243584, 100), id="fractional binary"),
        pytest.param("0.5Mi", Fraction(Mi // 2), id="half a Mi"),
        pytest.param(".001", Fraction(1, 1000), id="no integer part"),
        pytest.param("1.", Fraction(1), id="no fraction digits"),
        pytest.param("1.G", Fraction(10**9), id="no fraction digits with a suffix"),
        pytest.param("+2", Fraction(2), id="explicit plus"),
        pytest.param("-2Ki", Fraction(-2 * Ki), id="negative binary"),
        pytest.param("-100m", Fraction(-1, 10), id="negative milli"),
        # Things that saturate/round (upstream keeps nano precision, rounding up).
        pytest.param("3.001n", Fraction(4, 10**9), id="sub-nano digits round up"),
        pytest.param("1.1E-9", Fraction(2, 10**9), id="sub-nano exponent rounds up"),
        pytest.param("0.0000000001", Fraction(1, 10**9), id="tiny decimal rounds up to 1n"),
        pytest.param("0.00000012345", Fraction(124, 10**9), id="rounds up to 124n"),
        pytest.param("-3.001n", Fraction(-4, 10**9), id="negative rounds away from zero"),
        pytest.param("9Ei", Fraction(2**63 - 1), id="binary capped at max int64"),
        pytest.param("12E", Fraction(12 * 10**18), id="decimal not capped"),
        pytest.param(3, Fraction(3), id="an int (YAML number)"),
        pytest.param(0.25, Fraction(1, 4), id="a float (YAML number)"),
    ],
)
def test_parse_quantity(raw: str | int | float, want: Fraction) -> None:
    assert parse_quantity(raw) == want


@pytest.mark.parametrize(
    ("raw", "milli", "whole"),
    [
        pytest.param("1", 1000, 1, id="one"),
        pytest.param("100m", 100, 1, id="100m is 100 millis and rounds up to 1"),
        pytest.param("1.5m", 2, 1, id="1.5m rounds up to 2 millicores"),
        pytest.param("0.1m", 1, 1, id="0.1m rounds up to 1 millicore"),
        pytest.param("1n", 1, 1, id="1n rounds up everywhere"),
        pytest.param("2.5", 2500, 3, id="2.5 rounds up to 3 units"),
        pytest.param("1Ki", 1024000, 1024, id="1Ki"),
        pytest.param("1.5Gi", 1536 * Mi * 1000, 1536 * Mi, id="1.5Gi exact"),
        pytest.param("-1.5m", -2, -1, id="negative rounds away from zero (int64 path)"),
        pytest.param("-2.5", -2500, -3, id="negative units round away from zero"),
        pytest.param("0", 0, 0, id="zero"),
        pytest.param(Fraction(1, 3), 334, 1, id="an exact Fraction (a sum) rounds once"),
    ],
)
def test_milli_value_and_value_round_away_from_zero(
    raw: str | Fraction, milli: int, whole: int
) -> None:
    assert milli_value(raw) == milli
    assert value(raw) == whole


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("", id="empty"),
        pytest.param("1.1.M", id="two dots"),
        pytest.param("1+1.0M", id="sign inside"),
        pytest.param("0.1mi", id="mi is no suffix"),
        pytest.param("0.1am", id="unknown suffix am"),
        pytest.param("aoeu", id="words"),
        pytest.param(".5i", id="i alone"),
        pytest.param("1i", id="1i"),
        pytest.param("-3.01e-", id="exponent without digits"),
        pytest.param("1K", id="upper-case K"),
        pytest.param("1e", id="e without digits"),
        pytest.param(" 1", id="leading whitespace is forbidden"),
        pytest.param("1 ", id="trailing whitespace is forbidden"),
        pytest.param("1\n", id="trailing newline is forbidden"),
        pytest.param("1e61", id="exponent out of range"),
        pytest.param(True, id="a boolean"),
        pytest.param(None, id="None"),
        pytest.param(float("inf"), id="infinity"),
    ],
)
def test_invalid_quantity_raises_naming_the_value(raw: object) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(raw)  # type: ignore[arg-type]
    assert repr(raw) in str(exc.value)


_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_BINARY = {"Ki": Ki, "Mi": Mi, "Gi": Gi, "Ti": 2**40}
_SMALL = {"m": Fraction(1, 10**3), "u": Fraction(1, 10**6), "n": Fraction(1, 10**9)}


@given(n=st.integers(min_value=-(10**6), max_value=10**6), suffix=st.sampled_from(list(_DECIMAL)))
def test_integer_with_decimal_suffix(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * _DECIMAL[suffix]
    assert value(f"{n}{suffix}") == n * _DECIMAL[suffix]


@given(n=st.integers(min_value=0, max_value=10**6), suffix=st.sampled_from(list(_BINARY)))
def test_integer_with_binary_suffix(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * _BINARY[suffix]
    assert milli_value(f"{n}{suffix}") == n * _BINARY[suffix] * 1000


@given(n=st.integers(min_value=0, max_value=10**9), suffix=st.sampled_from(list(_SMALL)))
def test_integer_with_sub_unit_suffix(n: int, suffix: str) -> None:
    q = n * _SMALL[suffix]
    assert parse_quantity(f"{n}{suffix}") == q
    # MilliValue is ceil(q * 1000) for non-negative quantities.
    assert milli_value(f"{n}{suffix}") == -((-q * 1000).numerator // (q * 1000).denominator)


@given(n=st.integers(min_value=-(10**6), max_value=10**6), exp=st.integers(-9, 18))
def test_integer_with_exponent(n: int, exp: int) -> None:
    assert parse_quantity(f"{n}e{exp}") == n * Fraction(10) ** exp


@given(whole=st.integers(0, 10**6), frac=st.integers(0, 999))
def test_decimal_fraction(whole: int, frac: int) -> None:
    assert parse_quantity(f"{whole}.{frac:03d}") == whole + Fraction(frac, 1000)
    assert milli_value(f"{whole}.{frac:03d}") == whole * 1000 + frac


# --------------------------------------------------------------------------- integer path
# The parser counts whole nano units in integers; this is the Fraction arithmetic it replaced
# (nano precision, finer digits up in magnitude, binary quantities capped at int64), kept
# here as the oracle.


def _reference(raw: str) -> Fraction:
    import re

    m = re.fullmatch(
        r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
        r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)",
        raw,
    )
    assert m is not None
    number = Fraction(m["num"]) * (-1 if m["sign"] == "-" else 1)

    def to_nano(x: Fraction) -> Fraction:
        scaled = x * 10**9
        if scaled.denominator == 1:
            return x
        mag = -((-abs(scaled.numerator)) // scaled.denominator)
        return Fraction(mag if scaled >= 0 else -mag, 10**9)

    if m["exp"] is not None:
        return to_nano(number * Fraction(10) ** int(m["exp"][1:]))
    suffix = m["suffix"] or ""
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    if suffix in binary:
        q = to_nano(number * 2 ** binary[suffix])
        cap = 2**63 - 1
        return Fraction(cap if q > 0 else -cap) if abs(q) > cap else q
    decimal = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    return to_nano(number * Fraction(10) ** decimal[suffix])


_NUMBERS = st.one_of(
    st.integers(0, 10**12).map(str),
    st.tuples(st.integers(0, 10**6), st.text("0123456789", min_size=1, max_size=12)).map(
        lambda t: f"{t[0]}.{t[1]}"
    ),
    st.text("0123456789", min_size=1, max_size=12).map(lambda d: f".{d}"),
)
_TAILS = st.one_of(
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E"]),
    st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    st.integers(-30, 30).map(lambda e: f"e{e}"),
)


@given(sign=st.sampled_from(["", "-", "+"]), num=_NUMBERS, tail=_TAILS)
def test_the_integer_path_equals_the_exact_fraction_path(sign: str, num: str, tail: str) -> None:
    raw = f"{sign}{num}{tail}"
    want = _reference(raw)
    assert parse_quantity(raw) == want
    assert milli_value(raw) == milli_value(want)
    assert value(raw) == value(want)
    assert parse_quantity(raw) == want  # a second time: from the cache
