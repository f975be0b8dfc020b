"""The Kafka writer: the relay's outputs, sharing one producer, acknowledged together per batch.

``KafkaWriter`` is the ``StreamWriter`` relay.yml names
(``pgshovel.relay.kafka:KafkaWriter``). It holds one ``KafkaProducer``
(``pgshovel.relay.producer``: ordering, durability, size limits) and a list of
``Output``\\ s built from its configuration: the table topics
(``pgshovel.relay.table_topics``, with ``table_topics``) and the set topic
(``pgshovel.relay.set_topic``, unless ``set_topic: false``). Every message
pushed goes to every output in that order: only the order within each topic
matters, and a data error found on the way (a table Kafka cannot name, a
snapshot that cannot be read, a message too large) then leaves nothing of the
push on the set topic, as the relay assumes of any failure that is not
``BrokerUnavailable``.

One delivery discipline for all outputs: ``flush`` waits until the producer
acknowledged everything every output produced, then lets each output produce
what vouches for it (table-topic snapshot progress) and waits again; the relay
calls ``pgq.finish_batch`` only after that. After a failed ``push`` or
``flush`` the producer purges what it still holds, every output forgets what
it had in flight (``abandon``), and the relay starts a new publisher identity,
so readers see the old publisher's open batch abandoned and the batch re-sent
from sequence 0 of the new one. A message too large for Kafka
(``MessageTooLarge``) is a data error naming its table and key: the relay
follows ``on_error`` and nothing from it on is published.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pgshovel.abc import EventDecoder, Framer, Output
from pgshovel.errors import (
    BrokerUnavailable,
    ConfigurationError,
    MessageTooLarge,
    ProgrammingError,
)
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.framing import MutationFramer, RowFramer
from pgshovel.relay.producer import KafkaProducer, producer_settings, topic_partitions
from pgshovel.relay.set_topic import SetTopicOutput
from pgshovel.relay.table_topics import TableTopics, TableTopicsOutput, snapshot_topic
from pgshovel.settings import NonEmptyText, PositiveInt, PositiveSeconds

__all__ = [
    "KafkaWriter",
    "producer_settings",
    "snapshot_topic",
    "topic_partitions",
]

logger = logging.getLogger(__name__)


class KafkaWriter:
    """A ``StreamWriter`` for one Kafka topic (single partition, total order), and optionally
    one keyed topic per table: a list of outputs sharing one producer."""

    def __init__(
        self,
        bootstrap_servers: NonEmptyText,
        topic: NonEmptyText | None = None,
        properties: Mapping[str, Any] | None = None,
        flush_timeout: PositiveSeconds = 60.0,
        set_topic: bool = True,
        table_topics: TableTopics | None = None,
        encoding: Literal["rows", "mutations"] = "rows",
        partitions: PositiveInt = 1,
        max_message_bytes: PositiveInt = 512 * 1024,
    ) -> None:
        if not set_topic and table_topics is None:
            raise ConfigurationError(
                "the kafka writer publishes nothing: set_topic is false and no table_topics "
                "are configured; enable one of them"
            )
        if partitions > 1 and encoding != "rows":
            raise ConfigurationError(
                f"the kafka writer's partitions: {partitions!r} needs encoding: rows (a "
                "partitioned set topic carries row changes many to a message); set encoding: "
                "rows, or partitions: 1"
            )
        self.encoding = encoding
        self.partitions = partitions
        self.max_message_bytes = max_message_bytes
        self.topic = topic
        self.flush_timeout = flush_timeout
        self.set_topic = set_topic
        self.table_topics = table_topics
        self.producer = KafkaProducer(bootstrap_servers, properties or {}, flush_timeout)
        #: the outputs, in the order every message reaches them (built by ``bind``)
        self.outputs: list[Output] = []
        self._set_topic: SetTopicOutput | None = None
        self._bytes = 0
        self._pending = 0

    def bind(self, default_topic: str) -> None:
        """Called by the relay with ``<cluster>.<set>``; a configured topic wins."""
        if self.outputs:
            return
        if self.topic is None:
            self.topic = default_topic
        if self.table_topics is not None:
            self.outputs.append(
                TableTopicsOutput(
                    self.table_topics,
                    self.producer,
                    self.producer,
                    default_topic,
                    self.topic if self.set_topic else None,
                )
            )
        if self.set_topic:
            self._set_topic = SetTopicOutput(self.producer, self.topic, self.partitions)
            self.outputs.append(self._set_topic)

    def _bound(self) -> list[Output]:
        """The outputs; a writer configured with a topic works without ``bind``."""
        if not self.outputs:
            if self.topic is None:
                raise ProgrammingError("kafka writer has no topic: bind() was not called")
            self.bind(self.topic)
        return self.outputs

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """Hand every output the source and the set's current configuration."""
        for output in self._bound():
            output.attach_source(dsn, configuration)

    @property
    def bytes_sent(self) -> int:
        return self._bytes

    def framer(self, decoder: EventDecoder, epoch: int) -> Framer:
        """ROWS over the configured partitions, or one message per mutation."""
        if self.encoding == "rows":
            return RowFramer(decoder, epoch, self.partitions, self.max_message_bytes)
        return MutationFramer(decoder, epoch)

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> None:
        """Hand every message to every output, in order; the producer sends asynchronously."""
        outputs = self._bound()
        size = 0
        try:
            if self._set_topic is not None:
                # Before any output produces: a set topic Kafka cannot order ends the relay.
                self._set_topic.check_partitions()
            for output in outputs:
                size += output.push(messages, partitions)
        except BrokerUnavailable:
            self.reset()
            raise
        except MessageTooLarge as error:
            self._too_large(error)
        self._pending += size

    def flush(self) -> None:
        """Wait until every output's messages are acknowledged; raise if one was not."""
        producer = self.producer
        try:
            producer.flush()
            self._bytes += self._pending
            self._pending = 0
            follow_up = sum(output.acknowledged() for output in self.outputs)
            producer.flush()  # returns at once when the outputs produced nothing more
            self._bytes += follow_up
        except BrokerUnavailable:
            self.reset()
            raise
        except MessageTooLarge as error:
            self._too_large(error)

    def _too_large(self, error: MessageTooLarge) -> None:
        """Raise ``error`` again, naming the message's table and key where an output can."""
        if error.dropped:
            self.reset()
        described = next(
            (
                found
                for output in self.outputs
                if (found := output.describe(error.topic, error.key, error.value)) is not None
            ),
            None,
        )
        if described is None:
            raise error
        raise MessageTooLarge(
            f"{described}: {error}",
            topic=error.topic,
            key=error.key,
            value=error.value,
            dropped=error.dropped,
        ) from error

    def reset(self) -> None:
        """Drop the producer (and whatever it still queues) after a failure."""
        self.producer.reset()
        self._pending = 0
        for output in self.outputs:
            output.abandon()

    def last_committed_begin(self) -> stream_pb2.Message | None:
        self._bound()
        if self._set_topic is None:
            return None  # no set topic is written: there is no stream to check against
        return self._set_topic.last_committed_begin(self.flush_timeout)

    def close(self) -> None:
        for output in self.outputs:
            output.close()
        self.producer.close()
