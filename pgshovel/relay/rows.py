"""A captured PgQ event straight to a row change of the ROWS encoding (``pgshovel.stream.rows``).

The trigger stores each row as PostgreSQL text keyed by column name; a row
change carries the same text as one COPY line in the order of the table's
shape at that point of the queue (``pgshovel.relay.schema``), so the relay
neither types nor validates values here: it parses the event's JSON, orders
and escapes the values, and routes the change to the set topic's partitions
by its table and key (``partition_of``): an UPDATE that moves a row to a key
of another partition goes to both. Shapes travel with the messages as
``RowTable``s, kept here per table shape, key columns and set version. A
statement trigger's later events name "the provenance of the transaction's
previous event", resolved here exactly as the MUTATIONS encoding does.
"""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from pgshovel.errors import CodecError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.event_data import (
    PREVIOUS_PROVENANCE,
    parse_rows,
    parse_run,
    provenance_fields,
)
from pgshovel.relay.packed_run import PackedRun
from pgshovel.relay.schema import SchemaTracker, TableState
from pgshovel.stream.operations import EVENT_TYPES
from pgshovel.stream.rows import copy_field, line_partitions, partition_of
from pgshovel.stream.rows_builder import EncodedChange, EncodedRun

__all__ = ["RowsEncoder"]

_PROVENANCE_NAMES = (
    "current_user",
    "session_user",
    "application_name",
    "client_addr",
    "query_id",
    "annotation",
)
#: transactions whose last provenance the encoder keeps (see relay/events.py)
_LAST_PROVENANCE_CACHE = 65536
_TRUNCATE = stream_pb2.Mutation.TRUNCATE
_UPDATE = stream_pb2.Mutation.UPDATE
_DELETE = stream_pb2.Mutation.DELETE


class Values:
    """Reads a table's values out of a row object in the shape's order, at C speed."""

    __slots__ = ("columns", "get", "tabs")

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        #: the tabs a COPY line of these columns holds
        self.tabs = len(columns) - 1
        if len(columns) == 1:
            (column,) = columns
            self.get: Callable[[dict[str, Any]], tuple[Any, ...]] = lambda row: (row[column],)
        else:
            self.get = operator.itemgetter(*columns)


