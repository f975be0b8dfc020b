"""The relay's one Kafka producer: every output produces through it, one flush acknowledges all.

Ordering and durability settings (the user's ``properties`` win where they
overlap; an empty one is left out, see ``pgshovel._kafka_properties``):
``acks=all``; ``enable.idempotence=true`` when the broker speaks the modern
protocol, otherwise (a client configured with ``api.version.request=false``,
i.e. a broker older than 0.10) one request in flight per connection so a retry
can never reorder messages. Messages are produced asynchronously and waited
for once per batch by ``flush``: never a synchronous round trip per message.

A message larger than the producer may send (its ``message.max.bytes``, less
librdkafka's framing) is refused *before* it is queued, with
``MessageTooLarge``: a data fault, not an outage, so the relay follows
``on_error`` instead of retrying forever, and nothing produced after it exists.
``produce_values`` checks every message of a call before it queues the first,
so the set topic gets all of them or none. A message larger than every broker
takes with its defaults (allowed by a raised ``message.max.bytes``) is sent
alone: what was produced before it is acknowledged first, and nothing after it
is queued until it is. A broker whose own limit is still lower then refuses
it with nothing after it sent, so the set topic's sequence has no gap: the
delivery report raises ``MessageTooLarge`` with ``dropped`` (the producer
dropped its queue, as after an outage) and the relay abandons the batch under
a new publisher identity.

After any failure the producer purges what it still holds (``reset``) and the
next call connects again (``generation`` counts the connections).
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
from pgshovel.errors import BrokerUnavailable, MessageTooLarge
from pgshovel.relay.live_keys import holds_messages, live_keys

__all__ = [
    "FRAMING_BYTES",
    "KafkaProducer",
    "producer_settings",
    "raise_limits_remedy",
    "topic_partitions",
]

logger = logging.getLogger(__name__)

_LEGACY_FLAGS = {"false", "0", "no", "off"}

#: What librdkafka counts on top of a message's key and value against ``message.max.bytes``
#: (its largest per-message framing; it refuses a longer message in ``produce``).
FRAMING_BYTES = 36
#: librdkafka's default ``message.max.bytes``.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
#: The largest key plus value every broker takes with its defaults (Kafka 0.9 and later):
#: a larger message (a raised ``message.max.bytes``) is sent alone (``_produce_alone``).
SAFE_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES - FRAMING_BYTES
#: How long the producer waits for the cluster's topic list.
METADATA_SECONDS = 30.0
#: How long the producer waits for the admin API to create a topic.
CREATE_SECONDS = 10.0
_NOT_READY = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}


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
        # would leave a sequence gap. ``flush`` bounds the wait instead and purges
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


def raise_limits_remedy(topic: str) -> str:
    """Every setting that bounds a message's size on its way, producer to consumers."""
    return (
        "raise message.max.bytes in the relay's writer properties (relay.yml), the broker's "
        "message.max.bytes and replica.fetch.max.bytes (or max.message.bytes of topic "
        f"{topic!r}: kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
        "--add-config max.message.bytes=N) and the consumers' fetch.message.max.bytes / "
        "max.partition.fetch.bytes, then restart the relay"
    )


