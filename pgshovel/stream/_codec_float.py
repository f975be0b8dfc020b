"""float4/float8 text <-> Python float, printing exactly what PostgreSQL prints.

With ``extra_float_digits=1`` PostgreSQL prints the shortest decimal that reads
back as the same double (its Ryu-based ``float8out``), positional when the
decimal exponent of the first digit is within [-4, 15) and scientific
otherwise (``1e+15``, ``1e-05``). Python's ``repr`` finds the same digits except
in one case: a decimal lying exactly halfway to a neighbouring double, which
still reads back correctly under round-half-even, is accepted by ``repr`` but
never by PostgreSQL, which then prints one more digit. Both read back the same
value; we print PostgreSQL's. float4 text reads as the double it spells (a
float4's shortest text never needs more precision than a double has).
"""

from __future__ import annotations

import functools
import math
import re

import numpy

_FLOAT_RE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Infinity|NaN"
)
_MIN_POSITIONAL_EXPONENT = -4
_MAX_POSITIONAL_EXPONENT = 15
_MAX_FLOAT4_POSITIONAL_EXPONENT = 6
_MAX_DIGITS = 17  # enough for any double
_EXACT_INTEGERS = 2.0**53  # below it, neighbouring doubles are at most 1 apart


def parse_float(text: str) -> float:
    """The double a float4 or float8 text spells (``NaN``, ``Infinity`` included)."""
    if _FLOAT_RE.fullmatch(text) is None:
        raise ValueError("expected a decimal number, 'NaN', 'Infinity' or '-Infinity'")
    return float(text)


def _digits(text: str) -> tuple[str, int]:
    """Significant digits of a positive number's text and where its point goes."""
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    return significant.rstrip("0"), point


@functools.cache
def _power_of_five(exponent: int) -> int:
    return int(5**exponent)  # int ** int is typed Any (a negative power is a float)


def _halfway(magnitude: float, digits: str, point: int) -> bool:
    """Whether the decimal lies exactly halfway between ``magnitude`` and a neighbour."""
    scale = point - len(digits)
    number = int(digits)
    if scale >= 0:
        if magnitude < _EXACT_INTEGERS:
            return False  # an integer is never halfway between doubles this close
        numerator, denominator = number * int(10**scale), 1
    elif number % _power_of_five(-scale):
        return False  # not a binary fraction, so not halfway between two doubles
    else:
        numerator, denominator = number, int(10**-scale)
    # Exact rational comparisons in integers: value = p / q, neighbour = p2 / q2.
    p, q = magnitude.as_integer_ratio()
    if numerator * q == p * denominator:
        return False
    above = numerator * q > p * denominator
    neighbour = math.nextafter(magnitude, math.inf if above else 0.0)
    if math.isinf(neighbour):
        return False
    p2, q2 = neighbour.as_integer_ratio()
    return 2 * numerator * q * q2 == (p * q2 + p2 * q) * denominator


def _layout(digits: str, point: int, maximum: int = _MAX_POSITIONAL_EXPONENT) -> str:
    exponent = point - 1
    if not _MIN_POSITIONAL_EXPONENT <= exponent < maximum:
        rest = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{digits[0]}{rest}e{exponent:+03d}"
    if point <= 0:
        return f"0.{'0' * -point}{digits}"
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def format_float(value: float) -> str:
    """PostgreSQL's float8 text: ``1e+15``, ``0.0001``, ``-0``, ``NaN``, ``-Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits, point = _digits(repr(magnitude))
    if _halfway(magnitude, digits, point):
        # The nearest decimal with more digits, as PostgreSQL picks it.
        for count in range(len(digits) + 1, _MAX_DIGITS + 1):
            digits, point = _digits(f"{magnitude:.{count - 1}e}")
            if not _halfway(magnitude, digits, point):
                break
    return sign + _layout(digits, point)


def format_float4(value: float) -> str:
    """PostgreSQL's float4 text of a float4 value held in a double: the shortest decimal that
    reads back as the same float4, positional when its exponent is within [-4, 6)."""
    if math.isnan(value) or math.isinf(value) or value == 0.0:
        return format_float(value)
    single = numpy.float32(value)
    digits, point = _digits(numpy.format_float_scientific(abs(single), unique=True, trim="-"))
    return ("-" if value < 0 else "") + _layout(digits, point, _MAX_FLOAT4_POSITIONAL_EXPONENT)
