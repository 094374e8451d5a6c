"""Device selectors: DRA's CEL expressions (``device.driver``, ``device.attributes``,
``device.capacity``, ``device.allowMultipleAllocations``) evaluated on one device.

The expressions are compiled and run by ``common-expression-language`` (the ``cel``
module: Python bindings of the Rust cel-interpreter; a library rather than our own CEL).
Upstream's environment (k8s.io/dynamic-resource-allocation/cel) is rebuilt on it:

- ``device.attributes[domain][id]`` and ``device.capacity[domain][id]``: an unqualified
  name has the driver's domain. Upstream's maps answer an empty map for a domain the
  device has none of; here every domain an expression names as a string literal
  (``attributes["gpu.example.com"]``) is given an empty map (a domain computed at run time
  is not: a missing key is then a runtime error).
- A ``version`` attribute is its semantic-version string; a capacity is a quantity.
  ``quantity(s)`` and ``semver(s)``, and on them ``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``isInteger``, ``asInteger``, ``asApproximateFloat``, ``sign``, and
  ``major``/``minor``/``patch`` on versions, are provided; ``==`` on two quantities compares
  their canonical forms, not their values (``quantity("1Gi") == quantity("1024Mi")`` is
  false here; ``compareTo`` is exact).
- ``cel.bind`` and the other extension libraries of cel-go are not available.

A compile error or a runtime error is an error of the allocation, as upstream's
(``CEL compile error`` / ``CEL runtime error`` in the message)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scheduler.draapi import Device, Version
from scheduler.quantity import parse_quantity

_QUANTITY = "__quantity__"
_DOMAIN_REF = re.compile(r'\b(attributes|capacity)\s*\[\s*"([^"\\]+)"\s*\]')
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_CACHE_MAX = 4096
_PER_DEVICE_MAX = 256  # selector results cached on one device


class CelError(ValueError):
    """A selector that does not compile, or fails on a device."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    program: Any
    attribute_domains: tuple[str, ...]
    capacity_domains: tuple[str, ...]


_compiled: dict[str, _Compiled | str] = {}


def _cel() -> Any:
    """The ``cel`` module, imported on first use: its package imports its command line's
    libraries too (~100 ms), which ``simulate`` and pods without claims need not pay. The
    live scheduler calls ``load_cel`` at start, so that no scheduling cycle imports it."""
    import cel

    return cel


def load_cel() -> None:
    _cel()


def compile_selector(expression: str) -> _Compiled:
    """The compiled expression (cached); raises CelError with the compiler's message."""
    hit = _compiled.get(expression)
    if hit is None:
        try:
            program = _cel().compile(expression)
        except Exception as e:  # the library's ValueError, with its caret diagram
            hit = str(e).replace("\n", " ")
        else:
            attrs = tuple(
                sorted({d for kind, d in _DOMAIN_REF.findall(expression) if kind == "attributes"})
            )
            caps = tuple(
                sorted({d for kind, d in _DOMAIN_REF.findall(expression) if kind == "capacity"})
            )
            hit = _Compiled(program, attrs, caps)
        if len(_compiled) >= _CACHE_MAX:
            _compiled.clear()
        _compiled[expression] = hit
    if isinstance(hit, str):
        raise CelError(hit)
    return hit


# ----------------------------------------------------------------- quantities, versions
def _q(x: Any) -> Fraction:
    if isinstance(x, Mapping) and _QUANTITY in x:
        return parse_quantity(str(x[_QUANTITY]))
    raise TypeError(f"expected a quantity, got {x!r}")


def _semver(x: Any) -> tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]:
    if not isinstance(x, str):
        raise TypeError(f"expected a semver, got {x!r}")
    m = _SEMVER.match(x)
    if m is None:
        raise ValueError(f"invalid semver {x!r}")
    pre = None
    if m.group(4):
        # A numeric identifier sorts before an alphanumeric one (0 before 1).
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in m.group(4).split("."))
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _version_key(x: Any) -> tuple[Any, ...]:
    major, minor, patch, pre = _semver(x)
    # A release sorts after its pre-releases.
    return (major, minor, patch, (1,) if pre is None else (0, pre))


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        x, y = _q(a), _q(b)
    else:
        x, y = _version_key(a), _version_key(b)  # type: ignore[assignment]
    return (x > y) - (x < y)


def _quantity(s: Any) -> dict[str, str]:
    if not isinstance(s, str):
        raise TypeError(f"quantity() takes a string, got {s!r}")
    parse_quantity(s)  # a malformed quantity is an error here, as upstream's
    return {_QUANTITY: s}


def _semver_fn(s: Any) -> str:
    _semver(s)
    return str(s)


def _as_integer(q: Any) -> int:
    v = _q(q)
    if v.denominator != 1:
        raise ValueError(f"cannot convert quantity {q[_QUANTITY]!r} to an integer")
    return int(v)


_FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "semver": _semver_fn,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "isInteger": lambda q: _q(q).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_q(q)),
    "sign": lambda q: (_q(q) > 0) - (_q(q) < 0),
    "major": lambda v: _semver(v)[0],
    "minor": lambda v: _semver(v)[1],
    "patch": lambda v: _semver(v)[2],
}


def _split(name: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return domain, ident


def _activation(device: Device, driver: str, c: _Compiled) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {d: {} for d in c.attribute_domains}
    for name, value in device.attributes.items():
        domain, ident = _split(name)
        attributes.setdefault(domain, {})[ident] = (
            value.text if isinstance(value, Version) else value
        )
    capacity: dict[str, dict[str, Any]] = {d: {} for d in c.capacity_domains}
    for name, q in device.capacity.items():
        domain, ident = _split(name if "/" in name else f"{driver}/{name}")
        capacity.setdefault(domain, {})[ident] = {_QUANTITY: q}
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.multi,
    }


def device_matches(expression: str, device: Device, driver: str) -> bool:
    """Whether the selector admits the device (cached on the device, which is immutable);
    raises CelError (compile or runtime error, or a result that is not a bool)."""
    hit = device.matches.get(expression)
    if hit is None:
        try:
            c = compile_selector(expression)
        except CelError as e:
            raise CelError(f"CEL compile error: {e}") from None
        ctx = _cel().Context()
        for name, fn in _FUNCTIONS.items():
            ctx.add_function(name, fn)
        ctx.add_variable("device", _activation(device, driver, c))
        try:
            result = c.program.execute(ctx)
        except KeyError as e:
            hit = f"CEL runtime error: no such key: {e.args[0] if e.args else ''}"
        except Exception as e:
            hit = f"CEL runtime error: {e}"
        else:
            hit = (
                result
                if isinstance(result, bool)
                else (f"CEL result of type {type(result).__name__} could not be converted to bool")
            )
        if len(device.matches) >= _PER_DEVICE_MAX:  # claims' own selectors may all differ
            device.matches.clear()
        device.matches[expression] = hit
    if isinstance(hit, str):
        raise CelError(hit)
    return hit


__all__ = ["CelError", "compile_selector", "device_matches", "load_cel"]
