"""The Kafka writer: publishes a batch's messages in order and returns once all are acked.

Ordering and durability settings (the user's ``properties`` win where they
overlap; an empty one is left out, see ``pgshovel._kafka_properties``):
``acks=all``; ``enable.idempotence=true`` when the broker speaks the modern
protocol, otherwise (a client configured with ``api.version.request=false``,
i.e. a broker older than 0.10) one request in flight per connection so a retry
can never reorder messages. Messages are produced asynchronously by ``push``
and waited for once per batch by ``flush``: never a synchronous round trip per
message.

After a failed ``push`` or ``flush`` the writer purges what it still holds and the relay
starts a new publisher identity, so readers see the old publisher's open batch
abandoned and the batch re-sent from sequence 0 of the new one.

The set topic must have exactly one partition (the stream is totally ordered):
every time the writer connects (at start, after a failure) it reads the topic's
metadata and refuses a topic with more than one, a ``ConfigurationError`` that
ends the relay. ``set_topic: false`` leaves the set topic out.

With ``table_topics`` configured, every mutation is also published, keyed, to its
table's topic (``pgshovel.relay.table_topics``), in the same order and by the same
producer: a batch is acknowledged only when both the set topic and the table
topics hold it. Missing table topics are created compacted through the admin API
when the broker has it (Kafka 0.10.1 or later); an older broker auto-creates them
with its defaults (not compacted) and the writer says so once per topic.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pgshovel._kafka_properties import client_properties
from pgshovel.errors import BrokerUnavailable, ConfigurationError, ProgrammingError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.config import TableTopics
from pgshovel.relay.live_keys import live_keys
from pgshovel.relay.table_snapshot import read_table
from pgshovel.relay.table_topics import Record, TableTopicTranslator
from pgshovel.settings import NonEmptyText, PositiveSeconds
from pgshovel.stream.handoff import Snapshot, is_visible, parse_txid_snapshot
from pgshovel.stream.last_batch import last_committed_begin
from pgshovel.stream.reader import KafkaReader, partition_mismatch
from pgshovel.stream.typed_json import dumps

logger = logging.getLogger(__name__)

_LEGACY_FLAGS = {"false", "0", "no", "off"}


def producer_settings(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """The librdkafka configuration for an ordered, durable producer."""
    settings: dict[str, str] = {
        "bootstrap.servers": bootstrap_servers,
        "acks": "all",
        "linger.ms": "5",
        "batch.num.messages": "10000",
        "queue.buffering.max.messages": "1000000",
        "queue.buffering.max.kbytes": "1048576",
        # No per-message timeout: a timed-out message followed by a delivered one
        # would leave a sequence gap. ``push`` bounds the wait instead and purges
        # the tail, so what reached Kafka is always a prefix of what was produced.
        "message.timeout.ms": "0",
        "socket.keepalive.enable": "true",
    }
    user = client_properties(properties)
    legacy = user.get("api.version.request", "true").lower() in _LEGACY_FLAGS
    if legacy:
        settings["max.in.flight.requests.per.connection"] = "1"
        settings["enable.idempotence"] = "false"
    else:
        settings["enable.idempotence"] = "true"
    settings.update(user)
    if settings.get("acks") not in ("all", "-1"):
        logger.warning("acks=%s: the relay can lose acknowledged batches", settings["acks"])
    return settings


#: How long the writer waits for the cluster's topic list.
METADATA_SECONDS = 30.0
#: How long the writer waits for the admin API to create a table topic.
CREATE_SECONDS = 10.0
_NOT_READY = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}


def topic_partitions(producer: Producer, topic: str, timeout: float) -> int:
    """How many partitions ``topic`` has (asking creates it where the broker auto-creates)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = producer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException as error:
            # A broker creating the topic just now may answer badly once: ask again.
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise BrokerUnavailable(
                f"cannot read the metadata of topic {topic!r}: {error}; is the broker reachable?"
            ) from error
        found = metadata.topics.get(topic)
        if found is not None and found.partitions and found.error is None:
            return len(found.partitions)
        code = None if found is None or found.error is None else found.error.code()
        if code is not None and code not in _NOT_READY:
            raise BrokerUnavailable(f"topic {topic!r} is not available: {found.error}")
        if time.monotonic() > deadline:
            raise BrokerUnavailable(
                f"topic {topic!r} has no partitions after {timeout}s; create it (one "
                "partition) or let the broker auto-create topics"
            )
        time.sleep(0.2)


