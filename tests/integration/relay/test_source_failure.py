"""The relay's source connections are killed: a transient fault, retried; nothing is lost.

Whatever ``on_error`` says (it governs data errors only), the relay reconnects
with backoff and keeps its leadership: the epoch does not move.
"""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest

from pgshovel.sandbox import SandboxConnection
from tests.integration.relay._relay import (
    RelayProcess,
    queue_drained,
    read_topic,
    replay,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay.test_kafka_outage import insert_rows
from tests.integration.relay.test_relay import prepare, source_rows

pytestmark = [pytest.mark.integration]


def kill_relay_backends(dsn: str) -> int:
    connection = psycopg2.connect(dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name LIKE 'pgshovel-relay %' AND datname = current_database()"
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("on_error", ["exit", "log"])
def test_source_connection_lost(
    on_error: str,
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    config = write_relay_yml(tmp_path, sandbox, on_error=on_error, retry_interval=0.5)
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        insert_rows(database, 1, 100)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", relay.output)
        assert kill_relay_backends(database) >= 1
        insert_rows(database, 1000, 100)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "recovery", relay.output)
        assert relay.alive()
        assert "the database connection was lost" in relay.output()
        assert "retrying with backoff" in relay.output()
    finally:
        assert relay.stop() == 0, relay.output()
    messages = read_topic(kafka_config, topic_of(cluster_name))
    assert {message.header.epoch for _, message in messages} == {1}, "leadership was kept"
    batches = validated(messages)
    assert replay(batches) == source_rows(database)
    assert sum(len(b.mutations) for b in batches) == 200
