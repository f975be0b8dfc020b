"""relay.yml validation: every mistake names the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.relay import config

WRITER = {
    "path": "pgshovel.relay.kafka:KafkaWriter",
    "configuration": {"bootstrap_servers": "127.0.0.1:9092"},
}


def test_defaults() -> None:
    parsed = config.parse_configuration({"writer": WRITER}, "relay.yml")
    assert parsed.on_error == "exit"
    assert 0 < parsed.tick_interval < 1, "sub-second ticks by default"
    assert parsed.metrics_port is None


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({}, "missing 'writer'"),
        ({"writer": WRITER, "tick_intervall": 1}, "tick_intervall: unknown key"),
        ({"writer": WRITER, "on_error": "ignore"}, "on_error: expected one of ['exit', 'log']"),
        ({"writer": WRITER, "fetch_size": 0}, "fetch_size: must be >= 1"),
        ({"writer": WRITER, "fetch_size": 1.5}, "fetch_size: expected an integer"),
        ({"writer": WRITER, "tick_interval": "fast"}, "tick_interval: expected a number"),
        ({"writer": WRITER, "metrics_port": "x"}, "metrics_port: expected a port number"),
        ([1, 2], "expected a mapping"),
    ],
)
def test_errors_name_the_key(document: object, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        config.parse_configuration(document, "relay.yml")
    assert str(raised.value).startswith("relay.yml:")
    assert fragment in str(raised.value)


def test_load_expands_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "relay.yml"
    path.write_text(
        "writer:\n"
        "  path: pgshovel.relay.kafka:KafkaWriter\n"
        "  configuration:\n"
        "    bootstrap_servers: ${TEST_BOOTSTRAP}\n"
        "    properties: {broker.version.fallback: '${TEST_FALLBACK:-0.10.0}'}\n"
        "on_error: log\n"
    )
    monkeypatch.setenv("TEST_BOOTSTRAP", "127.0.0.1:1234")
    monkeypatch.delenv("TEST_FALLBACK", raising=False)
    parsed = config.load_configuration(path)
    assert parsed.writer.configuration["bootstrap_servers"] == "127.0.0.1:1234"
    assert parsed.writer.configuration["properties"] == {"broker.version.fallback": "0.10.0"}
    assert parsed.on_error == "log"


def test_missing_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "relay.yml"
    path.write_text("writer: {path: '${NOT_SET_ANYWHERE}'}\n")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigurationError, match="'NOT_SET_ANYWHERE' is not set"):
        config.load_configuration(path)


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "relay.yml"
    path.write_text("writer: [unclosed\n")
    with pytest.raises(ConfigurationError, match=r"relay\.yml: invalid YAML"):
        config.load_configuration(path)


def test_table_topics_are_configured_under_the_writer() -> None:
    writer = {
        "path": WRITER["path"],
        "configuration": {
            "bootstrap_servers": "127.0.0.1:9092",
            "set_topic": False,
            "table_topics": {"prefix": "shop", "format": "debezium", "database": "orders"},
        },
    }
    writer["configuration"]["table_topics"]["exclude"] = [  # type: ignore[index]
        {"name": "transaction"},
        {"schema": "a", "name": "b"},
    ]
    built = config.parse_configuration({"writer": writer}, "relay.yml").writer.build()
    excluded = built.table_topics.exclude  # type: ignore[attr-defined]
    assert [(entry.schema_, entry.name) for entry in excluded] == [
        ("public", "transaction"),
        ("a", "b"),
    ]
    assert built.set_topic is False  # type: ignore[attr-defined]
    assert built.table_topics.format == "debezium"  # type: ignore[attr-defined]
    assert built.table_topics.prefix == "shop"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("table_topics", "fragment"),
    [
        ({"format": "avro"}, "table_topics.format: expected one of ['json', 'debezium']"),
        ({"snapshots": True}, "table_topics.snapshots: unknown key"),
        ({"partitions": 0}, "table_topics.partitions: must be >= 1"),
        ({"snapshot_chunk_rows": 0}, "table_topics.snapshot_chunk_rows: must be >= 1"),
        ({"exclude": [{"schema": "public"}]}, "table_topics.exclude[0]: missing 'name'"),
        ({"exclude": [{"name": "t", "table": "t"}]}, "table_topics.exclude[0].table: unknown"),
    ],
)
def test_table_topic_mistakes_name_the_key(table_topics: object, fragment: str) -> None:
    writer = {
        "path": WRITER["path"],
        "configuration": {"bootstrap_servers": "b:9092", "table_topics": table_topics},
    }
    with pytest.raises(ConfigurationError) as raised:
        config.parse_configuration({"writer": writer}, "relay.yml")
    assert fragment in str(raised.value)


def test_a_writer_that_publishes_nothing_is_refused() -> None:
    writer = {
        "path": WRITER["path"],
        "configuration": {"bootstrap_servers": "b:9092", "set_topic": False},
    }
    with pytest.raises(ConfigurationError, match="publishes nothing"):
        config.parse_configuration({"writer": writer}, "relay.yml").writer.build()


def test_the_transaction_topic_needs_the_debezium_format() -> None:
    writer = {
        "path": WRITER["path"],
        "configuration": {
            "bootstrap_servers": "b:9092",
            "table_topics": {"format": "json", "transaction_topic": True},
        },
    }
    with pytest.raises(ConfigurationError, match="transaction_topic needs format: debezium"):
        config.parse_configuration({"writer": writer}, "relay.yml")
