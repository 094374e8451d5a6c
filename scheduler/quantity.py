"""Kubernetes resource quantities ("100m", "1Gi", "1e3", "0.5") as exact fractions.

Owns the parsing rules of apimachinery's ``resource.Quantity`` and the two roundings the
scheduler needs: ``milli_value`` (cpu in millicores) and ``value`` (bytes, counts), both
rounding *up* as upstream's ``MilliValue()``/``Value()`` do. Nothing else lives here.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "milli_value", "parse_quantity", "value"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
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


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a quantity into an exact Fraction of base units. Runtime complexity: O(len)."""
    if isinstance(raw, bool):
        raise QuantityError(f"invalid quantity {raw!r}: booleans are not quantities")
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"invalid quantity {raw!r}: not finite")
        return Fraction(repr(raw))
    if not isinstance(raw, str):
        raise QuantityError(f"invalid quantity {raw!r}: expected a string or a number")
    m = _RE.match(raw.strip())
    if m is None:
        raise QuantityError(f"invalid quantity {raw!r}: expected e.g. '100m', '1.5', '2Gi', '1e3'")
    number = Fraction(m["num"])
    if m["sign"] == "-":
        number = -number
    if m["exp"] is not None:
        exp = int(m["exp"][1:])
        if abs(exp) > 60:
            raise QuantityError(f"invalid quantity {raw!r}: exponent out of range")
        return number * Fraction(10) ** exp
    suffix = m["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def milli_value(raw: str | int | float) -> int:
    """The quantity in thousandths, rounded up (upstream ``MilliValue``): cpu millicores."""
    return _ceil(parse_quantity(raw) * 1000)


def value(raw: str | int | float) -> int:
    """The quantity in whole units, rounded up (upstream ``Value``): bytes, counts."""
    return _ceil(parse_quantity(raw))