class KafkaProducer:
    """One librdkafka producer shared by every output of a writer (a ``RecordProducer``), and
    the reads back the table topics need (a ``TopicReader``)."""

    def __init__(
        self,
        bootstrap_servers: str,
        properties: Mapping[str, Any],
        flush_timeout: float,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.properties = dict(properties)
        self.flush_timeout = flush_timeout
        self.settings = producer_settings(bootstrap_servers, self.properties)
        configured = self.settings.get("message.max.bytes", str(DEFAULT_MAX_MESSAGE_BYTES))
        #: the largest key plus value the producer sends
        self.max_message_bytes = int(configured) - FRAMING_BYTES
        #: incremented each time a new librdkafka producer connects (at start, after a failure)
        self.generation = 0
        self._producer: Producer | None = None
        self._failure: tuple[KafkaError, Any] | None = None

    # -- the connection -----------------------------------------------------------

    def connection(self) -> Producer:
        """The librdkafka producer, connected on first use and again after ``reset``."""
        if self._producer is None:
            self._producer = Producer(self.settings, logger=kafka_logger(__name__))
            self.generation += 1
        return self._producer

    def partitions(self, topic: str) -> int:
        """How many partitions ``topic`` has (see ``topic_partitions``)."""
        return topic_partitions(self.connection(), topic, self.flush_timeout)

    @property
    def legacy_broker(self) -> bool:
        """Whether the client is configured for a broker older than 0.10 (no admin API)."""
        configured = client_properties(self.properties).get("api.version.request", "true")
        return configured.lower() in _LEGACY_FLAGS

    # -- producing ----------------------------------------------------------------

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None and self._failure is None:
            self._failure = (error, message)

    def _check_size(self, topic: str, key: bytes | None, value: bytes | None) -> int:
        size = len(key or b"") + len(value or b"")
        if size > self.max_message_bytes:
            raise MessageTooLarge(
                f"a message of {size} bytes to topic {topic!r} is larger than the producer "
                f"sends ({self.max_message_bytes} bytes: message.max.bytes "
                f"{self.max_message_bytes + FRAMING_BYTES} less {FRAMING_BYTES} of framing); "
                f"nothing from it on is published; {raise_limits_remedy(topic)}",
                topic=topic,
                key=key,
                value=value,
            )
        return size

    def _produce(
        self, producer: Producer, topic: str, value: Any, key: Any, partition: int = -1
    ) -> None:
        while True:
            try:
                producer.produce(
                    topic, value, key, partition=partition, on_delivery=self._delivered
                )
                return
            except BufferError:
                # The local queue is full: let deliveries drain, then retry.
                producer.poll(0.1)
            except KafkaException as error:
                cause = error.args[0] if error.args else None
                if isinstance(cause, KafkaError) and cause.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    # Our own check let it through (librdkafka counts differently): what
                    # was produced before it may already be on its way, the rest is not.
                    self.reset()
                    raise MessageTooLarge(
                        f"a message of {len(key or b'') + len(value or b'')} bytes to topic "
                        f"{topic!r} is larger than the producer sends ({cause.str()}); "
                        f"{raise_limits_remedy(topic)}",
                        topic=topic,
                        key=key,
                        value=value,
                        dropped=True,
                    ) from error
                self.reset()
                raise BrokerUnavailable(f"kafka produce to {topic!r} failed: {error}") from error

    def _produce_alone(
        self, topic: str, value: bytes | None, key: bytes | None, partition: int = -1
    ) -> None:
        """Send a message larger than a broker takes by default on its own: everything
        before it acknowledged first, nothing after it queued until it is acknowledged. A
        broker that refuses it then leaves no gap in the set topic's sequence."""
        self.flush()
        self._produce(self.connection(), topic, value, key, partition)
        self.flush()

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None) -> int:
        """Queue one message (``value`` None: a tombstone); returns its size in bytes."""
        size = self._check_size(topic, key, value)
        if size > SAFE_MESSAGE_BYTES:
            self._produce_alone(topic, value, key)
            return size
        self._produce(self.connection(), topic, value, key)
        if self._failure is not None:
            self.raise_failure()
        return size

    def produce_values(
        self, topic: str, values: Sequence[bytes], partitions: Sequence[int] | None = None
    ) -> int:
        """Queue keyless ``values`` in order, all or none, each to its partition of
        ``partitions`` (None: the partitioner's choice); returns their size in bytes."""
        lengths = list(map(len, values))
        largest = max(lengths, default=0)
        if largest > self.max_message_bytes:
            self._check_size(topic, None, values[lengths.index(largest)])
        producer = self.connection()
        produce = producer.produce
        callback = self._delivered
        alone = largest > SAFE_MESSAGE_BYTES
        targets = [-1] * len(values) if partitions is None else partitions
        for value, partition in zip(values, targets, strict=True):
            if alone and len(value) > SAFE_MESSAGE_BYTES:
                self._produce_alone(topic, value, None, partition)
                producer = self.connection()
                produce = producer.produce
                continue
            try:
                produce(topic, value, partition=partition, on_delivery=callback)
            except (BufferError, KafkaException):
                self._produce(producer, topic, value, None, partition)
            if self._failure is not None:
                break
        producer.poll(0)
        self.raise_failure()
        return sum(lengths)

    # -- delivery -----------------------------------------------------------------

    def flush(self) -> None:
        """Wait until everything produced is acknowledged; raise (and reset) if it was not."""
        if self._producer is None:
            return
        remaining = self._producer.flush(self.flush_timeout)
        self.raise_failure()
        if remaining:
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge {remaining} message(s) within "
                f"{self.flush_timeout}s; is the broker reachable?"
            )

    def raise_failure(self) -> None:
        """Raise the first failed delivery reported since the last call (and reset)."""
        if self._failure is None:
            return
        failure, message = self._failure
        self.reset()
        topic = message.topic() if message is not None else "?"
        if failure.code() == KafkaError.MSG_SIZE_TOO_LARGE and message is not None:
            key, value = message.key(), message.value()
            raise MessageTooLarge(
                f"the broker refused a message of {len(key or b'') + len(value or b'')} bytes "
                f"to topic {topic!r} as too large ({failure.str()}): its limit is lower than "
                f"the producer's; {raise_limits_remedy(topic)} (or lower the producer's "
                "message.max.bytes to the broker's)",
                topic=topic,
                key=key,
                value=value,
                dropped=True,
            )
        raise BrokerUnavailable(f"kafka did not acknowledge a message on {topic!r}: {failure}")

    def reset(self) -> None:
        """Drop the producer (and whatever it still queues) after a failure."""
        if self._producer is not None:
            self._producer.purge(in_queue=True, in_flight=True)
            self._producer.flush(0)
            self._producer = None
        # The purge reports every dropped message as failed: those reports
        # belong to the abandoned attempt, not to the next one.
        self._failure = None

    def close(self) -> None:
        """Deliver what is still pending and release the connection."""
        if self._producer is not None:
            self._producer.flush(self.flush_timeout)
            self._producer = None

    # -- topics -------------------------------------------------------------------

    def ensure_topic(
        self,
        topic: str,
        *,
        cleanup_policy: str,
        partitions: int,
        replication_factor: int,
        create: bool = True,
    ) -> None:
        """Create ``topic`` with ``cleanup_policy`` if it is missing, ``create`` is set and the
        broker lets the admin API do it; otherwise the broker auto-creates it with its
        defaults, and the producer says so."""
        try:
            existing = self.connection().list_topics(timeout=METADATA_SECONDS).topics
        except KafkaException as error:
            raise BrokerUnavailable(
                f"cannot list the topics of the cluster: {error}; is the broker reachable?"
            ) from error
        if topic in existing:
            return
        if not create:
            logger.warning(
                "topic %r does not exist; the broker will create it with its defaults "
                "(create it with cleanup.policy=%s)",
                topic,
                cleanup_policy,
            )
            return
        if self.legacy_broker:
            logger.warning(
                "topic %r is missing and the broker predates the admin API (kafka < 0.10.1): "
                "it will be auto-created with the broker's defaults; create it with "
                "kafka-topics.sh --config cleanup.policy=%s",
                topic,
                cleanup_policy,
            )
            return
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers, **client_properties(self.properties)},
            logger=kafka_logger(__name__),
        )
        new = NewTopic(
            topic,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config={"cleanup.policy": cleanup_policy},
        )
        try:
            admin.create_topics([new], request_timeout=CREATE_SECONDS)[topic].result()
            logger.info("created topic %r (cleanup.policy=%s)", topic, cleanup_policy)
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
                cleanup_policy,
            )

    # -- reading back (TopicReader) ----------------------------------------------------

    def live_keys(self, topic: str) -> dict[bytes, bytes]:
        """The last value of every key of the compacted ``topic`` (tombstones removed)."""
        return live_keys(self.bootstrap_servers, self.properties, topic, self.flush_timeout)

    def holds_messages(self, topic: str) -> bool:
        """Whether ``topic`` exists and holds a message."""
        return holds_messages(self.bootstrap_servers, self.properties, topic, self.flush_timeout)
