"""Decoding a captured PgQ event (see sql/capture.sql) into a protocol ``Mutation``.

The trigger stores values as PostgreSQL text keyed by column name; the column
types needed to turn that text into protocol values come from the source
catalog, looked up by the decoder once per table and cached together with each
column's encoder (``pgshovel.stream.codec.encoder_for``). The relay's hot path
(``QueueEventDecoder.encode_mutation``) parses the trigger's JSON with orjson and
goes from text straight to the serialized ``Mutation`` by joining pre-encoded
pieces (``pgshovel.stream._codec_mutation``), which the message that carries it
then reads in one call: the same bytes as setting every field through the
protobuf runtime (``build_mutation``, the field-by-field reference the tests
compare against), for a fraction of the Python calls. Trade-off, chosen for
capture speed (the trigger writes no type information): a table whose columns
changed since the cache was filled is looked up again when an event names a
column the cache does not know, but a column whose *type* was altered between
capture and decoding is decoded with its new type, and a column dropped in
between travels as ``Value.other`` with type ``unknown`` and its text intact.
Key column lists are parsed once per distinct trigger argument.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

from psycopg2.extensions import connection

from pgshovel.cluster import names
from pgshovel.errors import CodecError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.event_data import parse_rows, provenance_fields
from pgshovel.relay.rows import RowsEncoder
from pgshovel.relay.schema import ColumnPlan, SchemaHistory, SchemaTracker, TableState
from pgshovel.source import UNKNOWN_TYPE, Catalog
from pgshovel.stream._codec_mutation import (
    EncodedColumn,
    RowError,
    encode_column,
    encode_row,
    keys_piece,
    mutation_encoder,
    provenance_piece,
    provenance_reference_piece,
    set_version_piece,
    table_piece,
)
from pgshovel.stream.codec import decode_error, encoder_for, filler_for
from pgshovel.stream.operations import EVENT_TYPES

#: ``ev_type`` of a schema event (sql/schema.sql) and of a consumer's watermark.
SCHEMA_EVENT = "S"
WATERMARK_EVENT = "W"

logger = logging.getLogger(__name__)

Mutation = stream_pb2.Mutation


NULL = stream_pb2.Value.NULL

_UNKNOWN_FILLER = filler_for(UNKNOWN_TYPE)
_UNKNOWN_ENCODER = encoder_for(UNKNOWN_TYPE)
#: distinct provenance objects whose encoded field a decoder keeps
_PROVENANCE_CACHE = 4096
#: transactions whose last provenance a decoder keeps for PREVIOUS_PROVENANCE (the least
#: recently seen go first: far more than the transactions a batch interleaves at once)
_LAST_PROVENANCE_CACHE = 65536


class QueueEvent(NamedTuple):
    """One row of a PgQ batch, in the order the relay selects it (a plain tuple)."""

    id: int
    time: int  # ev_time, microseconds since the Unix epoch
    txid: int
    type: str
    data: str | None
    extra1: str | None  # schema
    extra2: str | None  # table
    extra3: str | None  # set version
    extra4: str | None  # key columns, a JSON array


Column = ColumnPlan


def plan_columns(types: Mapping[str, str]) -> list[Column]:
    """The decoding plan of a table whose column types are ``types``, in that order."""
    return [(name, type_name, filler_for(type_name)) for name, type_name in types.items()]


def fill_row(row: stream_pb2.Row, values: Mapping[str, str | None], columns: list[Column]) -> None:
    """Write ``values`` (column name to text or None) into the empty ``row``.

    Columns come in ``columns`` order; names ``columns`` does not know follow,
    as type ``unknown`` with their text intact. Each value is decoded straight
    into its column: no intermediate ``Value``, no copy.
    """
    add = row.columns.add
    for name, type_name, fill in columns:
        if name not in values:
            continue
        text = values[name]
        if text is None:
            add(name=name).value.null = NULL
            continue
        try:
            fill(add(name=name).value, text)
        except (ValueError, OverflowError) as error:
            raise decode_error(type_name, text, error) from error
    if len(row.columns) < len(values):
        known = {name for name, _, _ in columns}
        for name, text in values.items():
            if name not in known:
                value = add(name=name).value
                if text is None:
                    value.null = NULL
                else:
                    _UNKNOWN_FILLER(value, text)


def _fill_provenance(target: stream_pb2.Provenance, fields: tuple[Any, ...]) -> None:
    target.SetInParent()
    (
        target.current_user,
        target.session_user,
        target.application_name,
        target.client_addr,
        target.query_id,
        target.annotation,
    ) = fields


def _unknown_kind(event_id: int, kind: str) -> CodecError:
    return CodecError(
        f"event {event_id} has type {kind!r}, expected one of {sorted(EVENT_TYPES)}; "
        "was it written by a pgshovel capture trigger?"
    )


def _encoding_plan(columns: list[Column]) -> list[EncodedColumn]:
    """The encoding plan of a table's decoding plan: same columns, same order."""
    return [
        encode_column(name, type_name, encoder_for(type_name)) for name, type_name, _ in columns
    ]


