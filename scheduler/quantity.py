"""Kubernetes resource quantities ("100m", "1Gi", "1e3", "0.5"), exactly.

Owns the parsing rules of apimachinery's ``resource.Quantity`` and the two roundings the
scheduler needs: ``milli_value`` (cpu in millicores) and ``value`` (bytes, counts). As
upstream, a parsed value keeps at most nano precision (finer digits round *up* in
magnitude: "0.1n" is 1n), and the two roundings go *away from zero* ("1.5m" is 2
millicores, "-1.5m" is -2), which is what ``MilliValue()``/``Value()`` return for every
quantity written with a suffix or a plain decimal; and ``format_nanos``, a quantity string
for a computed amount (DRA's consumed capacity). Nothing else lives here.

Representation: since a parsed value has at most nano precision, it is a whole number of
nano base units (``parse_nanos``); sums and maxima of requests are plain integer arithmetic,
as exact as upstream's ``inf.Dec`` and many times faster than ``Fraction``.
``parse_quantity`` (a Fraction) remains for callers that want one.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "NANO",
    "QuantityError",
    "format_nanos",
    "milli_value",
    "nanos_milli",
    "nanos_value",
    "parse_nanos",
    "parse_quantity",
    "value",
]

NANO = 10**9  # base units are counted in nanos: every parsed quantity is a whole number of them

_MAX_INT64 = 2**63 - 1
_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message names the value."""


_SUFFIX_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_POW = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_CACHE: dict[str, int] = {}
_CACHE_LIMIT = 8192


def parse_nanos(raw: str | int | float) -> int:
    """Parse a quantity into a whole number of nano base units, exactly (upstream keeps nano
    precision; finer digits round up in magnitude). Integer arithmetic only, and the strings
    a cluster repeats ("100m", "64Mi") are remembered. Runtime complexity: O(len)."""
    if isinstance(raw, str):
        hit = _CACHE.get(raw)
        if hit is not None:
            return hit
        nanos = _parse_nanos_str(raw, raw)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[raw] = nanos
        return nanos
    if isinstance(raw, bool):
        raise QuantityError(f"invalid quantity {raw!r}: booleans are not quantities")
    if isinstance(raw, int):
        return raw * NANO
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"invalid quantity {raw!r}: not finite")
        return _parse_nanos_str(repr(raw), raw)
    raise QuantityError(f"invalid quantity {raw!r}: expected a string or a number")


def _parse_nanos_str(text: str, raw: object) -> int:
    m = _RE.fullmatch(text)  # no surrounding whitespace, as upstream
    if m is None:
        raise QuantityError(f"invalid quantity {raw!r}: expected e.g. '100m', '1.5', '2Gi', '1e3'")
    whole, _, frac = m["num"].partition(".")
    num = int((whole or "0") + frac)
    den = 10 ** len(frac)
    suffix = m["suffix"] or ""
    if m["exp"] is not None:
        exp = int(m["exp"][1:])
        if abs(exp) > 60:
            raise QuantityError(f"invalid quantity {raw!r}: exponent out of range")
        power = 9 + exp
    elif suffix in _BINARY_POW:
        num *= 2 ** _BINARY_POW[suffix]
        power = 9
    else:
        power = 9 + _SUFFIX_EXP[suffix]
    if power >= 0:
        num *= 10**power
    else:
        den *= 10**-power
    q, r = divmod(num, den)
    nanos = q + (1 if r else 0)  # finer than a nano: up in magnitude
    if suffix in _BINARY_POW and nanos > _MAX_INT64 * NANO:
        nanos = _MAX_INT64 * NANO  # upstream caps binary-suffixed quantities at int64
    return int(-nanos if m["sign"] == "-" else nanos)


def parse_quantity(raw: str | int | float | Fraction) -> Fraction:
    """Parse a quantity into an exact Fraction of base units (a Fraction, e.g. a sum of
    parsed quantities, is returned as it is). Runtime complexity: O(len)."""
    if isinstance(raw, Fraction):
        return raw
    return Fraction(parse_nanos(raw), NANO)


def _div_away(n: int, d: int) -> int:
    """n / d rounded away from zero when not whole."""
    q = -((-abs(n)) // d)
    return q if n >= 0 else -q


def format_nanos(nanos: int) -> str:
    """A quantity string for a whole number of nanos, exactly, in the coarsest of the
    units, milli, micro, nano that holds it ("2", "1500m", "7n"); the API server writes it
    back in its canonical form."""
    for div, suffix in ((NANO, ""), (10**6, "m"), (10**3, "u")):
        if nanos % div == 0:
            return f"{nanos // div}{suffix}"
    return f"{nanos}n"


def nanos_milli(nanos: int) -> int:
    """Nanos in thousandths of the unit, away from zero (upstream ``MilliValue``)."""
    return _div_away(nanos, 10**6)


def nanos_value(nanos: int) -> int:
    """Nanos in whole units, away from zero (upstream ``Value``)."""
    return _div_away(nanos, NANO)


def _round_away(x: Fraction) -> int:
    """The integer nearest to ``x`` away from zero when ``x`` is not whole."""
    magnitude = -((-abs(x.numerator)) // x.denominator)
    return magnitude if x >= 0 else -magnitude


def milli_value(raw: str | int | float | Fraction) -> int:
    """The quantity in thousandths, rounded away from zero (upstream ``MilliValue``)."""
    if isinstance(raw, Fraction):
        return _round_away(raw * 1000)
    return nanos_milli(parse_nanos(raw))


def value(raw: str | int | float | Fraction) -> int:
    """The quantity in whole units, rounded away from zero (upstream ``Value``)."""
    if isinstance(raw, Fraction):
        return _round_away(raw)
    return nanos_value(parse_nanos(raw))
