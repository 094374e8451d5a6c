"""Kubernetes resource quantities ("100m", "1Gi", "1e3", "0.5") as exact fractions.

Owns the parsing rules of apimachinery's ``resource.Quantity`` and the two roundings the
scheduler needs: ``milli_value`` (cpu in millicores) and ``value`` (bytes, counts). As
upstream, a parsed value keeps at most nano precision (finer digits round *up* in
magnitude: "0.1n" is 1n), and the two roundings go *away from zero* ("1.5m" is 2
millicores, "-1.5m" is -2), which is what ``MilliValue()``/``Value()`` return for every
quantity written with a suffix or a plain decimal. Nothing else lives here.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "milli_value", "parse_quantity", "value"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_MAX_INT64 = 2**63 - 1
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message names the value."""


def parse_quantity(raw: str | int | float | Fraction) -> Fraction:
    """Parse a quantity into an exact Fraction of base units (a Fraction, e.g. a sum of
    parsed quantities, is returned as it is). Runtime complexity: O(len)."""
    if isinstance(raw, Fraction):
        return raw
    if isinstance(raw, bool):
        raise QuantityError(f"invalid quantity {raw!r}: booleans are not quantities")
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"invalid quantity {raw!r}: not finite")
        return _to_nano(Fraction(repr(raw)))
    if not isinstance(raw, str):
        raise QuantityError(f"invalid quantity {raw!r}: expected a string or a number")
    m = _RE.fullmatch(raw)  # no surrounding whitespace, as upstream
    if m is None:
        raise QuantityError(f"invalid quantity {raw!r}: expected e.g. '100m', '1.5', '2Gi', '1e3'")
    number = Fraction(m["num"])
    if m["sign"] == "-":
        number = -number
    if m["exp"] is not None:
        exp = int(m["exp"][1:])
        if abs(exp) > 60:
            raise QuantityError(f"invalid quantity {raw!r}: exponent out of range")
        return _to_nano(number * Fraction(10) ** exp)
    suffix = m["suffix"] or ""
    if suffix in _BINARY:
        # Upstream caps binary-suffixed quantities at the largest int64 (in magnitude).
        binary = _to_nano(number * _BINARY[suffix])
        if abs(binary) > _MAX_INT64:
            return Fraction(_MAX_INT64 if binary > 0 else -_MAX_INT64)
        return binary
    return _to_nano(number * _DECIMAL[suffix])


def _round_away(x: Fraction) -> int:
    """The integer nearest to ``x`` away from zero when ``x`` is not whole."""
    magnitude = -((-abs(x.numerator)) // x.denominator)
    return magnitude if x >= 0 else -magnitude


def _to_nano(x: Fraction) -> Fraction:
    """Upstream keeps nano precision: finer digits round up in magnitude."""
    if (x * 10**9).denominator == 1:
        return x
    return Fraction(_round_away(x * 10**9), 10**9)


def milli_value(raw: str | int | float | Fraction) -> int:
    """The quantity in thousandths, rounded away from zero (upstream ``MilliValue``)."""
    return _round_away(parse_quantity(raw) * 1000)


def value(raw: str | int | float | Fraction) -> int:
    """The quantity in whole units, rounded away from zero (upstream ``Value``)."""
    return _round_away(parse_quantity(raw))
