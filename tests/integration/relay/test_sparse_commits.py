"""A commit with no write after it reaches Kafka within about one tick interval.

PgQ ticks for new events, else only after an idle period that grows with the
idle time (up to ``ticker_idle_period``). A transaction in progress at a tick
wrote its events before it, so they reach a batch only through a later tick:
without another write, the old relay published them up to a minute late. The
test gives the queue a long idle history (ticks 8 s apart and PgQ's default
60 s idle period: PgQ's next idle tick after the one the relay makes during
the transaction would come 16 s or more after it), runs ``BEGIN; INSERT;
pg_sleep(1); COMMIT`` with no other writes, and times COMMIT -> the mutation
on the topic.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg2
import pytest
from confluent_kafka import Consumer, TopicPartition

from pgshovel.cluster import names
from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.rows import mutations_in
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import (
    RelayProcess,
    topic_of,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay.test_relay import prepare

pytestmark = [pytest.mark.integration, pytest.mark.slow]

IDLE_GAP = 8.0
#: generous against one tick interval (0.05 s), far below what PgQ's idle ticks give
BOUND_SECONDS = 10.0


def _idle_history(dsn: str, queue: str) -> float:
    """Two ticks IDLE_GAP apart and PgQ's default idle period: PgQ's own next idle tick comes
    no sooner than twice the last gap after the last tick. Returns when the last was made."""
    connection = psycopg2.connect(dsn)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pgq.set_queue_config(%s, 'ticker_max_lag', '0'),"
                " pgq.set_queue_config(%s, 'ticker_idle_period', '0')",
                (queue, queue),
            )
            cursor.execute("SELECT pgq.ticker(%s)", (queue,))
            time.sleep(IDLE_GAP)
            cursor.execute("SELECT pgq.ticker(%s)", (queue,))
            last = time.monotonic()
            cursor.execute(
                "SELECT pgq.set_queue_config(%s, 'ticker_idle_period', '60 seconds')", (queue,)
            )
    finally:
        connection.close()
    return last


def _finished_last_tick(dsn: str, queue: str) -> bool:
    """The relay finished the batch that ends at the queue's latest tick."""
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s.sub_batch IS NULL AND s.sub_last_tick ="
                " (SELECT max(tick_id) FROM pgq.tick WHERE tick_queue = q.queue_id)"
                " FROM pgq.queue q JOIN pgq.subscription s ON s.sub_queue = q.queue_id"
                " WHERE q.queue_name = %s",
                (queue,),
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return row is not None and bool(row[0])


def _mutation_arrival(consumer: Consumer, key: int, limit: float) -> float:
    """time.monotonic() when the INSERT of ``key`` is read from the topic."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        record = consumer.poll(0.05)
        if record is None or record.error() is not None:
            continue
        value = record.value()
        assert value is not None
        for mutation in mutations_in(stream_pb2.Message.FromString(value)):
            if any(c.name == "id" and c.value.int64 == key for c in mutation.new.columns):
                return time.monotonic()
    raise AssertionError(f"the INSERT of {key} did not reach the topic in {limit}s")


def test_a_commit_without_later_writes_arrives_within_a_tick(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    queue = names.queue_name(cluster_name, SET)
    last_tick = _idle_history(database, queue)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    consumer = Consumer({**kafka_config, "group.id": "sparse", "enable.auto.commit": "false"})
    try:
        wait_for(lambda: _finished_last_tick(database, queue), 60, "the relay", relay.output)
        # The relay's tick for the INSERT comes IDLE_GAP or more after the last tick.
        time.sleep(max(0.0, last_tick + IDLE_GAP - time.monotonic()))
        partition = TopicPartition(topic_of(cluster_name), 0)
        _low, high = consumer.get_watermark_offsets(partition, timeout=30, cached=False)
        consumer.assign([TopicPartition(topic_of(cluster_name), 0, high)])
        connection = psycopg2.connect(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO items VALUES (4242, 1, 'sparse')")
                cursor.execute("SELECT pg_sleep(1)")  # the relay ticks meanwhile
            connection.commit()
            committed = time.monotonic()
        finally:
            connection.close()
        seconds = _mutation_arrival(consumer, 4242, 90) - committed
        assert seconds < BOUND_SECONDS, f"COMMIT -> Kafka took {seconds:.1f}s\n{relay.output()}"
    finally:
        consumer.close()
        code = relay.stop()
    assert code == 0, relay.output()