def _row_error(error: RowError) -> CodecError:
    text = error.text if isinstance(error.text, str) else repr(error.text)
    return decode_error(error.type_name, text, error.error)


def _fill_mutation(
    mutation: stream_pb2.Mutation,
    event: tuple[Any, ...],
    rows: tuple[Any, Any],
    columns: list[Column],
    key_columns: list[str],
    provenance: dict[str, Any] | None = None,
) -> None:
    """Write ``event`` (a ``QueueEvent`` or the same plain tuple) into the empty ``mutation``."""
    event_id, time, txid, kind, _, schema, table, set_version, _ = event
    operation = EVENT_TYPES.get(kind)
    if operation is None:
        raise _unknown_kind(event_id, kind)
    mutation.id = event_id
    mutation.schema = schema or ""
    mutation.table = table or ""
    mutation.operation = operation
    mutation.key_columns.extend(key_columns)
    mutation.timestamp = time
    mutation.transaction = txid
    mutation.set_version = set_version or ""
    old, new = rows
    if old is not None:
        fill_row(mutation.old, old, columns)
    if new is not None:
        fill_row(mutation.new, new, columns)
    if provenance is not None:
        _fill_provenance(mutation.provenance, provenance_fields(event_id, provenance))


def build_mutation(
    event: QueueEvent,
    rows: list[Any],
    types: Mapping[str, str],
    key_columns: list[str],
) -> stream_pb2.Mutation:
    """The Mutation for ``event`` given its parsed ``[old, new]`` or ``[old, new,
    provenance]`` and the column types.

    ``types`` maps column names to type names in table order; rows are written
    in that order, with columns it does not know appended as type ``unknown``.
    """
    mutation = Mutation()
    old, new = rows[:2]
    provenance = rows[2] if len(rows) > 2 else None
    _fill_mutation(mutation, event, (old, new), plan_columns(types), key_columns, provenance)
    return mutation


