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
with its defaults (not compacted) and the writer says so once per topic. With
``table_topics.snapshot`` a new table topic starts with the table's rows, read in
chunks between watermarks while batches go on (``pgshovel.relay.chunked_snapshots``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pgshovel._kafka_log import kafka_logger
from pgshovel._kafka_properties import client_properties
from pgshovel.cluster import names
from pgshovel.errors import BrokerUnavailable, ConfigurationError, ProgrammingError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.chunk_window import relay_attempt_prefix
from pgshovel.relay.chunked_snapshots import ChunkedSnapshots
from pgshovel.relay.config import TableTopics
from pgshovel.relay.live_keys import holds_messages, live_keys
from pgshovel.relay.table_topics import Record, TableTopicTranslator
from pgshovel.settings import NonEmptyText, PositiveSeconds
from pgshovel.stream.last_batch import last_committed_begin
from pgshovel.stream.reader import KafkaReader, partition_mismatch

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
        #: table-topic snapshots (``table_topics.snapshot``), set up by ``bind``
        self._snapshots: ChunkedSnapshots | None = None
        self._cluster_set: tuple[str, str] = ("", "")

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
                # <cluster>.<set>: neither name may hold a '.' (pgshovel.cluster.names).
                cluster, _, set_name = default_topic.partition(".")
                self._cluster_set = (cluster, set_name)
                self._snapshots = ChunkedSnapshots(
                    translator=self._translator,
                    output=_SnapshotOutput(self),
                    state_topic=snapshot_topic(default_topic),
                    prefix=relay_attempt_prefix(cluster, set_name),
                    chunk_rows=self.table_topics.snapshot_chunk_rows,
                )

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """Where table-topic snapshots read the source and write watermarks, and the set's
        tables."""
        if self._snapshots is not None:
            cluster, set_name = self._cluster_set
            queue = names.queue_name(cluster, set_name)
            self._snapshots.attach(dsn, cluster, queue, configuration)

    @property
    def bytes_sent(self) -> int:
        return self._bytes

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None and self._failure is None:
            self._failure = error

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            producer = Producer(self._settings, logger=kafka_logger(__name__))
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
        snapshots = self._snapshots
        if kind == "mutation":
            return self._push_mutation(producer, translator, operation.mutation)
        if kind == "begin":
            translator.begin(operation.batch.id)
            if snapshots is not None:
                snapshots.begin()
            return 0
        if kind == "commit":
            size = self._produce_records(producer, translator.batch_end())
            if snapshots is not None:
                size += snapshots.commit()
            return size
        if snapshots is None:
            return 0
        if kind == "watermark":
            snapshots.watermark(operation.watermark.request)
        elif kind == "schema_change":
            snapshots.schema_change(operation.schema_change)
        elif kind == "rollback":
            snapshots.rollback()
        return 0

    def _push_mutation(
        self, producer: Producer, translator: TableTopicTranslator, mutation: stream_pb2.Mutation
    ) -> int:
        snapshots = self._snapshots
        if not mutation.key_columns:
            self._warn_unkeyed(mutation)
            return 0
        if snapshots is not None and snapshots.skips(mutation):
            return 0  # an older relay's one-snapshot read holds this change
        if translator.is_truncate(mutation):
            topic = translator.topic(mutation.schema, mutation.table)
            self._ensure_table_topic(producer, topic)
            # The fold must see everything produced before the TRUNCATE.
            self._flush_producer(producer)
            live = live_keys(self._bootstrap_servers, self._properties, topic, self.flush_timeout)
            records = translator.truncated(mutation, live)
            if snapshots is not None:
                snapshots.truncated(mutation.schema, mutation.table)
        else:
            records = translator.translate(mutation)
            if snapshots is not None:
                snapshots.changed(mutation.schema, mutation.table, records)
        return self._produce_records(producer, [*translator.take_begins(), *records])

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
            {"bootstrap.servers": self._bootstrap_servers, **client_properties(self._properties)},
            logger=kafka_logger(__name__),
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
        if self._snapshots is not None:
            # Snapshot chunks whose rows this flush acknowledged: record their progress.
            progress = self._snapshots.acknowledged()
            if progress:
                self._bytes += self._produce_records(self._producer, progress)
                self._flush_producer(self._producer)

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
        if self._snapshots is not None:
            self._snapshots.abandon()

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
        if self._snapshots is not None:
            self._snapshots.close()
        if self._producer is not None:
            self._producer.flush(self.flush_timeout)
            self._producer = None


class _SnapshotOutput:
    """The writer as the snapshots see it (``SnapshotOutput``)."""

    def __init__(self, writer: KafkaWriter) -> None:
        self.writer = writer

    def produce(self, records: Sequence[Record]) -> int:
        writer = self.writer
        return writer._produce_records(writer._ensure_producer(), records)

    def read_state(self, topic: str) -> dict[bytes, bytes]:
        writer = self.writer
        return live_keys(writer._bootstrap_servers, writer._properties, topic, writer.flush_timeout)

    def holds_messages(self, topic: str) -> bool:
        writer = self.writer
        return holds_messages(
            writer._bootstrap_servers, writer._properties, topic, writer.flush_timeout
        )
