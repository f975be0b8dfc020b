"""What a set's triggers capture, as seen by the transaction that reads them.

Every table of a set carries the set's row trigger (``pgshovel_<cluster>_<set>``,
``pgshovel.admin.install``), whose constant arguments are what the capture
function stamps on each event (``sql/capture.sql``): the queue, the set version,
the key columns (a JSON array) and the captured columns (a ``text[]`` literal,
'' for every column). The catalog is read in the caller's transaction snapshot,
so inside a transaction that exported a snapshot the triggers say exactly which
tables, with which key and columns, have their changes in the queue after that
snapshot, whatever ZooKeeper says at that moment: ``set update`` commits the set
in ZooKeeper first and the source's triggers a moment later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from psycopg2.extensions import connection as Connection

from pgshovel.cluster import names
from pgshovel.protocol import configuration_pb2

_TRIGGERS = (
    "SELECT n.nspname, c.relname, t.tgargs FROM pg_catalog.pg_trigger t "
    "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE t.tgname = %s AND NOT t.tgisinternal ORDER BY n.nspname, c.relname"
)


@dataclass(frozen=True)
class CapturedTable:
    """One table as a set's trigger captures it."""

    schema: str
    name: str
    #: the key columns the events carry ([] for an unkeyed table)
    key_columns: tuple[str, ...]
    #: the captured columns; () for every column
    columns: tuple[str, ...]
    #: the set version the trigger stamps
    version: str

    @property
    def identity(self) -> tuple[str, str]:
        return (self.schema, self.name)

    def table_configuration(self) -> configuration_pb2.TableConfiguration:
        """The table as a set configuration would list it to get this capture."""
        return configuration_pb2.TableConfiguration(
            schema=self.schema,
            name=self.name,
            key_columns=list(self.key_columns),
            columns=list(self.columns),
        )


def captured_tables(
    connection: Connection, cluster: str, set_name: str
) -> tuple[dict[tuple[str, str], CapturedTable], list[tuple[str, str]]]:
    """The set's captured tables by (schema, name), read in ``connection``'s transaction,
    and the tables whose trigger arguments are not in this pgshovel's format (their
    capture is unknown here)."""
    with connection.cursor() as cursor:
        cursor.execute(_TRIGGERS, (names.trigger_name(cluster, set_name),))
        rows = cursor.fetchall()
    found: dict[tuple[str, str], CapturedTable] = {}
    unknown: list[tuple[str, str]] = []
    for schema, table, raw in rows:
        # tgargs holds each argument followed by a NUL byte.
        arguments = [part.decode("utf-8") for part in bytes(raw).split(b"\x00")[:-1]]
        captured = _parse(str(schema), str(table), arguments)
        if captured is None:
            unknown.append((str(schema), str(table)))
        else:
            found[captured.identity] = captured
    return found, unknown


def _parse(schema: str, table: str, arguments: list[str]) -> CapturedTable | None:
    if len(arguments) < 4:
        return None
    try:
        key = json.loads(arguments[2])
    except ValueError:
        return None
    if not isinstance(key, list) or not all(isinstance(name, str) for name in key):
        return None
    columns = text_array(arguments[3]) if arguments[3] else ()
    if columns is None:
        return None
    return CapturedTable(schema, table, tuple(key), columns, arguments[1])


def text_array(literal: str) -> tuple[str, ...] | None:
    """The elements of a ``text[]`` literal whose elements are all quoted, as admin writes
    them (``pgshovel.admin.install.text_array_literal``); None for any other text."""
    if len(literal) < 2 or literal[0] != "{" or literal[-1] != "}":
        return None
    body, position, items = literal[1:-1], 0, []
    while position < len(body):
        if body[position] != '"':
            return None
        position += 1
        characters = []
        while position < len(body) and body[position] != '"':
            if body[position] == "\\":
                position += 1
                if position == len(body):
                    return None
            characters.append(body[position])
            position += 1
        if position == len(body):
            return None  # no closing quote
        position += 1
        items.append("".join(characters))
        if position < len(body):
            if body[position] != "," or position + 1 == len(body):
                return None
            position += 1
    return tuple(items)
