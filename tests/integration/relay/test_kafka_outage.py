"""Kafka stopped for 20 s under a running relay, then restarted: nothing is lost.

An unavailable broker is a transient fault: whatever ``on_error`` says (it
governs data errors only), the relay keeps running, keeps its leadership (the
epoch does not move), logs the outage once when it starts and once when it
ends, and publishes the unfinished batch again once Kafka is back.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg2
import pytest

from pgshovel.sandbox import SandboxConnection, start_kafka, stop_kafka
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
from tests.integration.relay.test_relay import prepare, run_workload, source_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_SECONDS = 20


def insert_rows(dsn: str, first: int, count: int) -> None:
    connection = psycopg2.connect(dsn)
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO items SELECT g, g, 'outage' FROM generate_series(%s, %s) g",
            (first, first + count - 1),
        )
    connection.close()


@pytest.mark.parametrize("on_error", ["exit", "log"])
def test_kafka_outage_loses_nothing(
    on_error: str,
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    config = write_relay_yml(
        tmp_path, sandbox, on_error=on_error, flush_timeout=3.0, retry_interval=1.0
    )
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    connection = sandbox
    try:
        run_workload(database, workers=2, transactions=20, seed=7)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", relay.output)
        stop_kafka(sandbox)
        stopped = time.monotonic()
        insert_rows(database, 100_000, 500)
        wait_for(lambda: "retrying with backoff" in relay.output(), 45, "the outage", relay.output)
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))
        assert relay.alive(), relay.output()
        connection = start_kafka(sandbox)
        insert_rows(database, 200_000, 500)
        wait_for(lambda: queue_drained(database, cluster_name), 90, "recovery", relay.output)
        wait_for(lambda: "recovered after" in relay.output(), 30, "the outage's end", relay.output)
    finally:
        if connection is sandbox and not _kafka_running(sandbox):
            start_kafka(sandbox)
        code = relay.stop()
    assert code == 0, relay.output()
    output = relay.output()
    assert output.count("retrying with backoff") == 1, "one line when the outage starts"
    assert output.count("recovered after") == 1, "one line when it ends"
    messages = read_topic(kafka_config, topic_of(cluster_name))
    assert {message.header.epoch for _, message in messages} == {1}, "leadership was kept"
    batches = validated(messages)
    mutations = [m for b in batches for m in b.mutations]
    assert len({m.id for m in mutations}) == len(mutations), "each change exactly once"
    assert replay(batches) == source_rows(database)
    notes = [
        column.value.string for m in mutations for column in m.new.columns if column.name == "note"
    ]
    assert notes.count("outage") == 1000, "rows written during and after the outage"


def _kafka_running(sandbox: SandboxConnection) -> bool:
    from pgshovel.sandbox import status

    return any(s.name == "kafka" and s.running for s in status(Path(sandbox.state_dir)))