def snapshot_topic(set_topic: str) -> str:
    """The compacted topic recording which table topics started with a snapshot, and which."""
    return f"__pgshovel-snapshots.{set_topic}"


class KafkaWriter:
    """A ``StreamWriter`` for one Kafka topic (single partition, total order), and optionally
    one keyed topic per table."""

    def __init__(
        self,
        bootstrap_servers: NonEmptyText,
        topic: NonEmptyText | None = None,
        properties: Mapping[str, Any] | None = None,
        flush_timeout: PositiveSeconds = 60.0,
        set_topic: bool = True,
        table_topics: TableTopics | None = None,
    ) -> None:
        if not set_topic and table_topics is None:
            raise ConfigurationError(
                "the kafka writer publishes nothing: set_topic is false and no table_topics "
                "are configured; enable one of them"
            )
        self.topic = topic
        self.flush_timeout = flush_timeout
        self.set_topic = set_topic
        self.table_topics = table_topics
        self._bootstrap_servers = bootstrap_servers
        self._properties = dict(properties or {})
        self._settings = producer_settings(bootstrap_servers, self._properties)
        self._reader_settings = (bootstrap_servers, self._properties)
        self._producer: Producer | None = None
        self._failure: KafkaError | None = None
        self._bytes = 0
        self._pending = 0
        self._translator: TableTopicTranslator | None = None
        self._ready_topics: set[str] = set()
        self._unkeyed: set[tuple[str, str]] = set()
        # Table-topic snapshots: where to read the source, the set's tables, the topic
        # recording finished snapshots and what it holds (topic -> snapshot).
        self._source_dsn: str | None = None
        self._tables: dict[tuple[str, str], configuration_pb2.TableConfiguration] = {}
        self._state_topic: str | None = None
        self._snapshots: dict[str, Snapshot] | None = None
        self._started = False

    def bind(self, default_topic: str) -> None:
        """Called by the relay with ``<cluster>.<set>``; a configured topic wins."""
        if self.topic is None:
            self.topic = default_topic
        if self.table_topics is not None and self._translator is None:
            prefix = self.table_topics.prefix
            name = default_topic if prefix is None or not prefix else prefix
            self._translator = TableTopicTranslator(
                default_topic if prefix is None else prefix,
                self.table_topics.format,
                name=name,
                database=self.table_topics.database,
                transaction_topic=f"{name}.transaction"
                if self.table_topics.transaction_topic
                else None,
            )
            if self.table_topics.snapshot:
                self._state_topic = snapshot_topic(default_topic)

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """Where table-topic snapshots read the source, and the set's tables."""
        self._source_dsn = dsn
        for table in configuration.tables:
            schema = table.schema or "public"
            self._tables[(schema, table.name)] = configuration_pb2.TableConfiguration(
                schema=schema,
                name=table.name,
                key_columns=list(table.key_columns),
                columns=list(table.columns),
            )

    @property
    def bytes_sent(self) -> int:
        return self._bytes

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None and self._failure is None:
            self._failure = error

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            producer = Producer(self._settings, logger=logger)
            if self.set_topic and self.topic is not None:
                count = topic_partitions(producer, self.topic, self.flush_timeout)
                if count != 1:
                    producer.flush(0)
                    raise ConfigurationError(partition_mismatch(self.topic, count))
            self._producer = producer
        return self._producer

    def push(self, messages: Sequence[stream_pb2.Message]) -> None:
        """Produce every message asynchronously, in order (see ``flush``).

        The table topics' records come first, then the set topic's messages: only
        the order within each topic matters, and a data error found on the way
        (a table Kafka cannot name, a snapshot that cannot be read) then leaves
        nothing of this push on the set topic, as the relay assumes of any failure
        that is not ``BrokerUnavailable``.
        """
        if self.topic is None:
            raise ProgrammingError("kafka writer has no topic: bind() was not called")
        producer = self._ensure_producer()
        produce = producer.produce
        callback = self._delivered
        topic = self.topic
        translator = self._translator
        size = 0
        try:
            if translator is not None:
                for message in messages:
                    size += self._push_table_records(producer, translator, message)
                    if self._failure is not None:
                        break
            if self.set_topic and self._failure is None:
                for message in messages:
                    payload = message.SerializeToString()
                    size += len(payload)
                    while True:
                        try:
                            produce(topic, payload, on_delivery=callback)
                            break
                        except BufferError:
                            # The local queue is full: let deliveries drain, then retry.
                            producer.poll(0.1)
                    if self._failure is not None:
                        break
            producer.poll(0)
        except KafkaException as error:
            self.reset()
            raise BrokerUnavailable(f"kafka produce to {topic!r} failed: {error}") from error
        except BrokerUnavailable:
            self.reset()
            raise
        self._pending += size
        self._raise_failure()

    # -- table topics -------------------------------------------------------------

    def _push_table_records(
        self, producer: Producer, translator: TableTopicTranslator, message: stream_pb2.Message
    ) -> int:
        operation = message.operation
        kind = operation.WhichOneof("operation")
        if kind == "begin":
            translator.begin(operation.batch.id)
            if self._state_topic is not None and not self._started:
                # A new table topic starts with the table's rows, before any change.
                for schema, table in list(self._tables):
                    self._snapshot_if_new(producer, translator, schema, table)
                self._started = True
            return 0
        if kind == "schema_change" and self._state_topic is not None:
            change = operation.schema_change
            if change.kind in (stream_pb2.SchemaChange.ANNOUNCE, stream_pb2.SchemaChange.ALTER):
                # A table added to the set, or renamed: its topic starts with its rows.
                self._learn_table(change.shape)
                self._snapshot_if_new(producer, translator, change.schema, change.table)
            return 0
        if kind == "commit":
            return self._produce_records(producer, translator.batch_end())
        if kind != "mutation":
            return 0
        mutation = operation.mutation
        if not mutation.key_columns:
            self._warn_unkeyed(mutation)
            return 0
        if self._state_topic is not None:
            snapshot = self._snapshot_if_new(producer, translator, mutation.schema, mutation.table)
            if snapshot is not None and is_visible(mutation.transaction, snapshot):
                return 0  # the snapshot published on the table topic holds this change
        if translator.is_truncate(mutation):
            topic = translator.topic(mutation.schema, mutation.table)
            self._ensure_table_topic(producer, topic)
            # The fold must see everything produced before the TRUNCATE.
            self._flush_producer(producer)
            live = live_keys(self._bootstrap_servers, self._properties, topic, self.flush_timeout)
            records = translator.truncated(mutation, live)
        else:
            records = translator.translate(mutation)
        return self._produce_records(producer, [*translator.take_begins(), *records])

    # -- snapshots of new table topics -------------------------------------------------

    def _learn_table(self, shape: stream_pb2.TableShape) -> None:
        if not shape.name:
            return
        self._tables[(shape.schema, shape.name)] = configuration_pb2.TableConfiguration(
            schema=shape.schema,
            name=shape.name,
            key_columns=list(shape.key),
            columns=[column.name for column in shape.columns],
        )

    def _load_snapshots(self) -> dict[str, Snapshot]:
        if self._snapshots is None:
            state = self._state_topic
            if state is None:
                raise ProgrammingError("kafka writer has no snapshot topic: bind() was not called")
            recorded = live_keys(self._bootstrap_servers, self._properties, state)
            self._snapshots = {
                key.decode("utf-8"): parse_txid_snapshot(json.loads(value)["snapshot"])
                for key, value in recorded.items()
            }
        return self._snapshots

    def _snapshot_if_new(
        self, producer: Producer, translator: TableTopicTranslator, schema: str, table: str
    ) -> Snapshot | None:
        """The snapshot a table topic started with; taken now when it has none yet.

        Order (see the README, "Kafka table topics"): everything produced so far is
        acknowledged; one REPEATABLE READ snapshot of the table is read and its rows
        produced (``op: r``); keys the topic holds that the snapshot lacks are deleted;
        once all that is acknowledged, the snapshot is recorded in the state topic.
        A crash before the record just means the snapshot is taken again: a fresh one
        replaces whatever the topic held, so that is always safe.
        """
        snapshots = self._load_snapshots()
        topic = translator.topic(schema, table)
        found = snapshots.get(topic)
        if found is not None:
            return found
        dsn = self._source_dsn
        if dsn is None:
            raise ConfigurationError(
                f"table topic {topic!r} needs a snapshot but the writer cannot read the source "
                "(it runs outside pgshovel-relay); set table_topics.snapshot: false"
            )
        configuration = self._tables.get(
            (schema, table), configuration_pb2.TableConfiguration(schema=schema, name=table)
        )
        self._flush_producer(producer)
        self._ensure_table_topic(producer, topic)
        with read_table(dsn, configuration) as read:
            if read.shape is not None and not read.shape.key:
                return None  # unkeyed: no table topic (see _warn_unkeyed)
            live = live_keys(self._bootstrap_servers, self._properties, topic, self.flush_timeout)
            text = read.snapshot.to_text()
            count = 0
            if read.shape is not None:
                records = translator.snapshot_records(
                    schema, table, read.shape.key, read.rows(), text
                )
                for record in records:
                    self._produce_records(producer, [record])
                    live.pop(record.key or b"", None)
                    count += 1
            self._produce_records(producer, translator.snapshot_deletions(topic, list(live)))
            self._flush_producer(producer)
        state = self._state_topic
        if state is None:
            raise ProgrammingError("kafka writer has no snapshot topic: bind() was not called")
        done = {"schema": schema, "table": table, "snapshot": text, "rows": count}
        self._ensure_table_topic(producer, state)
        self._produce_records(
            producer, [Record(state, topic.encode("utf-8"), dumps(done).encode("utf-8"))]
        )
        self._flush_producer(producer)
        snapshots[topic] = read.snapshot
        logger.info(
            "table topic %r starts with %d row(s) of %s.%s (snapshot %s; %d stale key(s) deleted)",
            topic,
            count,
            schema,
            table,
            text,
            len(live),
        )
        return read.snapshot

    def _produce_records(self, producer: Producer, records: Sequence[Record]) -> int:
        size = 0
        callback = self._delivered
        for record in records:
            self._ensure_table_topic(producer, record.topic)
            while True:
                try:
                    producer.produce(record.topic, record.value, record.key, on_delivery=callback)
                    break
                except BufferError:
                    producer.poll(0.1)
            size += len(record.key or b"") + len(record.value or b"")
        return size

    def _warn_unkeyed(self, mutation: stream_pb2.Mutation) -> None:
        table = (mutation.schema, mutation.table)
        if table not in self._unkeyed:
            self._unkeyed.add(table)
            logger.warning(
                "table %s.%s has no key: it has no table topic and its changes are only in the "
                "set topic; give it a primary key (or a set 'key') to publish it",
                *table,
            )

    def _ensure_table_topic(self, producer: Producer, topic: str) -> None:
        """Create ``topic`` compacted if it is missing and the broker lets the admin API do it."""
        if topic in self._ready_topics:
            return
        settings = self.table_topics
        if settings is None:
            raise ProgrammingError("kafka writer has no table_topics: no table topic to create")
        try:
            existing = producer.list_topics(timeout=METADATA_SECONDS).topics
        except KafkaException as error:
            raise BrokerUnavailable(
                f"cannot list the topics of the cluster: {error}; is the broker reachable?"
            ) from error
        if topic not in existing:
            if settings.create:
                self._create_compacted(topic, settings)
            else:
                logger.warning(
                    "table topic %r does not exist; the broker will create it with its defaults "
                    "(create it with cleanup.policy=compact to keep one message per key)",
                    topic,
                )
        self._ready_topics.add(topic)

    def _create_compacted(self, topic: str, settings: TableTopics) -> None:
        # Debezium's transaction topic keeps every record (BEGIN and END share a key).
        translator = self._translator
        compact = translator is None or topic != translator.transaction_topic
        policy = "compact" if compact else "delete"
        if self._legacy_broker():
            logger.warning(
                "topic %r is missing and the broker predates the admin API (kafka < 0.10.1): "
                "it will be auto-created with the broker's defaults; create it with "
                "kafka-topics.sh --config cleanup.policy=%s",
                topic,
                policy,
            )
            return
        admin = AdminClient(
            {"bootstrap.servers": self._bootstrap_servers, **client_properties(self._properties)}
        )
        new = NewTopic(
            topic,
            num_partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            config={"cleanup.policy": policy},
        )
        try:
            admin.create_topics([new], request_timeout=CREATE_SECONDS)[topic].result()
            logger.info("created topic %r (cleanup.policy=%s)", topic, policy)
        except KafkaException as error:
            cause = error.args[0] if error.args else None
            if isinstance(cause, KafkaError) and cause.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            logger.warning(
                "could not create topic %r (%s): the broker will auto-create it with its "
                "defaults; on a broker older than 0.10.1 create it with kafka-topics.sh "
                "--config cleanup.policy=%s",
                topic,
                cause if cause is not None else error,
                policy,
            )

    def _legacy_broker(self) -> bool:
        configured = client_properties(self._properties).get("api.version.request", "true")
        return configured.lower() in _LEGACY_FLAGS

    # -- delivery -----------------------------------------------------------------

    def _flush_producer(self, producer: Producer) -> None:
        remaining = producer.flush(self.flush_timeout)
        if self._failure is not None or remaining:
            self._raise_failure()
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge {remaining} message(s) within {self.flush_timeout}s; "
                "is the broker reachable?"
            )

    def flush(self) -> None:
        """Wait until every pushed message is acknowledged; raise if one was not."""
        if self._producer is None:
            return
        remaining = self._producer.flush(self.flush_timeout)
        self._raise_failure()
        if remaining:
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge {remaining} message(s) on {self.topic!r} "
                f"within {self.flush_timeout}s; is the broker reachable?"
            )
        self._bytes += self._pending
        self._pending = 0

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge a message on {self.topic!r}: {failure}"
            )

    def reset(self) -> None:
        """Drop the producer (and whatever it still queues) after a failure."""
        if self._producer is not None:
            self._producer.purge(in_queue=True, in_flight=True)
            self._producer.flush(0)
            self._producer = None
        # The purge reports every dropped message as failed: those reports
        # belong to the abandoned attempt, not to the next one.
        self._failure = None
        self._pending = 0
        self._ready_topics.clear()

    def last_committed_begin(self) -> stream_pb2.Message | None:
        if self.topic is None:
            raise ProgrammingError("kafka writer has no topic: bind() was not called")
        if not self.set_topic:
            return None  # no set topic is written: there is no stream to check against
        bootstrap_servers, properties = self._reader_settings
        reader = KafkaReader(bootstrap_servers, self.topic, properties, timeout=self.flush_timeout)
        try:
            return last_committed_begin(reader)
        finally:
            reader.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.flush_timeout)
            self._producer = None
