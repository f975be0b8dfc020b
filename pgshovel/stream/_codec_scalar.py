"""PostgreSQL text <-> Python values for the scalar types with a native kind.

Integers, floats, numerics, booleans, bytea and uuids, as their output functions
print them under the capture session settings (``extra_float_digits=1``, so
floats are the shortest text that reads back exactly; ``bytea_output='hex'``).
Parsing checks the text is that output form rather than whatever Python would
accept (``int`` takes ``'1_0'``, ``float`` takes ``'inf'``); formatting prints
PostgreSQL's canonical text. Bad text raises ``ValueError`` with a lowercase
reason; the public codec adds the type name.
"""

from __future__ import annotations

import math
import re
import uuid

INTEGER_RANGES = {
    "int2": (-(2**15), 2**15 - 1),
    "int4": (-(2**31), 2**31 - 1),
    "int8": (-(2**63), 2**63 - 1),
    "oid": (0, 2**32 - 1),
}
_FLOAT_RE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Infinity|NaN"
)
_DECIMAL_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?|NaN|-?Infinity")
_BOOLEANS = {"t": True, "f": False, "true": True, "false": False}
# PostgreSQL prints floats in positional form while the decimal exponent of the
# first digit is within [-4, 15), in scientific form otherwise.
_MIN_POSITIONAL_EXPONENT = -4
_MAX_POSITIONAL_EXPONENT = 15


def parse_integer(text: str, bounds: tuple[int, int]) -> int:
    """An integer printed in canonical decimal form, within ``bounds``."""
    value = int(text)
    if str(value) != text:
        raise ValueError("expected a canonical decimal integer")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"integer out of range {bounds[0]}..{bounds[1]}")
    return value


def parse_float(text: str) -> float:
    """A float4 or float8 read exactly as a double (float4 text reads back the same)."""
    if _FLOAT_RE.fullmatch(text) is None:
        raise ValueError("expected a decimal number, 'NaN', 'Infinity' or '-Infinity'")
    return float(text)


def format_float(value: float) -> str:
    """PostgreSQL's shortest exact float8 text: ``1e+15``, ``0.0001``, ``-0``, ``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    # repr() is the shortest text that reads back exactly; only its layout differs.
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    significant = significant.rstrip("0")
    exponent10 = point - 1
    if not _MIN_POSITIONAL_EXPONENT <= exponent10 < _MAX_POSITIONAL_EXPONENT:
        rest = f".{significant[1:]}" if len(significant) > 1 else ""
        return f"{sign}{significant[0]}{rest}e{exponent10:+03d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{significant}"
    if point >= len(significant):
        return sign + significant + "0" * (point - len(significant))
    return f"{sign}{significant[:point]}.{significant[point:]}"


def check_decimal(text: str) -> str:
    """A numeric's exact text as PostgreSQL prints it (scale kept: ``1.50``)."""
    if _DECIMAL_RE.fullmatch(text) is None:
        raise ValueError("expected digits with an optional fraction, 'NaN' or '[-]Infinity'")
    return text


def parse_bool(text: str) -> bool:
    """PostgreSQL's ``t`` or ``f`` (``true``/``false`` accepted too)."""
    try:
        return _BOOLEANS[text]
    except KeyError:
        raise ValueError("expected 't' or 'f'") from None


def format_bool(value: bool) -> str:
    return "t" if value else "f"


def parse_bytea(text: str) -> bytes:
    """The bytes of a hex-format bytea text ``\\x0a1b``."""
    if not text.startswith("\\x"):
        raise ValueError("expected hex bytea text '\\x...' (the session needs bytea_output='hex')")
    return bytes.fromhex(text[2:])


def format_bytea(value: bytes) -> str:
    return "\\x" + value.hex()


def parse_uuid(text: str) -> bytes:
    """The 16 bytes of a uuid's text."""
    if len(text) == 36 and text[8] == text[13] == text[18] == text[23] == "-":
        raw = bytes.fromhex(text[:8] + text[9:13] + text[14:18] + text[19:23] + text[24:])
        if len(raw) != 16:
            raise ValueError("expected 32 hexadecimal digits")
        return raw
    return uuid.UUID(text).bytes


def format_uuid(value: bytes) -> str:
    """The lowercase hyphenated text of a 16-byte uuid."""
    if len(value) != 16:
        raise ValueError(f"a uuid needs 16 bytes, not {len(value)}")
    digits = value.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
