"""What a captured PgQ event's data holds: its rows and its provenance (see sql/capture.sql).

The capture trigger writes ``ev_data`` as a JSON array ``[old, new]`` or ``[old,
new, provenance]``: each row null or an object mapping column names to their
PostgreSQL text (or null), the provenance the trigger's object or, on a
statement trigger's later events, ``PREVIOUS_PROVENANCE``. Both encodings of the
stream read events through these functions. Pure.
"""

from __future__ import annotations

from typing import Any

import orjson

from pgshovel.errors import CodecError

__all__ = ["PREVIOUS_PROVENANCE", "parse_rows", "parse_run", "provenance_fields"]

_NO_ROWS = (None, None, None)
#: A statement trigger's events after its first carry this instead of the provenance
#: object: "the provenance of this transaction's previous event" (sql/capture.sql).
PREVIOUS_PROVENANCE = 1


def parse_rows(event_id: int, data: str | list[Any] | None) -> tuple[Any, Any, Any]:
    """``(old, new, provenance)`` of an event's data (its JSON text, or the list that text
    parses to: a change packed as COPY lines, ``pgshovel.relay.packed_run``): each row
    None or a column-to-text mapping, provenance None, the trigger's object (see
    ``provenance_fields``) or ``PREVIOUS_PROVENANCE``."""
    if not data:
        return _NO_ROWS
    try:
        rows = data if isinstance(data, list) else orjson.loads(data)
    except ValueError as error:
        raise CodecError(
            f"event {event_id} has data that is not JSON ({error}); "
            "was it written by a pgshovel capture trigger?"
        ) from error
    if type(rows) is not list or not 2 <= len(rows) <= 3:
        raise CodecError(f"event {event_id}: expected [old, new], got {data!r}")
    if len(rows) == 2:
        old, new = rows
        provenance = None
    else:
        old, new, provenance = rows
        if type(provenance) is not dict and not (
            type(provenance) is int and provenance == PREVIOUS_PROVENANCE
        ):
            raise CodecError(
                f"event {event_id}: expected [old, new, provenance] with provenance an object "
                f"or {PREVIOUS_PROVENANCE}, got {data!r}"
            )
    if not (old is None or type(old) is dict) or not (new is None or type(new) is dict):
        raise CodecError(f"event {event_id}: expected [old, new] as objects or nulls, got {data!r}")
    return old, new, provenance


# What ``parse_run`` takes: every event's data one shape.
_LIST: set[type] = {list}
_DICT: set[type] = {dict}
_NONE: set[type] = {type(None)}
_ROW_LENGTHS = {2, 3}
_WITH_PROVENANCE = {3}
_PROVENANCE_TYPES: set[type] = {dict, int}


def parse_run(
    data: list[Any],
) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None, tuple[Any, ...] | None] | None:
    """``(olds, news, provenances)`` of a run of events' data, each a tuple with the event's
    ``parse_rows`` part in order, or None where every event has none; None overall unless
    every event's data is what ``parse_rows`` accepts, and each part the same kind for all
    (every old row an object, or every one null; the same for the new rows; a provenance
    in every event or in none): then ``parse_rows`` of each says what (or what is wrong)."""
    if not all(data):
        return None
    try:
        parsed = list(data) if data[0].__class__ is list else list(map(orjson.loads, data))
    except (ValueError, TypeError):
        return None
    if set(map(type, parsed)) != _LIST:
        return None
    lengths = set(map(len, parsed))
    if not lengths <= _ROW_LENGTHS or len(lengths) != 1:
        return None
    columns = list(zip(*parsed, strict=True))
    parts: list[tuple[Any, ...] | None] = []
    for part in columns[:2]:
        kinds = set(map(type, part))
        if kinds != _DICT and kinds != _NONE:
            return None
        parts.append(part if kinds == _DICT else None)
    provenances = None
    if lengths == _WITH_PROVENANCE:
        provenances = columns[2]
        kinds = set(map(type, provenances))
        if not kinds <= _PROVENANCE_TYPES:
            return None
        if int in kinds and any(type(p) is int and p != PREVIOUS_PROVENANCE for p in provenances):
            return None
    return parts[0], parts[1], provenances


#: The provenance object's keys (sql/capture.sql), in Provenance field order, and the JSON
#: types each may hold besides null.
_PROVENANCE_KEYS = (("u", str), ("s", str), ("a", str), ("c", str), ("q", int), ("n", str))
_INT64 = 1 << 63


def provenance_fields(event_id: int, provenance: dict[str, Any]) -> tuple[Any, ...]:
    """The Provenance fields of the trigger's provenance object, a key left out as "" or 0
    (``"u"`` left out: the same as ``"s"``): ``(current_user, session_user,
    application_name, client_addr, query_id, annotation)``."""
    fields: list[Any] = []
    for key, kind in _PROVENANCE_KEYS:
        value: Any = provenance.get(key)
        if value is None:
            fields.append(kind())
        elif type(value) is not kind or (isinstance(value, int) and not -_INT64 <= value < _INT64):
            raise CodecError(
                f"event {event_id}: provenance {key!r} is {value!r}, expected "
                f"{'an int64' if kind is int else 'a string'} or null; "
                "was it written by a pgshovel capture trigger?"
            )
        else:
            fields.append(value)
    if "u" not in provenance:
        fields[0] = fields[1]
    return tuple(fields)