class RowsEncoder:
    """Encodes one queue's mutation events for a set topic of ``partitions`` partitions."""

    def __init__(self, schemas: SchemaTracker, partitions: int = 1) -> None:
        self._schemas = schemas
        self._partitions = partitions
        self._all = tuple(range(partitions))
        self._keys: dict[str, tuple[str, ...]] = {}
        self._tables: dict[tuple[Any, ...], tuple[TableState, bytes, Values]] = {}
        self._provenances: dict[Any, bytes] = {}
        self._last_provenance: OrderedDict[int, bytes] = OrderedDict()
        self._key_positions: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[int, ...]] = {}

    def encode(self, event: tuple[Any, ...]) -> EncodedChange:
        """The row change of a mutation event (a ``QueueEvent`` or the same plain tuple)."""
        event_id, time, txid, kind, data, schema, name, version, keys_text = event
        operation = EVENT_TYPES.get(kind)
        if operation is None:
            raise CodecError(
                f"event {event_id} has type {kind!r}, expected one of {sorted(EVENT_TYPES)}; "
                "was it written by a pgshovel capture trigger?"
            )
        old, new, provenance = parse_rows(event_id, data)
        schema, name = schema or "", name or ""
        state = self._schemas.table(schema, name, event_id)
        for row in (old, new):
            if row is not None and not state.names.issuperset(row):
                state = self._mismatch(state, schema, name, event_id, row)
        keys = self._key_columns(event_id, keys_text)
        table, values = self._row_table(state, schema, name, keys, version or "")
        old_line = None if old is None else self._line(old, values, event_id, schema, name)
        new_line = None if new is None else self._line(new, values, event_id, schema, name)
        return EncodedChange(
            table,
            event_id,
            operation,
            txid,
            time,
            old_line,
            new_line,
            None if provenance is None else self._provenance_of(event_id, txid, provenance),
            self._route(operation, schema, name, keys, old, new),
        )

    def encode_run(self, events: Sequence[tuple[Any, ...]]) -> EncodedRun | None:
        """The row changes of a run of mutation events with the same type, time, transaction,
        table, set version and key columns (a packed row's run), for a set topic of one
        partition: every event checked as ``encode`` checks it, the work done once per run
        where it does not depend on the row. None when ``encode`` must take the events one
        by one (another partition count, an event that is not the usual shape, an error:
        ``encode`` then names the event)."""
        if self._partitions != 1:
            return None
        event_id, time, txid, kind, _, schema, name, version, keys_text = events[0]
        operation = EVENT_TYPES.get(kind)
        if operation is None or operation == _TRUNCATE:
            return None
        parsed = parse_run([event[4] for event in events])
        if parsed is None:
            return None
        olds, news, found = parsed
        schema, name = schema or "", name or ""
        state = self._schemas.table(schema, name, event_id)
        names = state.names
        for rows in (olds, news):
            if rows is not None and not all(map(names.issuperset, rows)):
                return None
        keys = self._key_columns(event_id, keys_text)
        table, values = self._row_table(state, schema, name, keys, version or "")
        ids = [event[0] for event in events]
        provenances = None
        try:
            old_lines = None if olds is None else self._lines(olds, values, ids, schema, name)
            new_lines = None if news is None else self._lines(news, values, ids, schema, name)
            if found is not None:
                provenances = [
                    self._provenance_of(number, txid, provenance)
                    for number, provenance in zip(ids, found, strict=True)
                ]
        except (CodecError, SchemaError):
            return None  # ``encode`` one by one names the first event at fault, as always
        return EncodedRun(table, operation, txid, time, ids, old_lines, new_lines, provenances)

    def encode_packed(self, run: PackedRun) -> EncodedRun | None:
        """The row changes of a run of COPY lines (partition 0): its lines as they are, when
        they hold exactly the columns of the table's shape at that point, in its order,
        each line as many fields; None when the run must go through its events (another
        shape, a reloaded table, a line of another width: ``encode`` then decides or names
        the fault)."""
        if self._partitions != 1:
            return None
        return self._packed(run)

    def encode_packed_routes(
        self, run: PackedRun
    ) -> tuple[EncodedRun, list[tuple[int, ...]]] | None:
        """``encode_packed`` for a set topic of several partitions, with the partitions each
        change goes to (its rows' keys read from the lines, still escaped, as
        ``partition_of`` takes them: an UPDATE that moves its row to another partition's
        key goes to both, old first); None as there."""
        encoded = self._packed(run)
        if encoded is None:
            return None
        schema, name, partitions = run.schema, run.name, self._partitions
        positions = self._positions(run)
        if positions is None:
            return encoded, [(partition_of(schema, name, None, partitions),)] * run.size
        olds = news = None
        if encoded.olds is not None:
            olds = line_partitions(schema, name, encoded.olds, positions, partitions)
        if encoded.news is not None:
            news = line_partitions(schema, name, encoded.news, positions, partitions)
        if olds is None or news is None:
            return encoded, list(zip(olds or news or [], strict=False))
        return encoded, [
            (old,) if old == new else (old, new) for old, new in zip(olds, news, strict=True)
        ]

    def _positions(self, run: PackedRun) -> tuple[int, ...] | None:
        """Where the key columns are in the run's lines; None for an unkeyed table."""
        keys = self._key_columns(run.id, run.keys)
        positions = self._key_positions.get((run.columns, keys))
        if positions is None:
            positions = tuple(run.columns.index(key) for key in keys)
            self._key_positions[(run.columns, keys)] = positions
        return positions or None

    def _packed(self, run: PackedRun) -> EncodedRun | None:
        operation = EVENT_TYPES.get(run.type)
        if operation is None or operation == _TRUNCATE:
            return None
        schema, name = run.schema, run.name
        state = self._schemas.table(schema, name, run.id)
        keys = self._key_columns(run.id, run.keys)
        if not set(keys) <= set(run.columns):
            return None  # the events name the fault
        table, values = self._row_table(state, schema, name, keys, run.version)
        if run.columns != values.columns:
            return None
        lines = run.lines
        if set(map(bytes.count, lines, repeat(b"\t"))) - {values.tabs}:
            return None
        olds = news = None
        if operation == _UPDATE:
            olds, news = lines[0::2], lines[1::2]
        elif operation == _DELETE:
            olds = lines
        else:
            news = lines
        ids = list(range(run.id, run.id + run.size))
        return EncodedRun(table, operation, run.txid, run.time, ids, olds, news, None)

    def _lines(
        self,
        rows: Sequence[dict[str, Any]],
        values: Values,
        ids: list[int],
        schema: str,
        name: str,
    ) -> list[bytes]:
        """``_line`` of every row of a run: joined and checked as one text when no value is
        NULL or holds a character COPY escapes (the usual run), else row by row."""
        try:
            joined = list(map("\t".join, map(values.get, rows)))
        except (KeyError, TypeError):
            joined = None
        if joined is not None:
            text = "\n".join(joined)
            if (
                "\\" not in text
                and "\r" not in text
                and text.count("\n") == len(joined) - 1
                and text.count("\t") == values.tabs * len(joined)
            ):
                return text.encode().split(b"\n")
        return [
            self._line(row, values, event_id, schema, name)
            for row, event_id in zip(rows, ids, strict=True)
        ]

    def _route(
        self,
        operation: int,
        schema: str,
        name: str,
        keys: tuple[str, ...],
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> tuple[int, ...]:
        if self._partitions == 1:
            return (0,)
        if operation == _TRUNCATE:
            return self._all
        if not keys:
            return (partition_of(schema, name, None, self._partitions),)
        found = []
        for row in (old, new):
            if row is not None:
                key = tuple([copy_field(row.get(column)) for column in keys])
                partition = partition_of(schema, name, key, self._partitions)
                if partition not in found:
                    found.append(partition)
        return tuple(found)

    @staticmethod
    def _line(row: dict[str, Any], values: Values, event_id: int, schema: str, name: str) -> bytes:
        """The row's values in shape order as one COPY line: joined at once when no value
        is NULL or holds a character COPY escapes (the usual row), else value by value."""
        try:
            texts = values.get(row)
        except KeyError as error:
            raise SchemaError(
                f"event {event_id} of table {schema!r}.{name!r} lacks column {error.args[0]!r} "
                f"of the table's shape at that point ({list(values.columns)!r}); a value is "
                "never invented: the schema history in the source is damaged, re-create the set"
            ) from None
        try:
            line = "\t".join(texts)
            if (
                "\\" not in line
                and "\n" not in line
                and "\r" not in line
                and line.count("\t") == values.tabs
            ):
                return line.encode()
        except TypeError:  # a NULL (or a value that is not text: copy_field says so)
            pass
        try:
            return "\t".join([copy_field(text) for text in texts]).encode()
        except AttributeError:
            raise CodecError(
                f"event {event_id} of table {schema!r}.{name!r} has a value that is not text "
                "or null; was it written by a pgshovel capture trigger?"
            ) from None

    def _row_table(
        self, state: TableState, schema: str, name: str, keys: tuple[str, ...], version: str
    ) -> tuple[bytes, Values]:
        cache_key = (id(state), schema, name, keys, version)
        cached = self._tables.get(cache_key)
        if cached is not None and cached[0] is state:
            return cached[1], cached[2]
        shape = stream_pb2.TableShape(schema=schema, name=name, key=keys, relation=state.relation)
        types = (
            {} if state.shape is None else {column.name: column for column in state.shape.columns}
        )
        for column, type_name, _fill in state.plan:
            known = types.get(column)
            shape.columns.add(
                name=column,
                type_name=type_name,
                sql_type=known.sql_type if known is not None else type_name,
                number=known.number if known is not None else 0,
                not_null=known.not_null if known is not None else False,
            )
        encoded = stream_pb2.RowTable(shape=shape, set_version=version).SerializeToString()
        values = Values(tuple(column for column, _type, _fill in state.plan))
        self._tables[cache_key] = (state, encoded, values)
        return encoded, values

    def _key_columns(self, event_id: int, text: str | None) -> tuple[str, ...]:
        keys = self._keys.get(text or "[]")
        if keys is None:
            try:
                keys = self._keys[text or "[]"] = tuple(
                    str(name) for name in json.loads(text or "[]")
                )
            except (ValueError, TypeError) as error:
                raise CodecError(
                    f"event {event_id}: key columns {text!r} are not a JSON array of names"
                ) from error
        return keys

    def _provenance_of(self, event_id: int, txid: int, provenance: Any) -> bytes:
        last = self._last_provenance
        if provenance.__class__ is dict:
            piece = self._provenance(event_id, provenance)
            last[txid] = piece
            last.move_to_end(txid)
            if len(last) > _LAST_PROVENANCE_CACHE:
                last.popitem(last=False)
            return piece
        if provenance != PREVIOUS_PROVENANCE or txid not in last:
            raise CodecError(
                f"event {event_id} takes the provenance of the previous event of transaction "
                f"{txid}, which was not encoded before it; the batch must be encoded whole "
                "and in event order (the relay does so: report this as a bug)"
            )
        last.move_to_end(txid)
        return last[txid]

    def _provenance(self, event_id: int, provenance: dict[str, Any]) -> bytes:
        try:
            key: Any = tuple(provenance.items())
            piece = self._provenances.get(key)
        except TypeError:
            key, piece = None, None
        if piece is None:
            fields = provenance_fields(event_id, provenance)
            piece = stream_pb2.Provenance(
                **dict(zip(_PROVENANCE_NAMES, fields, strict=True))
            ).SerializeToString()
            if len(self._provenances) >= 4096:
                self._provenances.clear()
            self._provenances[key] = piece
        return piece

    def _mismatch(
        self, state: TableState, schema: str, name: str, event_id: int, row: dict[str, Any]
    ) -> TableState:
        if state.from_catalog:
            return self._schemas.reload(schema, name)
        unknown = sorted(set(row) - state.names)
        raise SchemaError(
            f"event {event_id} of table {schema!r}.{name!r} has columns {unknown!r} that the "
            f"table's shape at that point does not have ({sorted(state.names)!r}); the schema "
            "history in the source is damaged: re-create the set"
        )
