"""The relay's knowledge of each captured table's shape at the event it is decoding.

Every event of a table decodes with the shape announced last before it, never
with the catalog as it is now: schema events (type ``S``, see sql/schema.sql)
travel in the queue at their exact place, and ``SchemaTracker`` switches a
table's decoding plan exactly there. When a table is met for the first time
(the relay started with events queued), the shape comes from the schema
history the event trigger keeps in the source (``SchemaHistory``); only for a
table with no history at all (a set created before schema capture existed,
before ``cluster upgrade``) is the current catalog used, as earlier versions
did.

A schema event that says capture can no longer follow the set (a listed or key
column renamed or dropped, a key no longer unique) stops the relay with a
``SchemaError`` naming table, cause and remedy, unless a later event of the same
table already shows the remedy applied (``set update``): then the problem and
its remedy are published in order and consumers copy the table again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.cluster import names
from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.source import (
    Catalog,
    Column,
    Interpretation,
    TableFacts,
    TableShape,
    interpret,
    missing_value_text,
    translating,
)
from pgshovel.stream._codec_array import parse_array
from pgshovel.stream.codec import Filler, decode_error, filler_for
from pgshovel.stream.shapes import shape_to_proto

logger = logging.getLogger(__name__)

SchemaChange = stream_pb2.SchemaChange

_KINDS = {
    "announce": SchemaChange.ANNOUNCE,
    "alter": SchemaChange.ALTER,
    "drop": SchemaChange.DROP,
    "remove": SchemaChange.REMOVE,
}


class HistoryEntry(NamedTuple):
    """One recorded schema event."""

    event_id: int
    schema: str
    table: str
    data: str


class SchemaHistory:
    """Reads ``pgshovel_<cluster>.schema_history`` for one queue (plain SELECTs)."""

    def __init__(self, conn: connection, cluster: str, queue: str) -> None:
        self._connection = conn
        self._table = sql.Identifier(names.schema_name(cluster), "schema_history")
        self._queue = queue
        self._exists: bool | None = None

    def _select(
        self, where: sql.Composable, args: tuple[Any, ...], order: str
    ) -> list[HistoryEntry]:
        if self._exists is None:
            with self._connection.cursor() as cursor:
                cursor.execute(
                    "SELECT to_regclass(%s) IS NOT NULL", (self._table.as_string(cursor),)
                )
                row = cursor.fetchone()
                self._exists = bool(row and row[0])
        if not self._exists:
            return []
        query = sql.SQL(
            "SELECT event_id, table_schema, table_name, data FROM {} WHERE queue = %s AND {} "
            "ORDER BY event_id " + order
        ).format(self._table, where)
        with translating("reading the schema history"), self._connection.cursor() as cursor:
            cursor.execute(query, (self._queue, *args))
            return [HistoryEntry(*row) for row in cursor.fetchall()]

    def before(self, event_id: int, schema: str, table: str) -> HistoryEntry | None:
        """The last schema event of the table named ``schema.table`` before ``event_id``."""
        found = self._select(
            sql.SQL("table_schema = %s AND table_name = %s AND event_id < %s"),
            (schema, table, event_id),
            "DESC LIMIT 1",
        )
        return found[0] if found else None

    def relation_before(self, event_id: int, relation: int) -> HistoryEntry | None:
        """The last schema event of the table with oid ``relation`` before ``event_id``."""
        found = self._select(
            sql.SQL("relation = %s AND event_id < %s"), (relation, event_id), "DESC LIMIT 1"
        )
        return found[0] if found else None

    def relation_after(self, event_id: int, relation: int) -> list[HistoryEntry]:
        """Every schema event of the table with oid ``relation`` after ``event_id``."""
        return self._select(sql.SQL("relation = %s AND event_id > %s"), (relation, event_id), "")


ColumnPlan = tuple[str, str, Filler]
"""How one column is decoded: its name, its type name and the type's filler."""


def plan_of(columns: tuple[Column, ...]) -> list[ColumnPlan]:
    return [(column.name, column.type_name, filler_for(column.type_name)) for column in columns]


@dataclass(frozen=True)
class TableState:
    """How a table's events decode now, and the shape they match."""

    shape: TableShape | None
    plan: list[ColumnPlan]
    names: frozenset[str]
    #: the plan came from the current catalog (no history): may be reloaded
    from_catalog: bool = False
    relation: int = 0
    #: capture could not follow the set's configuration: events since are incomplete
    broken: bool = False


def _state(interpretation: Interpretation, relation: int) -> TableState:
    columns = interpretation.decode_columns
    return TableState(
        interpretation.shape,
        plan_of(columns),
        frozenset(column.name for column in columns),
        relation=relation,
        broken=bool(interpretation.problem),
    )


