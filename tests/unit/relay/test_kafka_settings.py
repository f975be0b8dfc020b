"""Producer settings: ordered and durable whatever the broker, user settings passed through."""

from __future__ import annotations

import pytest

from pgshovel.relay.producer import producer_settings


def test_modern_broker_gets_the_idempotent_producer() -> None:
    settings = producer_settings("b:9092", {})
    assert settings["acks"] == "all"
    assert settings["enable.idempotence"] == "true"
    assert settings["bootstrap.servers"] == "b:9092"
    assert "max.in.flight.requests.per.connection" not in settings


def test_legacy_broker_keeps_one_request_in_flight() -> None:
    settings = producer_settings(
        "b:9092", {"api.version.request": False, "broker.version.fallback": "0.9.0.1"}
    )
    assert settings["enable.idempotence"] == "false"
    assert settings["max.in.flight.requests.per.connection"] == "1"
    assert settings["api.version.request"] == "false"
    assert settings["broker.version.fallback"] == "0.9.0.1"


def test_no_message_timeout_so_failures_leave_no_gap() -> None:
    assert producer_settings("b:9092", {})["message.timeout.ms"] == "0"


def test_user_properties_win() -> None:
    settings = producer_settings("b:9092", {"linger.ms": 50, "compression.type": "snappy"})
    assert settings["linger.ms"] == "50"
    assert settings["compression.type"] == "snappy"


def test_an_unreachable_broker_fails_the_partition_check_as_transient() -> None:
    """The set topic's partition check waits at most flush_timeout, then is retried."""
    import time

    from pgshovel.errors import BrokerUnavailable
    from pgshovel.protocol import stream_pb2
    from pgshovel.relay.kafka import KafkaWriter

    writer = KafkaWriter("127.0.0.1:9", topic="t", flush_timeout=0.5)
    for _attempt in range(2):
        started = time.monotonic()
        try:
            writer.push([stream_pb2.Message()])
        except BrokerUnavailable as error:
            assert "cannot read the metadata of topic 't'" in str(error)
        else:
            raise AssertionError("a push to an unreachable broker must fail")
        assert time.monotonic() - started < 5
    writer.close()


def test_a_failed_flush_does_not_poison_the_next_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a broker outage the writer is usable again: purge reports are forgotten."""
    from pgshovel.errors import BrokerUnavailable
    from pgshovel.protocol import stream_pb2
    from pgshovel.relay import producer as producer_module
    from pgshovel.relay.kafka import KafkaWriter

    # The partition check has its own test; here the topic passes it.
    monkeypatch.setattr(producer_module, "topic_partitions", lambda *_arguments: 1)

    # Nothing listens on port 9: every message stays queued until the flush gives up.
    writer = KafkaWriter("127.0.0.1:9", topic="t", flush_timeout=0.2)
    message = stream_pb2.Message()
    message.header.sequence = 1
    for _attempt in range(2):
        writer.push([message])
        try:
            writer.flush()
        except BrokerUnavailable as error:
            assert "did not acknowledge 1 message(s)" in str(error)
        else:
            raise AssertionError("flush to an unreachable broker must fail")
    writer.close()


def test_a_table_topic_data_error_leaves_nothing_on_the_set_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The relay rewinds its sequence after a data error: the set topic must not hold any of
    the push that failed (table records come first, so the error comes before them)."""
    from pgshovel.errors import SchemaError
    from pgshovel.protocol import stream_pb2
    from pgshovel.relay import producer as producer_module
    from pgshovel.relay.config import TableTopics
    from pgshovel.relay.kafka import KafkaWriter
    from pgshovel.stream.codec import to_value

    monkeypatch.setattr(producer_module, "topic_partitions", lambda *_arguments: 1)
    writer = KafkaWriter("127.0.0.1:9", table_topics=TableTopics(snapshot=False), flush_timeout=0.2)
    writer.bind("c.s")
    begin = stream_pb2.Message()
    begin.operation.begin.set_version = "v"
    bad = stream_pb2.Message()
    mutation = bad.operation.mutation
    mutation.schema, mutation.table = "public", "no spaces allowed"
    mutation.operation = stream_pb2.Mutation.INSERT
    mutation.key_columns.append("id")
    mutation.new.columns.add(name="id", value=to_value("int4", "1"))
    produced: list[str | None] = []
    monkeypatch.setattr(
        writer.producer, "_delivered", lambda _error, message: produced.append(message.topic())
    )
    with pytest.raises(SchemaError, match="is not a legal kafka topic name"):
        writer.push([begin, bad])
    producer = writer.producer._producer
    assert producer is not None
    # Every message still queued is reported (as purged) through the delivery callback.
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(0)
    assert produced == []
    # The check can see a message: a push that works queues the set topic's Begin.
    writer.push([begin])
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(0)
    assert produced == ["c.s"]
    writer.reset()
