"""The source's Kafka consumer: every partition of a set topic, each from an offset, by hand.

``pgshovel.stream.reader.KafkaReader`` reads a one-partition set topic; the
source also reads partitioned ones (``partitions: N`` in relay.yml), so it
assigns partitions itself, with the same settings (no consumer group offsets,
an offset the topic no longer holds is an error, never a silent jump) and the
same decoding, and returns ``(partition, offset, Message)`` triples, each
partition in offset order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from google.protobuf.message import DecodeError

from pgshovel.errors import BrokerUnavailable, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.reader import DRAIN_SECONDS, consumer_settings

__all__ = ["PartitionsReader", "Record"]

logger = logging.getLogger(__name__)

Record = tuple[int, int, stream_pb2.Message]


class PartitionsReader:
    """Reads chosen partitions of ``topic`` from chosen offsets (module documentation)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        properties: Mapping[str, str],
        timeout: float = 30.0,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        self._consumer = Consumer(consumer_settings(bootstrap_servers, properties), logger=logger)

    def partitions(self) -> int:
        """How many partitions the topic has (0 when the broker does not know it)."""
        try:
            metadata = self._consumer.list_topics(timeout=self.timeout)
        except KafkaException as error:
            raise BrokerUnavailable(
                f"cannot read the metadata of topic {self.topic!r}: {error}; check that the "
                "brokers are reachable"
            ) from error
        found = metadata.topics.get(self.topic)
        return 0 if found is None else len(found.partitions)

    def watermarks(self, partition: int) -> tuple[int, int]:
        """The lowest offset ``partition`` holds and the offset of its next message."""
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

    def assign(self, offsets: Mapping[int, int]) -> None:
        """Read each partition of ``offsets`` from its offset; an error if the topic no longer
        (or not yet) holds it."""
        for partition, offset in offsets.items():
            low, high = self.watermarks(partition)
            if not low <= offset <= high:
                raise StreamError(
                    f"topic {self.topic!r} partition {partition!r} holds offsets {low!r} to "
                    f"{high - 1!r}, the query must read from offset {offset!r}: the messages in "
                    "between were deleted (retention) or the topic was recreated; restart the "
                    "query with a new checkpoint location from 'earliest' or 'latest'"
                )
        self._consumer.assign(
            [TopicPartition(self.topic, partition, offset) for partition, offset in offsets.items()]
        )

    def read(self, max_messages: int, timeout: float) -> list[Record]:
        """Up to ``max_messages`` decoded messages; waits at most ``timeout`` for the first."""
        first = self._consumer.poll(timeout)
        received = [] if first is None else [first]
        while received and len(received) < max_messages:
            more = self._consumer.consume(
                num_messages=max_messages - len(received), timeout=DRAIN_SECONDS
            )
            if not more:
                break
            received.extend(more)
        records: list[Record] = []
        for record in received:
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal() or error.code() == KafkaError._AUTO_OFFSET_RESET:
                    raise StreamError(f"reading topic {self.topic!r} failed: {error}")
                raise BrokerUnavailable(f"reading topic {self.topic!r} failed: {error}")
            partition, offset = record.partition(), record.offset()
            if partition is None or offset is None:
                raise StreamError(f"message of topic {self.topic!r} has no offset")
            try:
                message = stream_pb2.Message.FromString(record.value() or b"")
            except DecodeError as decode_error:
                raise StreamError(
                    f"message at offset {offset!r} of partition {partition!r} of topic "
                    f"{self.topic!r} is not a pgshovel stream message: {decode_error}"
                ) from decode_error
            records.append((partition, offset, message))
        return records

    def close(self) -> None:
        self._consumer.close()
