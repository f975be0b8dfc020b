"""Each process's own login to the source: the set's DSN with ``source_connection``'s keywords."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg2.extensions import parse_dsn

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.relay import config as relay_config
from pgshovel.replication.config import load_configuration
from pgshovel.source import source_dsn, with_source_connection

SET_DSN = "host=db.internal port=5433 dbname=shop user=pgshovel_admin sslmode=verify-full"


def test_keywords_replace_and_extend_the_set_dsn() -> None:
    merged = parse_dsn(
        source_dsn(SET_DSN, "user=pgshovel_relay passfile=/etc/pgshovel/relay.pgpass")
    )
    assert merged == {
        "host": "db.internal",
        "port": "5433",
        "dbname": "shop",
        "user": "pgshovel_relay",
        "sslmode": "verify-full",
        "passfile": "/etc/pgshovel/relay.pgpass",
    }


def test_uri_forms_and_services_merge_too() -> None:
    merged = parse_dsn(
        source_dsn("postgresql://admin@db:5432/shop?sslmode=require", "service=relay user=relay")
    )
    assert merged == {
        "host": "db",
        "port": "5432",
        "dbname": "shop",
        "sslmode": "require",
        "service": "relay",
        "user": "relay",
    }
    assert source_dsn(SET_DSN, "") == SET_DSN
    assert source_dsn(SET_DSN, "   ") == SET_DSN


def test_malformed_strings_are_refused_without_showing_them() -> None:
    with pytest.raises(ConfigurationError, match="source_connection is not a libpq") as raised:
        source_dsn(SET_DSN, "user=relay hunter2")
    assert "hunter2" not in str(raised.value)
    with pytest.raises(ConfigurationError, match=r"database\.dsn is not a libpq"):
        source_dsn("host='unterminated", "user=relay")


def test_the_set_configuration_is_copied_not_changed() -> None:
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.database.dsn = SET_DSN
    configuration.tables.add(schema="public", name="orders")
    mine = with_source_connection(configuration, "user=pgshovel_worker")
    assert parse_dsn(mine.database.dsn)["user"] == "pgshovel_worker"
    assert configuration.database.dsn == SET_DSN
    assert list(mine.tables) == list(configuration.tables)
    assert with_source_connection(configuration, "") is configuration


WRITER = {
    "path": "pgshovel.relay.kafka:KafkaWriter",
    "configuration": {"bootstrap_servers": "127.0.0.1:9092"},
}


def test_relay_yml_takes_a_source_connection_and_never_shows_it() -> None:
    assert (
        relay_config.parse_configuration(
            {"writer": WRITER}, "relay.yml"
        ).source_connection.get_secret_value()
        == ""
    )
    parsed = relay_config.parse_configuration(
        {"writer": WRITER, "source_connection": "user=relay password=hunter2"}, "relay.yml"
    )
    assert parsed.source_connection.get_secret_value() == "user=relay password=hunter2"
    assert "hunter2" not in repr(parsed) + str(parsed)
    with pytest.raises(ConfigurationError) as raised:
        relay_config.parse_configuration(
            {"writer": WRITER, "source_connection": "hunter2"}, "relay.yml"
        )
    message = str(raised.value)
    assert message.startswith("relay.yml: source_connection: expected libpq keywords")
    assert "hunter2" not in message


REPLICATION = """
loader: {path: pgshovel.replication.loaders:PostgresSnapshotLoader}
stream:
  path: pgshovel.replication.streams:KafkaStream
  configuration: {bootstrap_servers: 127.0.0.1:9092}
target:
  path: pgshovel.replication.targets.postgresql:PostgresTarget
  configuration: {dsn: dbname=copy}
"""


def test_replication_yml_takes_a_source_connection_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "replication.yml"
    path.write_text(REPLICATION)
    assert load_configuration(path).source_connection == ""
    monkeypatch.setenv("WORKER_PGPASS", "/run/secrets/worker.pgpass")
    path.write_text(
        REPLICATION + 'source_connection: "user=pgshovel_worker passfile=${WORKER_PGPASS}"\n'
    )
    configuration = load_configuration(path)
    assert configuration.source_connection == (
        "user=pgshovel_worker passfile=/run/secrets/worker.pgpass"
    )
    assert "pgshovel_worker" not in repr(configuration)
    path.write_text(REPLICATION + "source_connection: 'user'\n")
    with pytest.raises(ConfigurationError, match=r"replication.yml: source_connection: expected"):
        load_configuration(path)
