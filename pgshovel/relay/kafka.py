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

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pgshovel._kafka_properties import client_properties
from pgshovel.errors import BrokerUnavailable, ConfigurationError, ProgrammingError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.config import TableTopics
from pgshovel.relay.live_keys import live_keys
from pgshovel.relay.table_topics import Record, TableTopicTranslator
from pgshovel.settings import NonEmptyText, PositiveSeconds
from pgshovel.stream.reader import partition_mismatch

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
_NOT_READY = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}


def topic_partitions(producer: Producer, topic: str, timeout: float) -> int:
    """How many partitions ``topic`` has (asking creates it where the broker auto-creates)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = producer.list_topics(topic, timeout=timeout)
        except KafkaException as error:
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
        self._producer: Producer | None = None
        self._failure: KafkaError | None = None
        self._bytes = 0
        self._pending = 0
        self._translator: TableTopicTranslator | None = None
        self._ready_topics: set[str] = set()
        self._unkeyed: set[tuple[str, str]] = set()

    def bind(self, default_topic: str) -> None:
        """Called by the relay with ``<cluster>.<set>``; a configured topic wins."""
        if self.topic is None:
            self.topic = default_topic
        if self.table_topics is not None and self._translator is None:
            prefix = self.table_topics.prefix
            self._translator = TableTopicTranslator(
                default_topic if prefix is None else prefix,
                self.table_topics.format,
                name=default_topic if prefix is None or not prefix else prefix,
                database=self.table_topics.database,
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
        """Produce every message asynchronously, in order (see ``flush``)."""
        if self.topic is None:
            raise ProgrammingError("kafka writer has no topic: bind() was not called")
        producer = self._ensure_producer()
        produce = producer.produce
        callback = self._delivered
        topic = self.topic
        translator = self._translator
        publish_set = self.set_topic
        size = 0
        try:
            for message in messages:
                if publish_set:
                    payload = message.SerializeToString()
                    size += len(payload)
                    while True:
                        try:
                            produce(topic, payload, on_delivery=callback)
                            break
                        except BufferError:
                            # The local queue is full: let deliveries drain, then retry.
                            producer.poll(0.1)
                if translator is not None:
                    size += self._push_table_records(producer, translator, message)
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
            return 0
        if kind != "mutation":
            return 0
        mutation = operation.mutation
        if not mutation.key_columns:
            self._warn_unkeyed(mutation)
            return 0
        if translator.is_truncate(mutation):
            topic = translator.topic(mutation.schema, mutation.table)
            self._ensure_table_topic(producer, topic)
            # The fold must see everything produced before the TRUNCATE.
            self._flush_producer(producer)
            live = live_keys(self._bootstrap_servers, self._properties, topic, self.flush_timeout)
            records = translator.truncated(mutation, live)
        else:
            records = translator.translate(mutation)
        return self._produce_records(producer, records)

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
        if self._legacy_broker():
            logger.warning(
                "table topic %r is missing and the broker predates the admin API (kafka < 0.10.1): "
                "it will be auto-created with the broker's defaults; create it with "
                "kafka-topics.sh --config cleanup.policy=compact to keep one message per key",
                topic,
            )
            return
        admin = AdminClient({"bootstrap.servers": self._bootstrap_servers, **self._properties})
        new = NewTopic(
            topic,
            num_partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            config={"cleanup.policy": "compact"},
        )
        try:
            admin.create_topics([new], request_timeout=METADATA_SECONDS)[topic].result()
            logger.info("created table topic %r (compacted)", topic)
        except KafkaException as error:
            cause = error.args[0] if error.args else None
            if isinstance(cause, KafkaError) and cause.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            logger.warning(
                "could not create table topic %r compacted (%s): the broker will auto-create it "
                "with its defaults; on a broker older than 0.10.1 create it with kafka-topics.sh "
                "--config cleanup.policy=compact",
                topic,
                cause if cause is not None else error,
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

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.flush_timeout)
            self._producer = None
