"""The table-topics output against an in-memory producer: topic names it refuses, tables it leaves
out, and what one mutation becomes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from pgshovel.abc import Output, RecordProducer, TopicReader
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.table_topics import TableTopics, TableTopicsOutput, _output
from pgshovel.stream.codec import to_value

SET_TOPIC = "c.s"


class Producer:
    """Records what the output produces; every topic exists."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes | None, bytes | None]] = []
        self.flushes = 0

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None) -> int:
        self.produced.append((topic, key, value))
        return len(value or b"")

    def produce_values(self, topic: str, values: Sequence[bytes]) -> int:
        return sum(self.produce(topic, value) for value in values)

    def flush(self) -> None:
        self.flushes += 1

    def ensure_topic(self, topic: str, **_settings: Any) -> None:
        pass

    def live_keys(self, topic: str) -> dict[bytes, bytes]:
        return {}

    def holds_messages(self, topic: str) -> bool:
        return False


def output(producer: Producer | None = None, **settings: Any) -> TableTopicsOutput:
    producer = producer or Producer()
    assert isinstance(producer, RecordProducer)
    assert isinstance(producer, TopicReader)
    result = TableTopicsOutput(
        TableTopics(snapshot=False, **settings), producer, producer, SET_TOPIC, SET_TOPIC
    )
    assert isinstance(result, Output)
    return result


def configuration(*tables: tuple[str, str]) -> configuration_pb2.ReplicationSetConfiguration:
    found = configuration_pb2.ReplicationSetConfiguration()
    found.database.dsn = "dbname=src"
    for schema, name in tables:
        found.tables.add(schema=schema, name=name)
    return found


def insert(schema: str, table: str, id_: int = 1) -> stream_pb2.Message:
    message = stream_pb2.Message()
    mutation = message.operation.mutation
    mutation.schema, mutation.table = schema, table
    mutation.operation = stream_pb2.Mutation.INSERT
    mutation.key_columns.append("id")
    mutation.new.columns.add(name="id", value=to_value("int4", str(id_)))
    return message


def announce(schema: str, table: str) -> stream_pb2.Message:
    message = stream_pb2.Message()
    change = message.operation.schema_change
    change.kind = stream_pb2.SchemaChange.ANNOUNCE
    change.schema, change.table = schema, table
    return message


def removal(schema: str, table: str) -> stream_pb2.Message:
    message = stream_pb2.Message()
    change = message.operation.schema_change
    change.kind = stream_pb2.SchemaChange.REMOVE
    change.schema, change.table = schema, table
    return message


def test_two_tables_in_one_topic_are_refused_when_the_source_is_attached() -> None:
    """A set from before ``set create`` refused such pairs still never mixes two tables."""
    with pytest.raises(ConfigurationError) as caught:
        output(prefix="shop").attach_source(
            "dbname=src", configuration(("a", "b"), ("public", "items"), ("public", "a.b"))
        )
    assert str(caught.value) == (
        "tables 'a'.'b' and 'public'.'a.b' both publish into table topic 'shop.a.b'; leave one "
        "of them out of the table topics (relay.yml table_topics.exclude: [{schema: public, "
        "name: a.b}]) or rename one, then restart the relay"
    )


def test_the_remedy_leaves_the_excluded_table_out_and_publishes_the_other() -> None:
    producer = Producer()
    writer = output(producer, prefix="shop", exclude=[{"schema": "public", "name": "a.b"}])
    writer.attach_source("dbname=src", configuration(("a", "b"), ("public", "a.b")))
    writer.push([insert("public", "a.b", 1), insert("a", "b", 2)])
    assert producer.produced == [("shop.a.b", b'{"id":2}', b'{"id":2}')]


def test_a_table_in_the_debezium_transaction_topic_is_refused() -> None:
    settings: dict[str, Any] = {"prefix": "shop", "format": "debezium", "transaction_topic": True}
    with pytest.raises(ConfigurationError) as caught:
        output(**settings, database="db").attach_source(
            "dbname=src", configuration(("public", "transaction"))
        )
    assert str(caught.value) == (
        "table 'public'.'transaction' and debezium's transaction topic (table_topics."
        "transaction_topic: true) both publish into topic 'shop.transaction'; set "
        "table_topics.transaction_topic: false or leave the table out of the table topics "
        "(relay.yml table_topics.exclude: [{schema: public, name: transaction}]), then "
        "restart the relay"
    )
    # Another schema's table "transaction" has a topic of its own.
    output(**settings, database="db").attach_source(
        "dbname=src", configuration(("sales", "transaction"))
    )


def test_a_table_announced_into_a_reserved_topic_is_refused_at_its_announcement() -> None:
    producer = Producer()
    writer = output(producer, prefix="", database="db")
    writer.attach_source("dbname=src", configuration(("public", "items")))
    with pytest.raises(ConfigurationError, match=r"table 'c'\.'s' and the set topic both publish"):
        writer.push([announce("c", "s")])
    with pytest.raises(
        ConfigurationError, match=r"and the set topic both publish into topic 'c\.s'"
    ):
        writer.push([insert("c", "s")])
    assert producer.produced == []


def test_a_table_met_first_in_a_mutation_is_claimed_then() -> None:
    producer = Producer()
    writer = output(producer, prefix="shop")
    writer.attach_source("dbname=src", configuration(("public", "a.b")))
    with pytest.raises(
        ConfigurationError, match=r"tables 'public'\.'a\.b' and 'a'\.'b' both publish"
    ):
        writer.push([insert("a", "b")])
    # Once the first table left the set, its topic is free for the other.
    writer.push([removal("public", "a.b"), insert("a", "b", 3)])
    assert producer.produced == [("shop.a.b", b'{"id":3}', b'{"id":3}')]


def test_debezium_without_database_takes_the_source_database_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def current_database(dsn: str) -> str:
        asked.append(dsn)
        return "src"

    monkeypatch.setattr(_output, "_current_database", current_database)
    producer = Producer()
    writer = output(producer, prefix="shop", format="debezium")
    with pytest.raises(ConfigurationError, match=r"set table_topics\.database"):
        writer.push([insert("public", "items")])
    writer.attach_source("dbname=src host=h", configuration(("public", "items")))
    writer.push([insert("public", "items")])
    assert asked == ["dbname=src host=h"]
    (_topic, _key, value), *_ = producer.produced
    assert value is not None and b'"db":"src"' in value
    # A configured name wins, and nothing is asked.
    named = output(Producer(), prefix="shop", format="debezium", database="shop")
    named.attach_source("dbname=src", configuration(("public", "items")))
    assert asked == ["dbname=src host=h"]
