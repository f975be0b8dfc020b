"""The set topic: the set's protobuf stream, one partition, every message in order.

The set topic must have exactly one partition (the stream is totally ordered):
every time the producer connects (at start, after a failure) the output reads
the topic's metadata and refuses a topic with more than one, a
``ConfigurationError`` that ends the relay. A push is produced all or nothing:
every message is serialized and checked against the producer's size limit
before the first is queued, so after a data error the set topic holds exactly
what earlier pushes produced and the relay can roll the batch back.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.producer import KafkaProducer
from pgshovel.stream.last_batch import last_committed_begin
from pgshovel.stream.reader import KafkaReader, partition_mismatch
from pgshovel.stream.typed_json import dumps, key_object

__all__ = ["SetTopicOutput", "describe_message"]


def describe_message(value: bytes | None) -> str | None:
    """The table and key of a serialized set-topic message (for errors), if it holds a row."""
    if value is None:
        return None
    try:
        message = stream_pb2.Message.FromString(value)
    except DecodeError:
        return None
    operation = message.operation
    if operation.WhichOneof("operation") != "mutation":
        return None
    mutation = operation.mutation
    keys = list(mutation.key_columns)
    row = mutation.new if mutation.HasField("new") else mutation.old
    try:
        key = dumps(key_object(row, keys)) if keys else "(none: the table has no key)"
    except (KeyError, ValueError):
        key = "(not in the row)"
    return f"table {mutation.schema}.{mutation.table}, key {key}, batch {operation.batch.id}"


class SetTopicOutput:
    """The ``Output`` that publishes every message, serialized, to the set topic."""

    def __init__(self, producer: KafkaProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self._checked = 0

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """The set topic needs nothing of the source."""

    def check_partitions(self) -> None:
        """Refuse a set topic with more than one partition (once per producer connection)."""
        producer = self.producer
        producer.connection()
        if self._checked == producer.generation:
            return
        count = producer.partitions(self.topic)
        if count != 1:
            raise ConfigurationError(partition_mismatch(self.topic, count))
        self._checked = producer.generation

    def push(self, messages: Sequence[stream_pb2.Message]) -> int:
        self.check_partitions()
        return self.producer.produce_values(
            self.topic, [message.SerializeToString() for message in messages]
        )

    def acknowledged(self) -> int:
        return 0

    def abandon(self) -> None:
        """Nothing is kept between pushes."""

    def describe(self, topic: str, key: bytes | None, value: bytes | None) -> str | None:
        return describe_message(value) if topic == self.topic else None

    def last_committed_begin(self, timeout: float) -> stream_pb2.Message | None:
        """The Begin of the last batch the set topic holds whole (None: none yet)."""
        producer = self.producer
        reader = KafkaReader(producer.bootstrap_servers, self.topic, producer.properties, timeout)
        try:
            return last_committed_begin(reader)
        finally:
            reader.close()

    def close(self) -> None:
        """Nothing runs in the background."""
