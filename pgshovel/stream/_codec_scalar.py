"""PostgreSQL text <-> Python values for the scalar types with a native kind.

Integers, numerics, booleans, bytea and uuids, as their output functions print
them under the capture session settings (``bytea_output='hex'``; floats have
their own module). Parsing checks the text is that output form rather than
whatever Python would accept (``int`` takes ``'1_0'``); formatting prints
PostgreSQL's canonical text. Bad text raises ``ValueError`` with a lowercase
reason; the public codec adds the type name.
"""

from __future__ import annotations

import re
import uuid

_DECIMAL_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?|NaN|-?Infinity")
_BOOLEANS = {"t": True, "f": False, "true": True, "false": False}


def parse_integer(text: str, bounds: tuple[int, int]) -> int:
    """An integer printed in canonical decimal form, within ``bounds``."""
    value = int(text)
    if str(value) != text:
        raise ValueError("expected a canonical decimal integer")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"integer out of range {bounds[0]}..{bounds[1]}")
    return value


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
