"""The table-topics output: each mutation, keyed, to its table's topic, through the shared producer.

An ``Output`` (``pgshovel.abc``): the writer hands it every message it frames,
and it produces the table-topic records of each (``TableTopicTranslator``)
through the relay's one ``RecordProducer``, in order, so a batch is
acknowledged only when the set topic and the table topics hold it. A missing
table topic is created compacted (``ensure_topic``; Debezium's transaction
topic with ``cleanup.policy=delete``). A TRUNCATE flushes what is produced so
far and reads the topic's live keys back (``TopicReader``). With
``snapshot`` a new table topic starts with the table's rows
(``ChunkedSnapshots``), whose progress records are produced once the batch
that carried the rows is acknowledged (``acknowledged``).

Topic names are claimed before anything is published into them: at
``attach_source`` for every table of the set, at a table's announcement in the
stream and at a table's first mutation. Two tables whose topics share a name
(``a``.``b`` and ``public``.``"a.b"``), or a table whose topic is the set
topic, Debezium's transaction topic or the snapshot records topic, end the
relay with a ``ConfigurationError`` naming both and the relay.yml setting that
separates them (``exclude``, ``transaction_topic``, ``prefix``): never two
streams in one topic. ``format: debezium`` without ``database`` takes the
source database's name from ``current_database()`` when the source is attached.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pgshovel.abc import RecordProducer, TopicReader
from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.table_topics._settings import TableTopics
from pgshovel.relay.table_topics._snapshots import ChunkedSnapshots
from pgshovel.relay.table_topics._translator import Record, TableTopicTranslator
from pgshovel.relay.table_topics._window import relay_attempt_prefix
from pgshovel.source import connect, translating
from pgshovel.stream.rows import to_mutations

__all__ = ["TableTopicsOutput", "snapshot_topic"]

logger = logging.getLogger(__name__)

Identity = tuple[str, str]


def snapshot_topic(set_topic: str) -> str:
    """The compacted topic recording which table topics started with a snapshot, and which."""
    return f"__pgshovel-snapshots.{set_topic}"


def _label(identity: Identity) -> str:
    return f"{identity[0]!r}.{identity[1]!r}"


def _exclude_entry(identity: Identity) -> str:
    return f"{{schema: {identity[0]}, name: {identity[1]}}}"


class TableTopicsOutput:
    """The ``Output`` publishing one keyed topic per table of the set."""

    def __init__(
        self,
        settings: TableTopics,
        producer: RecordProducer,
        reader: TopicReader,
        default_topic: str,
        set_topic: str | None,
    ) -> None:
        """``default_topic`` is ``<cluster>.<set>``; ``set_topic`` the set topic when it is
        published (no table topic may take its name)."""
        self.settings = settings
        self.producer = producer
        self.reader = reader
        prefix = settings.prefix
        name = default_topic if not prefix else prefix
        self.translator = TableTopicTranslator(
            default_topic if prefix is None else prefix,
            settings.format,
            name=name,
            database=settings.database,
            transaction_topic=f"{name}.transaction" if settings.transaction_topic else None,
        )
        self.excluded = {(entry.schema_, entry.name) for entry in settings.exclude}
        #: topics no table may publish into, and what they are
        self._reserved: dict[str, str] = {}
        if set_topic is not None:
            self._reserved[set_topic] = "the set topic"
        if self.translator.transaction_topic is not None:
            self._reserved[self.translator.transaction_topic] = (
                "debezium's transaction topic (table_topics.transaction_topic: true)"
            )
        self._owners: dict[str, Identity] = {}
        self._claimed: set[Identity] = set()
        self._ready_topics: set[str] = set()
        self._unkeyed: set[Identity] = set()
        self._database_known = settings.format != "debezium" or bool(settings.database)
        self._source: str | None = None
        #: table-topic snapshots (``snapshot: true``)
        self.snapshots: ChunkedSnapshots | None = None
        self._cluster_set = ("", "")
        if settings.snapshot:
            state = snapshot_topic(default_topic)
            self._reserved[state] = "the snapshot records topic"
            # <cluster>.<set>: neither name may hold a '.' (pgshovel.cluster.names).
            cluster, _, set_name = default_topic.partition(".")
            self._cluster_set = (cluster, set_name)
            self.snapshots = ChunkedSnapshots(
                translator=self.translator,
                output=_SnapshotSide(self),
                state_topic=state,
                prefix=relay_attempt_prefix(cluster, set_name),
                chunk_rows=settings.snapshot_chunk_rows,
                excluded=frozenset(self.excluded),
            )

    # -- the source ---------------------------------------------------------------

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """Claim every table's topic; the database's name for Debezium; the snapshots' source."""
        self._owners.clear()
        self._claimed.clear()
        for table in configuration.tables:
            identity = (table.schema or "public", table.name)
            try:
                self.translator.topic(*identity)
            except SchemaError:
                continue  # a name Kafka cannot take: a data error at the table's first change
            self._claim(identity)
        if self.settings.format == "debezium" and not self.settings.database:
            # Read on every attach: ``set failover`` may have moved the set to another database.
            self.translator.database = _current_database(dsn)
            self._database_known = True
        self._source = dsn
        if self.snapshots is not None:
            cluster, set_name = self._cluster_set
            queue = names.queue_name(cluster, set_name)
            self.snapshots.attach(dsn, cluster, queue, configuration)

    def _claim(self, identity: Identity) -> None:
        """Publish ``identity`` into its topic from now on, or refuse: never two streams in one."""
        if identity in self.excluded:
            return
        topic = self.translator.topic(*identity)
        reserved = self._reserved.get(topic)
        if reserved is not None:
            remedy = (
                "set table_topics.transaction_topic: false or "
                if reserved.startswith("debezium")
                else "set another table_topics.prefix or "
            )
            raise ConfigurationError(
                f"table {_label(identity)} and {reserved} both publish into topic {topic!r}; "
                f"{remedy}leave the table out of the table topics (relay.yml table_topics."
                f"exclude: [{_exclude_entry(identity)}]), then restart the relay"
            )
        owner = self._owners.setdefault(topic, identity)
        if owner != identity:
            raise ConfigurationError(
                f"tables {_label(owner)} and {_label(identity)} both publish into table topic "
                f"{topic!r}; leave one of them out of the table topics (relay.yml table_topics."
                f"exclude: [{_exclude_entry(identity)}]) or rename one, then restart the relay"
            )
        self._claimed.add(identity)

    def _release(self, identity: Identity) -> None:
        self._claimed.discard(identity)
        topic = self.translator.topic(*identity)
        if self._owners.get(topic) == identity:
            del self._owners[topic]

    # -- the stream ---------------------------------------------------------------

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> int:
        """Translate the push's mutations in event order. A ROWS batch is framed in every
        partition: partition 0's framing speaks for all, and the row changes of a round (see
        ``pgshovel.relay.framing``) are read from every partition, in event id order, once
        each (a change that moved a row across partitions is in two)."""
        if not self._database_known:
            raise ConfigurationError(
                "table_topics format: debezium needs the source database's name and the writer "
                "was never attached to the source (it runs outside pgshovel-relay): set "
                "table_topics.database"
            )
        size = 0
        rows: dict[int, stream_pb2.Mutation] = {}
        for index, message in enumerate(messages):
            operation = message.operation
            if operation.WhichOneof("operation") == "rows":
                for mutation in to_mutations(operation.rows):
                    rows.setdefault(mutation.id, mutation)
                continue
            if rows:
                size += self._push_rows(rows)
                rows = {}
            if partitions is None or partitions[index] == 0:
                size += self._push_one(message)
        if rows:
            size += self._push_rows(rows)
        return size

    def _push_rows(self, rows: dict[int, stream_pb2.Mutation]) -> int:
        return sum(self._push_mutation(rows[number]) for number in sorted(rows))

    def _push_one(self, message: stream_pb2.Message) -> int:
        operation = message.operation
        kind = operation.WhichOneof("operation")
        translator = self.translator
        snapshots = self.snapshots
        if kind == "mutation":
            return self._push_mutation(operation.mutation)
        if kind == "begin":
            translator.begin(operation.batch.id)
            if snapshots is not None:
                snapshots.begin()
            return 0
        if kind == "commit":
            size = self._produce_records(translator.batch_end())
            if snapshots is not None:
                size += snapshots.commit()
            return size
        if kind == "schema_change":
            self._schema_change(operation.schema_change)
        if snapshots is None:
            return 0
        if kind == "watermark":
            snapshots.watermark(operation.watermark.request)
        elif kind == "schema_change":
            snapshots.schema_change(operation.schema_change)
        elif kind == "rollback":
            snapshots.rollback()
        return 0

    def _schema_change(self, change: stream_pb2.SchemaChange) -> None:
        identity = (change.schema, change.table)
        if change.kind in (stream_pb2.SchemaChange.DROP, stream_pb2.SchemaChange.REMOVE):
            try:
                self._release(identity)
            except SchemaError:
                pass  # a name Kafka cannot take never held a topic
        elif change.kind == stream_pb2.SchemaChange.ANNOUNCE and identity not in self._claimed:
            try:
                self.translator.topic(*identity)
            except SchemaError:
                return  # a data error at the table's first change
            self._claim(identity)

    def _push_mutation(self, mutation: stream_pb2.Mutation) -> int:
        snapshots = self.snapshots
        identity = (mutation.schema, mutation.table)
        if not mutation.key_columns:
            self._warn_unkeyed(identity)
            return 0
        if identity not in self._claimed:
            if identity in self.excluded:
                return 0
            self._claim(identity)
        if snapshots is not None and snapshots.skips(mutation):
            return 0  # an older relay's one-snapshot read holds this change
        translator = self.translator
        if translator.is_truncate(mutation):
            topic = translator.topic(mutation.schema, mutation.table)
            self._ensure_table_topic(topic)
            # The fold must see everything produced before the TRUNCATE.
            self.producer.flush()
            live = self.reader.live_keys(topic)
            records = translator.truncated(mutation, live)
            if snapshots is not None:
                snapshots.truncated(mutation.schema, mutation.table)
        else:
            records = translator.translate(mutation)
            if snapshots is not None:
                snapshots.changed(mutation.schema, mutation.table, records)
        return self._produce_records([*translator.take_begins(), *records])

    def _produce_records(self, records: Sequence[Record]) -> int:
        size = 0
        produce = self.producer.produce
        for record in records:
            self._ensure_table_topic(record.topic)
            size += produce(record.topic, record.value, record.key)
        return size

    def _warn_unkeyed(self, table: Identity) -> None:
        if table not in self._unkeyed:
            self._unkeyed.add(table)
            logger.warning(
                "table %s.%s has no key: it has no table topic and its changes are only in the "
                "set topic; give it a primary key (or a set 'key') to publish it",
                *table,
            )

    def _ensure_table_topic(self, topic: str) -> None:
        if topic in self._ready_topics:
            return
        # Debezium's transaction topic keeps every record (BEGIN and END share a key).
        policy = "delete" if topic == self.translator.transaction_topic else "compact"
        settings = self.settings
        self.producer.ensure_topic(
            topic,
            cleanup_policy=policy,
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            create=settings.create,
        )
        self._ready_topics.add(topic)

    # -- delivery -----------------------------------------------------------------

    def acknowledged(self) -> int:
        """Snapshot chunks whose rows the flush acknowledged: produce their progress."""
        if self.snapshots is None:
            return 0
        return self._produce_records(self.snapshots.acknowledged())

    def abandon(self) -> None:
        self._ready_topics.clear()
        if self.snapshots is not None:
            self.snapshots.abandon()

    def describe(self, topic: str, key: bytes | None, value: bytes | None) -> str | None:
        owner = self._owners.get(topic)
        if owner is None:
            return None
        shown = "(none)" if key is None else key.decode("utf-8", "replace")
        return f"table {owner[0]}.{owner[1]}, key {shown}"

    def close(self) -> None:
        if self.snapshots is not None:
            self.snapshots.close()


def _current_database(dsn: str) -> str:
    """The source database's name, as the relay's own login sees it."""
    connection = connect(dsn, "pgshovel-relay table topics", autocommit=True)
    try:
        with translating("reading the source database's name"), connection.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            row = cursor.fetchone()
    finally:
        connection.close()
    return str(row[0]) if row is not None else ""


class _SnapshotSide:
    """The output as the snapshots see it (``SnapshotOutput``)."""

    def __init__(self, output: TableTopicsOutput) -> None:
        self.output = output

    def produce(self, records: Sequence[Record]) -> int:
        return self.output._produce_records(records)

    def read_state(self, topic: str) -> dict[bytes, bytes]:
        return self.output.reader.live_keys(topic)

    def holds_messages(self, topic: str) -> bool:
        return self.output.reader.holds_messages(topic)