class QueueEventDecoder:
    """The ``EventDecoder`` of a PgQ queue: its events into the operations the relay publishes.

    Mutations (types I, U, D, T) decode with their table's shape at that point
    of the queue (``pgshovel.relay.schema``); schema events (S) switch that shape
    and become ``SchemaChange`` operations; watermarks (W) pass through as
    ``Watermark`` operations. ``conn`` is used for catalog and history reads only
    (plain SELECTs inside whatever transaction the caller has open).
    """

    def __init__(self, schemas: SchemaTracker) -> None:
        self._schemas = schemas
        self._keys: dict[str, list[str]] = {}
        self._key_pieces: dict[str | None, bytes] = {}
        self._table_pieces: dict[tuple[str, str], bytes] = {}
        self._version_pieces: dict[str | None, bytes] = {}
        # Encoding plans by the identity of the decoding plan they were made from
        # (kept alive here, so the identity cannot be reused).
        self._plans: dict[int, tuple[list[Column], list[EncodedColumn]]] = {}
        self._encode_mutation = mutation_encoder()
        self._provenance_pieces: dict[Any, bytes] = {}
        #: txid -> (its last provenance field, the event that carried it in full)
        self._last_provenance: OrderedDict[int, tuple[bytes, int]] = OrderedDict()

    @classmethod
    def for_queue(cls, conn: connection, cluster: str, queue: str) -> QueueEventDecoder:
        """The decoder of ``queue``'s events, reading the source through ``conn``."""
        set_name = queue[len(names.queue_prefix(cluster)) :]
        return cls(SchemaTracker(Catalog(conn), SchemaHistory(conn, cluster, queue), set_name))

    def row_encoder(self, partitions: int) -> RowsEncoder:
        """The ROWS encoding of this queue's events, sharing this decoder's table shapes."""
        return RowsEncoder(self._schemas, partitions)

    def decode(self, event: QueueEvent) -> stream_pb2.Mutation:
        """The Mutation of ``event`` (a mutation event)."""
        message = stream_pb2.Message()
        self.decode_into(event, message)
        return message.operation.mutation

    def __call__(self, row: tuple[Any, ...]) -> stream_pb2.Mutation:
        return self.decode(QueueEvent(*row))

    def decode_into(self, event: tuple[Any, ...], message: stream_pb2.Message) -> None:
        """Write the operation of ``event`` into the empty ``message``.

        ``event`` is a ``QueueEvent`` or a batch row with the same fields. After
        a ``CodecError`` the message is partly written.
        """
        kind = event[3]
        if kind == SCHEMA_EVENT:
            self._schemas.schema_event(event, message.operation.schema_change)
        elif kind == WATERMARK_EVENT:
            _fill_watermark(message.operation.watermark, event)
        else:
            self._mutation_into(event, message.operation.mutation)

    def encode_mutation(self, event: tuple[Any, ...]) -> bytes | None:
        """The serialized Mutation of ``event``; None for a schema event or a watermark.

        Exactly the bytes of the Mutation ``decode_into`` writes; raises the same
        errors.
        """
        kind = event[3]
        if kind == SCHEMA_EVENT or kind == WATERMARK_EVENT:
            return None
        return self._encode(event)

    def _mutation_into(self, event: tuple[Any, ...], mutation: stream_pb2.Mutation) -> None:
        mutation.MergeFromString(self._encode(event))

    def _encode(self, event: tuple[Any, ...]) -> bytes:
        event_id, time, txid, kind, data, schema, name, version, keys = event
        old, new, provenance = parse_rows(event_id, data)
        schema, name = schema or "", name or ""
        table = self._schemas.table(schema, name, event_id)
        if (old is not None and not table.names.issuperset(old)) or (
            new is not None and not table.names.issuperset(new)
        ):
            table = self._mismatch(table, schema, name, event_id, old or new)
        key_piece = self._key_pieces.get(keys)
        if key_piece is None:
            key_piece = self._key_pieces[keys] = keys_piece(self._key_columns(event_id, keys))
        operation = EVENT_TYPES.get(kind)
        if operation is None:
            raise _unknown_kind(event_id, kind)
        plan = self._plans.get(id(table.plan))
        if plan is None or plan[0] is not table.plan:
            plan = self._plans[id(table.plan)] = (table.plan, _encoding_plan(table.plan))
        columns = plan[1]
        try:
            old_row = None if old is None else encode_row(old, columns, _UNKNOWN_ENCODER)
            new_row = None if new is None else encode_row(new, columns, _UNKNOWN_ENCODER)
        except RowError as error:
            raise _row_error(error) from error.error
        table_bytes = self._table_pieces.get((schema, name))
        if table_bytes is None:
            table_bytes = self._table_pieces[(schema, name)] = table_piece(schema, name)
        version_bytes = self._version_pieces.get(version)
        if version_bytes is None:
            version_bytes = self._version_pieces[version] = set_version_piece(version or "")
        encoded = self._encode_mutation(
            event_id, table_bytes, operation, key_piece, old_row, new_row, time, txid, version_bytes
        )
        if provenance is None:
            return encoded
        return encoded + self._provenance_of(event_id, txid, provenance)

    def _provenance_of(self, event_id: int, txid: int, provenance: Any) -> bytes:
        """The provenance field of an event of transaction ``txid``: its object's, or
        (``PREVIOUS_PROVENANCE``) the one of the transaction's previous event.

        A transaction's provenance travels once: an event whose provenance is the one an
        earlier event of its transaction carried in full gets a reference to that event
        (``Mutation.provenance_of``) instead of a copy. The earlier event is in the same
        batch (a PgQ batch holds whole transactions) and, when the batch is published
        again (a rollback, a retry), an event at or before the one that carried it starts
        the transaction over with the full field, so a reference always points back into
        the same framing of the batch."""
        last = self._last_provenance
        known = last.get(txid)
        if provenance.__class__ is dict:
            piece = self._provenance(event_id, provenance)
        elif known is None:
            raise CodecError(
                f"event {event_id} takes the provenance of the previous event of transaction "
                f"{txid}, which was not decoded before it; the batch must be decoded whole "
                "and in event order (the relay does so: report this as a bug)"
            )
        else:
            piece = known[0]
        if (
            known is not None
            and 0 < known[1] < event_id
            and (known[0] is piece or known[0] == piece)
        ):
            last.move_to_end(txid)
            return provenance_reference_piece(known[1])
        last[txid] = (piece, event_id)
        last.move_to_end(txid)
        if len(last) > _LAST_PROVENANCE_CACHE:
            last.popitem(last=False)
        return piece

    def _provenance(self, event_id: int, provenance: dict[str, Any]) -> bytes:
        """The encoded provenance field; a statement's events share one object's values, so
        the piece is kept by the object's items (checked once, when first seen)."""
        try:
            key: Any = tuple(provenance.items())
            piece = self._provenance_pieces.get(key)
        except TypeError:  # a value that is not a JSON scalar: provenance_fields says so
            key, piece = None, None
        if piece is None:
            piece = provenance_piece(*provenance_fields(event_id, provenance))
            if len(self._provenance_pieces) >= _PROVENANCE_CACHE:
                self._provenance_pieces.clear()
            self._provenance_pieces[key] = piece
        return piece

    def _mismatch(
        self, table: TableState, schema: str, name: str, event_id: int, row: dict[str, Any]
    ) -> TableState:
        """A row with columns its table's shape does not have: never decoded by guesswork."""
        if table.from_catalog:
            # No schema history for this table (a set from before schema capture):
            # read the catalog again, as earlier versions did.
            return self._schemas.reload(schema, name)
        unknown = sorted(set(row) - table.names)
        raise SchemaError(
            f"event {event_id} of table {schema!r}.{name!r} has columns {unknown!r} that the "
            f"table's shape at that point does not have ({sorted(table.names)!r}); the schema "
            "history in the source is damaged: re-create the set"
        )

    def _key_columns(self, event_id: int, text: str | None) -> list[str]:
        keys = self._keys.get(text or "[]")
        if keys is None:
            text = text or "[]"
            try:
                keys = self._keys[text] = [str(name) for name in json.loads(text)]
            except (ValueError, TypeError) as error:
                raise CodecError(
                    f"event {event_id}: key columns {text!r} are not a JSON array of names"
                ) from error
        return keys


def _fill_watermark(watermark: stream_pb2.Watermark, event: tuple[Any, ...]) -> None:
    watermark.id = event[0]
    watermark.timestamp = event[1]
    watermark.transaction = event[2]
    watermark.request = event[4] or ""
