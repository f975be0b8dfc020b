"""PostgreSQL COPY text format: encode rows of text values, decode COPY output lines.

Values are PostgreSQL text forms (None is NULL). Encoding escapes backslash,
tab, newline and carriage return and writes NULL as ``\\N``; decoding undoes
every escape COPY may write, octal and hex included. Pure functions, used
wherever source rows travel as COPY text: the relay's table-topic chunk reads,
the worker's loaders and targets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_TO_ESCAPE = re.compile(r"[\\\t\n\r]")
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPED = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def encode_value(value: str | None) -> str:
    if value is None:
        return "\\N"
    return _TO_ESCAPE.sub(lambda match: _ESCAPES[match.group(0)], value)


def encode_row(values: Sequence[str | None]) -> str:
    """One COPY text line, newline included."""
    return "\t".join(encode_value(value) for value in values) + "\n"


def encode_rows(rows: Iterable[Sequence[str | None]]) -> str:
    return "".join(encode_row(row) for row in rows)


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if escaped[0] == "x" and len(escaped) > 1:
        return chr(int(escaped[1:], 16))
    if escaped[0] in "01234567":
        return chr(int(escaped, 8))
    return _SIMPLE.get(escaped, escaped)


def decode_value(field: str) -> str | None:
    if field == "\\N":
        return None
    if "\\" not in field:
        return field
    return _ESCAPED.sub(_unescape, field)


def decode_line(line: str) -> tuple[str | None, ...]:
    """Split one COPY text line (with or without its newline) into values."""
    if line.endswith("\n"):
        line = line[:-1]
    return tuple(decode_value(field) for field in line.split("\t"))
