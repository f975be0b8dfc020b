"""Table topics (Bottled Water's model): a set's mutations as keyed messages, one topic per table.

Pure translation, no I/O: the table-topics output
(``pgshovel.relay.table_topics._output``) produces what ``TableTopicTranslator``
returns, in order, and reads a topic back for a TRUNCATE.

* Topic: ``[prefix.][schema.]table``, the schema left out for ``public``. A
  name Kafka cannot take (characters other than ``[A-Za-z0-9._-]``, more than
  249 characters) is a ``SchemaError`` naming the table.
* Key: the row's key columns as a JSON object in the key's column order,
  compact (``{"id":7}``); the same row always gives the same bytes, so log
  compaction and the producer's key partitioner keep per-key order.
* Value, ``format: json``: the row as typed JSON (``pgshovel.stream.typed_json``);
  a DELETE is a tombstone (null value). ``format: debezium``: Debezium's
  envelope (``pgshovel.relay.table_topics._debezium``); a DELETE is a ``d`` event followed by a
  tombstone, as Debezium sends them.
* An UPDATE that changes the key: the old key is deleted as above, then the
  new row is sent as an insert (``c``), as Debezium does.
* TRUNCATE: every key the topic holds a row for gets deleted as above (the
  output reads the live keys back from the topic, see ``truncated``); no
  keyless ``t`` event is sent, since a compacted topic refuses keyless messages.
* A table without key columns (``allow_unkeyed``) has no table topic: its
  mutations are left out and the output warns once per table.

Folding a table topic from its start by key (the last value wins, a tombstone
deletes) gives the table; re-sending any suffix of the messages after a relay
failure keeps that true, because every message holds a whole row.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pgshovel.cluster.names import table_topic_suffix
from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.table_topics import _debezium as debezium
from pgshovel.stream.typed_json import dumps, key_object, row_object

__all__ = ["Record", "TableTopicTranslator", "table_topic"]

Format = Literal["json", "debezium"]

_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
_MAX_TOPIC = 249

_INSERT = stream_pb2.Mutation.INSERT
_UPDATE = stream_pb2.Mutation.UPDATE
_DELETE = stream_pb2.Mutation.DELETE
_TRUNCATE = stream_pb2.Mutation.TRUNCATE


@dataclass(frozen=True)
class Record:
    """One Kafka message to produce: topic, key and value (None: a tombstone)."""

    topic: str
    key: bytes | None
    value: bytes | None


def table_topic(prefix: str, schema: str, table: str) -> str:
    """The topic of ``schema.table``: ``[prefix.][schema.]table``."""
    name = ".".join(part for part in (prefix, table_topic_suffix(schema, table)) if part)
    if not _LEGAL.fullmatch(name) or len(name) > _MAX_TOPIC or name in (".", ".."):
        raise SchemaError(
            f"table {schema}.{table} cannot have a table topic: {name!r} is not a legal kafka "
            "topic name (only letters, digits, '.', '_' and '-', at most 249 characters); "
            "rename the table or leave it out of the set"
        )
    return name


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TableTopicTranslator:
    """Turns one set's stream operations into table-topic records (not thread-safe)."""

    def __init__(
        self,
        prefix: str,
        format: Format,
        name: str,
        database: str = "",
        clock: Callable[[], int] = _now_ms,
        transaction_topic: str | None = None,
    ) -> None:
        self.prefix = prefix
        self.format = format
        self.name = name
        self.database = database
        self.clock = clock
        #: Debezium's transaction-metadata topic (BEGIN/END records), if published
        self.transaction_topic = transaction_topic
        self._topics: dict[tuple[str, str], str] = {}
        self._batch = 0
        self._total: dict[int, int] = {}
        self._per_table: dict[tuple[int, str, str], int] = {}
        self._begins: list[Record] = []

    def topic(self, schema: str, table: str) -> str:
        """The topic of a table (cached)."""
        found = self._topics.get((schema, table))
        if found is None:
            found = self._topics[(schema, table)] = table_topic(self.prefix, schema, table)
        return found

    def begin(self, batch_id: int) -> None:
        """A batch starts: transaction ranks count from 1 again."""
        self._batch = batch_id
        self._total.clear()
        self._per_table.clear()
        self._begins.clear()

    def take_begins(self) -> list[Record]:
        """The transaction topic's BEGIN records of transactions met since the last call."""
        begins, self._begins = self._begins, []
        return begins

    def batch_end(self) -> list[Record]:
        """The transaction topic's END records of the batch's transactions (first met first).

        ``event_count`` counts the transaction's Debezium events in this batch (a
        PgQ batch holds whole transactions); ``data_collections`` per table.
        """
        topic = self.transaction_topic
        if topic is None:
            return []
        records = []
        for transaction, count in self._total.items():
            collections = [
                {"data_collection": f"{schema}.{table}", "event_count": events}
                for (txid, schema, table), events in self._per_table.items()
                if txid == transaction
            ]
            value = {
                "status": "END",
                "id": str(transaction),
                "ts_ms": self.clock(),
                "event_count": count,
                "data_collections": collections,
            }
            records.append(self._transaction_record(topic, transaction, value))
        return records

    def _transaction_record(self, topic: str, transaction: int, value: dict[str, Any]) -> Record:
        key = dumps({"id": str(transaction)}).encode("utf-8")
        return Record(topic, key, dumps(value).encode("utf-8"))

    def translate(self, mutation: stream_pb2.Mutation) -> list[Record]:
        """The records of an INSERT, UPDATE or DELETE ([] for an unkeyed table).

        A TRUNCATE needs the topic's live keys: call ``truncated`` for it.
        """
        keys = list(mutation.key_columns)
        if not keys:
            return []
        operation = mutation.operation
        topic = self.topic(mutation.schema, mutation.table)
        if operation == _INSERT:
            key = self._key(mutation.new, keys, mutation)
            return [Record(topic, key, self._value("c", mutation, None, mutation.new))]
        if operation == _DELETE:
            key = self._key(mutation.old, keys, mutation)
            return self._deletion(topic, key, mutation, row_object(mutation.old.columns))
        if operation == _UPDATE:
            old_key = self._key(mutation.old, keys, mutation)
            new_key = self._key(mutation.new, keys, mutation)
            if old_key == new_key:
                value = self._value("u", mutation, mutation.old, mutation.new)
                return [Record(topic, new_key, value)]
            records = self._deletion(topic, old_key, mutation, row_object(mutation.old.columns))
            records.append(Record(topic, new_key, self._value("c", mutation, None, mutation.new)))
            return records
        raise SchemaError(
            f"mutation {mutation.id!r} of table {mutation.schema}.{mutation.table} has operation "
            f"{operation!r}, which has no table-topic form; the stream was not produced by a "
            "compatible relay"
        )

    def truncated(self, mutation: stream_pb2.Mutation, live: Mapping[bytes, bytes]) -> list[Record]:
        """The records of a TRUNCATE: each live key (key -> its last value) deleted."""
        if not mutation.key_columns:
            return []
        topic = self.topic(mutation.schema, mutation.table)
        records: list[Record] = []
        for key, value in live.items():
            records.extend(self._deletion(topic, key, mutation, self._row_of(value)))
        return records

    def snapshot_records(
        self,
        schema: str,
        table: str,
        key_columns: Iterable[str],
        rows: Iterable[stream_pb2.Row],
        snapshot: str,
        last: bool = True,
    ) -> Iterator[Record]:
        """A snapshot's rows as ``op: r`` records; ``last``: these rows end the snapshot, and
        Debezium marks the last one ``last``. ``snapshot`` names the read (``source.sequence``)."""
        topic = self.topic(schema, table)
        keys = list(key_columns)
        previous: stream_pb2.Row | None = None
        for row in rows:
            if previous is not None:
                yield self._read(topic, schema, table, keys, previous, snapshot, "true")
            previous = row
        if previous is not None:
            mark: debezium.SnapshotMark = "last" if last else "true"
            yield self._read(topic, schema, table, keys, previous, snapshot, mark)

    def _read(
        self,
        topic: str,
        schema: str,
        table: str,
        keys: list[str],
        row: stream_pb2.Row,
        snapshot: str,
        mark: debezium.SnapshotMark,
    ) -> Record:
        key = dumps(key_object(row, keys)).encode("utf-8")
        after = row_object(row.columns)
        if self.format == "json":
            return Record(topic, key, dumps(after).encode("utf-8"))
        position = debezium.Position(
            schema=schema,
            table=table,
            transaction=None,
            changed_micros=self.clock() * 1000,
            sequence=("snapshot", snapshot),
            snapshot=mark,
        )
        event = debezium.envelope(
            "r",
            None,
            after,
            position,
            name=self.name,
            database=self.database,
            now_ms=self.clock(),
            transaction=None,
        )
        return Record(topic, key, dumps(event).encode("utf-8"))

    def truncate_event(self, mutation: stream_pb2.Mutation) -> bytes:
        """Debezium's own ``t`` event for a TRUNCATE (no key; for ``set tail``, not topics)."""
        return self._envelope("t", mutation, None, None)

    def is_truncate(self, mutation: stream_pb2.Mutation) -> bool:
        return mutation.operation == _TRUNCATE

    # -- building ---------------------------------------------------------------

    def _row_of(self, value: bytes) -> dict[str, Any] | None:
        """The row a live value holds (for a Debezium ``d`` event's ``before``)."""
        if self.format != "debezium":
            return None
        document = json.loads(value)
        after = document.get("after") if isinstance(document, dict) else None
        return after if isinstance(after, dict) else None

    @staticmethod
    def _key(row: stream_pb2.Row, keys: Iterable[str], mutation: stream_pb2.Mutation) -> bytes:
        try:
            return dumps(key_object(row, keys)).encode("utf-8")
        except KeyError as error:
            raise SchemaError(
                f"mutation {mutation.id!r} of table {mutation.schema}.{mutation.table} lacks key "
                f"column {error.args[0]!r}; the stream was not produced by a compatible relay"
            ) from error

    def _deletion(
        self,
        topic: str,
        key: bytes,
        mutation: stream_pb2.Mutation,
        before: dict[str, Any] | None,
    ) -> list[Record]:
        if self.format == "json":
            return [Record(topic, key, None)]
        event = self._envelope("d", mutation, before, None)
        return [Record(topic, key, event), Record(topic, key, None)]

    def _value(
        self,
        operation: debezium.Operation,
        mutation: stream_pb2.Mutation,
        before: stream_pb2.Row | None,
        after: stream_pb2.Row,
    ) -> bytes:
        row = row_object(after.columns)
        if self.format == "json":
            return dumps(row).encode("utf-8")
        old = None if before is None else row_object(before.columns)
        return self._envelope(operation, mutation, old, row)

    def _envelope(
        self,
        operation: debezium.Operation,
        mutation: stream_pb2.Mutation,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> bytes:
        transaction = mutation.transaction
        total = self._total[transaction] = self._total.get(transaction, 0) + 1
        if total == 1 and self.transaction_topic is not None:
            begin = {
                "status": "BEGIN",
                "id": str(transaction),
                "ts_ms": self.clock(),
                "event_count": None,
                "data_collections": None,
            }
            self._begins.append(
                self._transaction_record(self.transaction_topic, transaction, begin)
            )
        table_key = (transaction, mutation.schema, mutation.table)
        in_table = self._per_table[table_key] = self._per_table.get(table_key, 0) + 1
        position = debezium.Position(
            schema=mutation.schema,
            table=mutation.table,
            transaction=transaction,
            changed_micros=mutation.timestamp,
            sequence=(str(self._batch), str(mutation.id)),
        )
        event = debezium.envelope(
            operation,
            before,
            after,
            position,
            name=self.name,
            database=self.database,
            now_ms=self.clock(),
            transaction=debezium.Transaction(str(transaction), total, in_table),
        )
        return dumps(event).encode("utf-8")
