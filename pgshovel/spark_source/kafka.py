"""The source's Kafka consumer: chosen partitions of a set topic, each from an offset.

``pgshovel.stream.reader.KafkaReader`` with the source's way to start: each
partition assigned at the offset a Spark offset or range names (no consumer
group offsets; an offset the topic no longer holds is an error naming the
query's remedy, never a silent jump). Reading, decoding and the partition
metadata are the reader's: ``read_records`` returns ``(partition, offset,
Message)`` triples, each partition in offset order.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import TopicPartition

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.reader import KafkaReader

__all__ = ["PartitionsReader", "Record"]

Record = tuple[int, int, stream_pb2.Message]


class PartitionsReader(KafkaReader):
    """Reads chosen partitions of ``topic`` from chosen offsets (module documentation)."""

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