class SchemaTracker:
    """The decoding state of every table of one queue, switched at schema events."""

    def __init__(self, catalog: Catalog, history: SchemaHistory, set_name: str) -> None:
        self._catalog = catalog
        self._history = history
        self._set_name = set_name
        self._by_name: dict[tuple[str, str], TableState] = {}
        self._by_relation: dict[int, TableState] = {}

    def table(self, schema: str, name: str, event_id: int) -> TableState:
        """How an event ``event_id`` of ``schema.name`` decodes."""
        state = self._by_name.get((schema, name))
        if state is None:
            state = self._first_sight(schema, name, event_id)
        return state

    def reload(self, schema: str, name: str) -> TableState:
        """Read the catalog again (only for a table without history, see ``from_catalog``)."""
        state = self._from_catalog(schema, name)
        self._by_name[(schema, name)] = state
        return state

    def _first_sight(self, schema: str, name: str, event_id: int) -> TableState:
        entry = self._history.before(event_id, schema, name)
        if entry is None:
            state = self._from_catalog(schema, name)
        else:
            facts = TableFacts.parse(entry.data, entry.event_id)
            previous = self._shape_before(entry.event_id, facts.relation)
            state = _state(self._interpret(facts, schema, name, previous), facts.relation)
        self._remember(schema, name, state)
        return state

    def _from_catalog(self, schema: str, name: str) -> TableState:
        with translating(f"reading the columns of {schema!r}.{name!r}"):
            info = self._catalog.table(schema, name)
        if info is None:
            logger.warning("table %r.%r is gone: its columns decode as text", schema, name)
            return TableState(None, [], frozenset(), from_catalog=True)
        return TableState(None, plan_of(info.columns), frozenset(info.column_names), True, info.oid)

    def _shape_before(self, event_id: int, relation: int) -> TableShape | None:
        entry = self._history.relation_before(event_id, relation)
        if entry is None:
            return None
        facts = TableFacts.parse(entry.data, entry.event_id)
        return self._interpret(facts, entry.schema, entry.table, None).shape

    def _interpret(
        self, facts: TableFacts, schema: str, name: str, previous: TableShape | None
    ) -> Interpretation:
        with translating("reading type names"):
            return interpret(facts, schema, name, previous, self._catalog.type_name, self._set_name)

    def _remember(self, schema: str, name: str, state: TableState) -> None:
        self._by_name[(schema, name)] = state
        if state.relation:
            self._by_relation[state.relation] = state

    def schema_event(self, event: tuple[Any, ...], change: stream_pb2.SchemaChange) -> None:
        """Switch the table's state at schema event ``event``; write the change to publish."""
        event_id, time, txid, _, data, schema, table, version, _ = event
        schema, table = schema or "", table or ""
        facts = TableFacts.parse(data, event_id)
        known = self._by_relation.get(facts.relation)
        previous = (
            known.shape if known is not None else self._shape_before(event_id, facts.relation)
        )
        interpretation = self._interpret(facts, schema, table, previous)
        if interpretation.problem and not self._remedied(event_id, facts.relation):
            raise SchemaError(f"table {schema!r}.{table!r}: {interpretation.problem}")
        change.id = event_id
        change.kind = _KINDS[facts.kind]
        change.schema, change.table = schema, table
        change.command = facts.command
        change.timestamp, change.transaction = time, txid
        change.set_version = version or ""
        change.relation = facts.relation
        # Events since a problem were captured incomplete: the copy reads the table again.
        remedy = known is not None and known.broken and not interpretation.problem
        change.rewrites_rows = interpretation.rewrites_rows or remedy
        change.problem = interpretation.problem
        if interpretation.shape is not None:
            change.shape.CopyFrom(shape_to_proto(interpretation.shape, facts.relation))
        for column, missing in interpretation.added_defaults:
            _add_default(change, column, missing)
        if facts.kind in ("drop", "remove"):
            self._by_name.pop((schema, table), None)
            self._by_relation.pop(facts.relation, None)
        else:
            if known is not None and known.shape is not None:
                self._by_name.pop(known.shape.identity, None)  # renamed: the old name is gone
            self._remember(schema, table, _state(interpretation, facts.relation))

    def _remedied(self, event_id: int, relation: int) -> bool:
        """Whether a later schema event of the table shows capture following the set again."""
        for entry in self._history.relation_after(event_id, relation):
            facts = TableFacts.parse(entry.data, entry.event_id)
            if facts.kind in ("drop", "remove"):
                return True
            if not self._interpret(facts, entry.schema, entry.table, None).problem:
                return True
        return False


def _add_default(change: stream_pb2.SchemaChange, column: Column, missing: str) -> None:
    """The value existing rows got for an added column, decoded with the column's type."""
    text = missing_value_text(missing, lambda literal: parse_array(literal)[2])
    added = change.added_defaults.add(name=column.name)
    if text is None:
        added.value.null = stream_pb2.Value.NULL
        return
    try:
        filler_for(column.type_name)(added.value, text)
    except (ValueError, OverflowError) as error:
        raise decode_error(column.type_name, text, error) from error
