"""A message larger than Kafka takes is a data error naming table, key and size, raised before
anything of the push reaches the set topic (no broker needed: the producer refuses it itself)."""

from __future__ import annotations

import pytest

from pgshovel.errors import MessageTooLarge
from pgshovel.protocol import stream_pb2
from pgshovel.relay import producer as producer_module
from pgshovel.relay.kafka import KafkaWriter
from pgshovel.relay.table_topics import TableTopics
from pgshovel.stream.codec import to_value


def big_insert(size: int, table: str = "big") -> stream_pb2.Message:
    message = stream_pb2.Message()
    message.operation.batch.id = 41
    mutation = message.operation.mutation
    mutation.schema, mutation.table = "public", table
    mutation.operation = stream_pb2.Mutation.INSERT
    mutation.key_columns.append("id")
    mutation.new.columns.add(name="id", value=to_value("int4", "7"))
    mutation.new.columns.add(name="body", value=to_value("text", "x" * size))
    return message


def small_insert() -> stream_pb2.Message:
    return big_insert(10, table="small")


def produced_topics(writer: KafkaWriter, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    produced: list[str | None] = []
    monkeypatch.setattr(
        writer.producer, "_delivered", lambda _error, message: produced.append(message.topic())
    )
    return produced


def drain(writer: KafkaWriter) -> None:
    """Report every message still queued (as purged) through the delivery callback."""
    producer = writer.producer._producer
    if producer is not None:
        producer.purge(in_queue=True, in_flight=True)
        producer.flush(0)


def test_a_set_topic_message_over_the_producer_limit_stops_before_anything_of_the_push(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producer_module, "topic_partitions", lambda *_arguments: 1)
    writer = KafkaWriter("127.0.0.1:9", topic="c.s", flush_timeout=0.2)
    produced = produced_topics(writer, monkeypatch)
    with pytest.raises(MessageTooLarge) as caught:
        writer.push([small_insert(), big_insert(2_000_000), small_insert()])
    drain(writer)
    assert produced == []
    message = str(caught.value)
    assert message.startswith('table public.big, key {"id":7}, batch 41: a message of 20000'), (
        message
    )
    assert "bytes to topic 'c.s' is larger than the producer sends (999964 bytes" in message
    for setting in (
        "message.max.bytes in the relay's writer properties",
        "replica.fetch.max.bytes",
        "max.message.bytes",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
    ):
        assert setting in message
    assert "\n" not in message
    assert not caught.value.dropped
    # The writer goes on: a push of messages within the limit is queued whole.
    writer.push([small_insert(), small_insert()])
    drain(writer)
    assert produced == ["c.s", "c.s"]
    writer.reset()


def test_raising_the_producer_limit_lets_the_message_through_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a raised limit a large message goes out, alone: what precedes it is acknowledged
    before it is produced, and what follows only after it is (librdkafka's in-process mock
    cluster stands in for the broker)."""
    monkeypatch.setattr(producer_module, "topic_partitions", lambda *_arguments: 1)
    writer = KafkaWriter(
        "127.0.0.1:9",
        topic="c.s",
        properties={"message.max.bytes": 4_000_000, "test.mock.num.brokers": 1},
        flush_timeout=30.0,
    )
    events: list[str] = []
    monkeypatch.setattr(
        writer.producer,
        "_delivered",
        lambda error, message: events.append(
            f"acked {len(message.value())}" if error is None else str(error)
        ),
    )
    flush = writer.producer.flush

    def recorded_flush() -> None:
        events.append("flush")
        flush()

    monkeypatch.setattr(writer.producer, "flush", recorded_flush)
    small = len(small_insert().SerializeToString())
    big = len(big_insert(2_000_000).SerializeToString())
    writer.push([small_insert(), big_insert(2_000_000), small_insert()])
    writer.flush()
    # The first small message is acknowledged before the big one is produced, the big one
    # before anything after it; the last small one with the batch's flush.
    assert events[:4] == ["flush", f"acked {small}", "flush", f"acked {big}"], events
    assert events[4:].count(f"acked {small}") == 1 and events[-1] == "flush", events
    writer.close()


def test_a_table_topic_record_over_the_limit_names_its_table_and_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producer_module, "topic_partitions", lambda *_arguments: 1)
    writer = KafkaWriter(
        "127.0.0.1:9",
        table_topics=TableTopics(snapshot=False, create=False),
        flush_timeout=0.2,
    )
    writer.bind("c.s")
    monkeypatch.setattr(writer.producer, "ensure_topic", lambda *_arguments, **_settings: None)
    produced = produced_topics(writer, monkeypatch)
    with pytest.raises(MessageTooLarge) as caught:
        writer.push([small_insert(), big_insert(1_500_000)])
    drain(writer)
    # The table records before it are queued (table topics are at least once); the set
    # topic holds nothing of the push.
    assert produced == ["c.s.small"]
    assert str(caught.value).startswith('table public.big, key {"id":7}: a message of 1500'), (
        caught.value
    )
    assert "to topic 'c.s.big'" in str(caught.value)
    writer.reset()
