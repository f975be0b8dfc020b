"""The set topic: the set's protobuf stream, one partition, every message in order.

The set topic has exactly the partitions the writer is configured with (one
unless ``partitions`` says more; a partitioned stream frames every batch in
every partition, see ``pgshovel.relay.framing``): every time the producer
connects (at start, after a failure) the output reads the topic's metadata and
refuses another count, a ``ConfigurationError`` that ends the relay; a
partitioned topic that does not exist yet is created through the admin API
where the broker has one. A push is produced all or nothing:
every message is serialized and checked against the producer's size limit
before the first is queued, so after a data error the set topic holds exactly
what earlier pushes produced and the relay can roll the batch back.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError

from pgshovel.errors import CodecError, ConfigurationError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.producer import KafkaProducer
from pgshovel.stream.last_batch import last_committed_begin
from pgshovel.stream.reader import KafkaReader, partition_mismatch
from pgshovel.stream.rows import to_mutations
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
    kind = operation.WhichOneof("operation")
    if kind == "rows":
        return _describe_rows(operation.rows, operation.batch.id)
    if kind != "mutation":
        return None
    return _describe_mutation(operation.mutation, operation.batch.id)


def _describe_mutation(mutation: stream_pb2.Mutation, batch: int) -> str:
    keys = list(mutation.key_columns)
    row = mutation.new if mutation.HasField("new") else mutation.old
    try:
        key = dumps(key_object(row, keys)) if keys else "(none: the table has no key)"
    except (KeyError, ValueError):
        key = "(not in the row)"
    return f"table {mutation.schema}.{mutation.table}, key {key}, batch {batch}"


def _describe_rows(rows: stream_pb2.MutationBatch, batch: int) -> str | None:
    """The table and key of a rows message's largest row change (what made it too large)."""
    if not rows.changes:
        return None
    change = max(rows.changes, key=lambda item: len(item.old) + len(item.new))
    single = stream_pb2.MutationBatch(tables=rows.tables, changes=[change], count=1)
    try:
        mutation = next(to_mutations(single))
    except (CodecError, StopIteration):
        return None
    return _describe_mutation(mutation, batch)


class SetTopicOutput:
    """The ``Output`` that publishes every message, serialized, to the set topic."""

    def __init__(self, producer: KafkaProducer, topic: str, partitions: int = 1) -> None:
        self.producer = producer
        self.topic = topic
        self.partitions = partitions
        self._checked = 0

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """The set topic needs nothing of the source."""

    def check_partitions(self) -> None:
        """Refuse a set topic with another partition count (once per producer connection)."""
        producer = self.producer
        producer.connection()
        if self._checked == producer.generation:
            return
        if self.partitions > 1 and not producer.legacy_broker:
            producer.ensure_topic(
                self.topic,
                cleanup_policy="delete",
                partitions=self.partitions,
                replication_factor=1,
            )
        count = producer.partitions(self.topic)
        if count != self.partitions:
            if self.partitions == 1:
                raise ConfigurationError(partition_mismatch(self.topic, count))
            raise ConfigurationError(
                f"topic {self.topic!r} has {count!r} partition(s), the writer is configured with "
                f"partitions: {self.partitions!r}; create the topic with {self.partitions!r} "
                "partitions before the relay first writes it (kafka-topics.sh --create --topic "
                f"{self.topic} --partitions {self.partitions} ...), or configure the count it "
                "has; a stream's partitions never change under its readers: a new count needs a "
                "new topic and targets loaded again"
            )
        self._checked = producer.generation

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> int:
        self.check_partitions()
        return self.producer.produce_values(
            self.topic, [message.SerializeToString() for message in messages], partitions
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
