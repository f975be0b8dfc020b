"""Decoding a captured PgQ event (see sql/capture.sql) into a protocol ``Mutation``.

The trigger stores values as PostgreSQL text keyed by column name; the column
types needed to turn that text into protocol values come from the source
catalog, looked up by the decoder once per table and cached. Trade-off, chosen
for capture speed (the trigger writes no type information): a table whose
columns changed since the cache was filled is looked up again when an event
names a column the cache does not know, but a column whose *type* was altered
between capture and decoding is decoded with its new type, and a column
dropped in between travels as ``Value.other`` with type ``unknown`` and its
text intact. Key column lists are parsed once per distinct trigger argument.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psycopg2.extensions import connection

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_value

logger = logging.getLogger(__name__)

Mutation = stream_pb2.Mutation

OPERATIONS = {
    "I": Mutation.INSERT,
    "U": Mutation.UPDATE,
    "D": Mutation.DELETE,
    "T": Mutation.TRUNCATE,
}

UNKNOWN_TYPE = "unknown"

_COLUMNS = (
    "SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY a.attnum"
)
_TYPE = "SELECT typname, typtype, typbasetype, typelem FROM pg_catalog.pg_type WHERE oid = %s"


@dataclass(frozen=True)
class QueueEvent:
    """One row of a PgQ batch, in the order the relay selects it."""

    id: int
    time: int  # ev_time, microseconds since the Unix epoch
    txid: int
    type: str
    data: str | None
    extra1: str | None  # schema
    extra2: str | None  # table
    extra3: str | None  # set version
    extra4: str | None  # key columns, a JSON array


def _fill(row: stream_pb2.Row, values: Mapping[str, str | None], types: Mapping[str, str]) -> None:
    columns = row.columns
    for name, type_name in types.items():
        if name in values:
            columns.add(name=name, value=to_value(type_name, values[name]))
    if len(columns) < len(values):
        for name, text in values.items():
            if name not in types:
                columns.add(name=name, value=to_value(UNKNOWN_TYPE, text))


def build_mutation(
    event: QueueEvent,
    rows: list[Any],
    types: Mapping[str, str],
    key_columns: list[str],
) -> stream_pb2.Mutation:
    """The Mutation for ``event`` given its parsed ``[old, new]`` and the column types.

    ``types`` maps column names to type names in table order; rows are written
    in that order, with columns it does not know appended as type ``unknown``.
    """
    operation = OPERATIONS.get(event.type)
    if operation is None:
        raise CodecError(
            f"event {event.id} has type {event.type!r}, expected one of {sorted(OPERATIONS)}; "
            "was it written by a pgshovel capture trigger?"
        )
    mutation = Mutation(
        id=event.id,
        schema=event.extra1 or "",
        table=event.extra2 or "",
        operation=operation,
        key_columns=key_columns,
        timestamp=event.time,
        transaction=event.txid,
        set_version=event.extra3 or "",
    )
    old, new = rows
    if old is not None:
        _fill(mutation.old, old, types)
    if new is not None:
        _fill(mutation.new, new, types)
    return mutation


class EventDecoder:
    """Decodes events of one source database; caches table column types and key lists.

    ``conn`` is used for catalog reads only (plain SELECTs inside whatever
    transaction the caller has open).
    """

    def __init__(self, conn: connection) -> None:
        self._connection = conn
        self._tables: dict[tuple[str, str], dict[str, str]] = {}
        self._type_names: dict[int, str] = {}
        self._keys: dict[str, list[str]] = {}

    def decode(self, event: QueueEvent) -> stream_pb2.Mutation:
        try:
            rows = json.loads(event.data) if event.data else [None, None]
        except ValueError as error:
            raise CodecError(
                f"event {event.id} has data that is not JSON ({error}); "
                "was it written by a pgshovel capture trigger?"
            ) from error
        if not isinstance(rows, list) or len(rows) != 2:
            raise CodecError(f"event {event.id}: expected [old, new], got {event.data!r}")
        table = (event.extra1 or "", event.extra2 or "")
        types = self._tables.get(table)
        if types is None or not self._covers(types, rows):
            types = self._tables[table] = self._load(table)
        return build_mutation(event, rows, types, self._key_columns(event))

    @staticmethod
    def _covers(types: dict[str, str], rows: list[Any]) -> bool:
        return all(row is None or types.keys() >= row.keys() for row in rows)

    def _key_columns(self, event: QueueEvent) -> list[str]:
        text = event.extra4 or "[]"
        keys = self._keys.get(text)
        if keys is None:
            try:
                keys = self._keys[text] = [str(name) for name in json.loads(text)]
            except (ValueError, TypeError) as error:
                raise CodecError(
                    f"event {event.id}: key columns {text!r} are not a JSON array of names"
                ) from error
        return keys

    def _load(self, table: tuple[str, str]) -> dict[str, str]:
        with self._connection.cursor() as cursor:
            cursor.execute(_COLUMNS, table)
            columns = cursor.fetchall()
        if not columns:
            logger.warning("table %r.%r is gone: its columns decode as text", *table)
        return {name: self._type_name(type_oid) for name, type_oid in columns}

    def _type_name(self, type_oid: int) -> str:
        """The codec's name for a type: domains resolve to their base type."""
        name = self._type_names.get(type_oid)
        if name is not None:
            return name
        with self._connection.cursor() as cursor:
            cursor.execute(_TYPE, (type_oid,))
            found = cursor.fetchone()
        if found is None:
            return UNKNOWN_TYPE
        name, kind, base, element = found
        if kind == "d":
            name = self._type_name(base)
        elif name.startswith("_") and element:
            # An array of a domain is an array of the domain's base type.
            name = "_" + self._type_name(element)
        self._type_names[type_oid] = name
        return str(name)
