"""Read a stream topic from a stored position: ``(offset, Message)`` pairs for the validator.

A confluent-kafka consumer assigned by hand to the partitions a
``StreamPosition`` names, each at the offset the caller stored with its data
(``resume``), or to one partition at an offset (``seek``, for tools that read a
topic from wherever they like): no consumer group offsets are committed or
relied on (``enable.auto.commit=false``), and an offset the topic no longer
holds is an error, never a silent jump (``auto.offset.reset=error``). A set
topic has one partition for now: a topic with more is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from google.protobuf.message import DecodeError

from pgshovel._kafka_log import kafka_logger
from pgshovel._kafka_properties import client_properties
from pgshovel.errors import BrokerUnavailable, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.position import StreamPosition

__all__ = ["KafkaReader", "consumer_settings", "partition_mismatch"]

logger = logging.getLogger(__name__)

#: Once a read has its first message, how long each further wait for more may last.
DRAIN_SECONDS = 0.01


def consumer_settings(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """The librdkafka settings of a reader; the user's ``properties`` win where they overlap.

    An empty property is left out (see ``pgshovel._kafka_properties``).
    """
    settings = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": "pgshovel-replicate",
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "auto.offset.reset": "error",
        "enable.partition.eof": "false",
    }
    settings.update(client_properties(properties))
    return settings


def partition_mismatch(topic: str, count: int) -> str:
    """The error of a set topic with more than one partition (readers and the relay)."""
    return (
        f"topic {topic!r} has {count!r} partitions, a set topic must have exactly one (its "
        "stream is ordered in one partition; the relay writes partition 0 only): recreate "
        "the topic with one partition and reload the targets from a fresh snapshot"
    )


class KafkaReader:
    """Reads a topic's partitions from a position (or one partition from an offset)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        properties: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        self._consumer = Consumer(
            consumer_settings(bootstrap_servers, properties or {}), logger=kafka_logger(__name__)
        )

    def cached_end(self, partition: int = 0) -> int | None:
        """The end offset of ``partition`` from the last fetch response (no broker round
        trip), if known."""
        try:
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True
            )
        except KafkaException:
            return None
        return int(high) if high is not None and high >= 0 else None

    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        """The lowest offset ``partition`` still holds and the offset of its next message."""
        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=self.timeout, cached=False
            )
        except KafkaException as error:
            raise BrokerUnavailable(
                f"cannot read the offsets of topic {self.topic!r}: {error}; check that the "
                "topic exists and the brokers are reachable"
            ) from error
        return int(low), int(high)

    def partitions(self) -> int:
        """How many partitions the topic has (0 while the broker does not know it)."""
        try:
            # The whole cluster's metadata: asking for one missing topic may create it.
            metadata = self._consumer.list_topics(timeout=self.timeout)
        except KafkaException as error:
            raise BrokerUnavailable(
                f"cannot read the metadata of topic {self.topic!r}: {error}; check that the "
                "brokers are reachable"
            ) from error
        found = metadata.topics.get(self.topic)
        return 0 if found is None else len(found.partitions)

    def end_offsets(self) -> tuple[int, ...]:
        """The offset of the next message of every partition (a set topic: one), in
        partition order; an error for a topic with more than one partition."""
        self._check_partitions()
        return (self.watermarks(0)[1],)

    def seek(self, offset: int, partition: int = 0) -> None:
        """Start reading ``partition`` at ``offset``; an error if the topic no longer (or not
        yet) holds it, or if it has more than one partition (a set's stream is totally
        ordered in one)."""
        self._check_partitions()
        self._check_held(partition, offset)
        self._consumer.assign([TopicPartition(self.topic, partition, offset)])

    def resume(self, position: StreamPosition) -> None:
        """Start reading every partition of ``position`` at its next offset (errors as
        ``seek``'s)."""
        self._check_partitions(len(position.partitions))
        for partition, cursor in enumerate(position.partitions):
            self._check_held(partition, cursor.next_offset)
        self._consumer.assign(
            [
                TopicPartition(self.topic, partition, cursor.next_offset)
                for partition, cursor in enumerate(position.partitions)
            ]
        )

    def _check_partitions(self, stored: int = 1) -> None:
        count = self.partitions()
        if count > 1:
            raise StreamError(partition_mismatch(self.topic, count))
        if stored > 1:
            raise StreamError(
                f"the stored position names {stored!r} partitions of topic {self.topic!r}, "
                f"which has {count!r}; reload the target from a fresh snapshot"
            )

    def _check_held(self, partition: int, offset: int) -> None:
        low, high = self.watermarks(partition)
        if not low <= offset <= high:
            raise StreamError(
                f"topic {self.topic!r} holds offsets {low!r} to {high - 1!r}, the worker must "
                f"resume at offset {offset!r}: the messages in between were deleted (retention) "
                "or the topic was recreated; reload the target from a fresh snapshot"
            )

    def read(self, max_messages: int, timeout: float) -> list[tuple[int, stream_pb2.Message]]:
        """Up to ``max_messages`` decoded messages in offset order.

        Waits at most ``timeout`` for the first message, then takes what has
        arrived and what keeps arriving (each wait at most ``DRAIN_SECONDS``):
        a read ends once the partition is drained or ``max_messages`` are in,
        not after ``timeout`` whatever arrived.
        """
        first = self._consumer.poll(timeout)
        received = [] if first is None else [first]
        while received and len(received) < max_messages:
            more = self._consumer.consume(
                num_messages=max_messages - len(received), timeout=DRAIN_SECONDS
            )
            if not more:
                break
            received.extend(more)
        messages = []
        for record in received:
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.code() == KafkaError._AUTO_OFFSET_RESET:
                    raise StreamError(
                        f"topic {self.topic!r} no longer holds the offset being read: {error}; "
                        "reload the target from a fresh snapshot"
                    )
                if error.fatal():
                    raise StreamError(f"reading topic {self.topic!r} failed: {error}")
                raise BrokerUnavailable(f"reading topic {self.topic!r} failed: {error}")
            offset = record.offset()
            if offset is None:
                raise StreamError(f"message of topic {self.topic!r} has no offset")
            try:
                message = stream_pb2.Message.FromString(record.value() or b"")
            except DecodeError as decode_error:
                raise StreamError(
                    f"message at offset {offset!r} of topic {self.topic!r} is not a pgshovel "
                    f"stream message: {decode_error}"
                ) from decode_error
            messages.append((offset, message))
        return messages

    def close(self) -> None:
        self._consumer.close()
