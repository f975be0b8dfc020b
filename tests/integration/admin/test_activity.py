"""set inspect shows what runs: the leading relay and its epoch, the backlog, each worker."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.status import StatusBoard
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState
from tests.integration.admin._admin import admin, ok
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import RelayProcess, queue_drained, wait_for, write_relay_yml
from tests.integration.relay.test_kafka_outage import insert_rows
from tests.integration.relay.test_relay import prepare

pytestmark = pytest.mark.integration

COPY = "postgresql:db.example:5432/copy"
BUSY_SECONDS = 3.0


def inspect(sandbox: SandboxConnection, cluster: str) -> str:
    return ok(admin(sandbox, cluster, "set", "inspect", SET))


def test_inspect_shows_relay_backlog_and_workers(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    insert_rows(database, 1, 40)
    report = inspect(sandbox, cluster_name)
    assert "relay: none has run yet" in report
    # 40 rows and the schema event set create wrote for the table (in its prepared transaction,
    # in progress at the queue's first tick: PgQ's count by event numbers missed it)
    assert re.search(r"backlog: 41 event\(s\) not yet published", report), report
    assert "workers: none running" in report

    relay = RelayProcess(sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "r")
    try:
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", relay.output)
        report = inspect(sandbox, cluster_name)
        assert re.search(r"relay: \S+ leads, epoch 1\b", report), report
        assert "backlog: 0 events" in report
    finally:
        assert relay.stop() == 0, relay.output()
    assert "relay: none running (last leader" in inspect(sandbox, cluster_name)

    metrics = WorkerMetrics(offset=41, lag_messages=3, streaming=True)
    metrics.state = WorkerState(
        "streaming",
        "1:1:",
        StreamPosition.start((0,)),
        tasks=(SnapshotTask("t", "public", "items", "verify", rows=7, estimate=40),),
    )
    board = StatusBoard(lambda: zookeeper, cluster_name, SET, "PostgresTarget", copy=COPY)
    board.publish(metrics)
    report = inspect(sandbox, cluster_name)
    assert re.search(rf"{COPY}, streaming, offset 41, lag 0\.0s \(3 message", report), report
    assert "verify of public.items: 7/~40 rows" in report

    # A long apply: the worker is busy, its status thread keeps the node fresh.
    board.keep_fresh(metrics)
    committed = time.time()
    metrics.read([_batch_committed_at(committed, mutations=80)])
    time.sleep(BUSY_SECONDS)
    before = time.time() - committed
    report = inspect(sandbox, cluster_name)
    after = time.time() - committed
    line = re.search(rf"{COPY}, streaming, .* lag ([\d.]+)s .* updated (\d+)s ago", report)
    assert line is not None, report
    lag, updated = float(line.group(1)), int(line.group(2))
    assert updated <= 2, report
    # the age of the commit being applied, by the stopwatch (the status is at most 1 s old)
    assert before - 1.5 <= lag <= after, (before, lag, after, report)
    busy = re.search(r"applying 80 mutation\(s\) of 1 batch\(es\) from batch 9, for (\d+)s", report)
    assert busy is not None and BUSY_SECONDS - 1 <= int(busy.group(1)) <= after + 1, report
    board.close()
    assert "workers: none running" in inspect(sandbox, cluster_name)


def _batch_committed_at(seconds: float, mutations: int) -> CommittedBatch:
    stamp = int(seconds * 1e6)
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=9,
        begin=stream_pb2.Begin(start=stream_pb2.Tick(id=1, timestamp=stamp - 1000)),
        mutations=tuple(stream_pb2.Mutation(id=i, timestamp=stamp) for i in range(mutations)),
        position=StreamPosition((PartitionCursor(51, b"p", 1, 1),)),
    )


def _finished_past_every_event_number(dsn: str, cluster: str) -> bool:
    """The relay finished a batch whose end tick counts every event number taken so far (by
    PgQ's count, nothing is pending: a transaction still open wrote those events)."""
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.pending_events = 0 AND q.ev_new = 0 AND c.current_batch IS NULL"
                " FROM pgq.get_consumer_info(%s, 'pgshovel') c, pgq.get_queue_info(%s) q",
                (names.queue_name(cluster, SET), names.queue_name(cluster, SET)),
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return row is not None and bool(row[0])


def test_inspect_counts_the_backlog_of_a_long_transaction(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    """A transaction open while the relay ticks, committed once the relay stopped: PgQ's
    count by event numbers says nothing is pending; its 500 events are."""
    prepare(database, zookeeper, cluster_name)
    relay = RelayProcess(sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "r")
    connection = psycopg2.connect(database)
    try:
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", relay.output)
        began = time.time()
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO items SELECT g, g, 'long' FROM generate_series(1, 500) g")
        wait_for(
            lambda: _finished_past_every_event_number(database, cluster_name),
            60,
            "the relay's ticks past the open transaction",
            relay.output,
        )
        assert relay.stop() == 0, relay.output()
        connection.commit()
        committed = time.time()
    finally:
        connection.close()
        relay.stop()
    report = inspect(sandbox, cluster_name)
    now = time.time()
    backlog = re.search(
        r"backlog: 500 event\(s\) not yet published, the oldest at most ([\d.]+)s", report
    )
    assert backlog is not None, report
    # no younger than its commit, no older than the transaction
    assert now - committed - 1.0 <= float(backlog.group(1)) <= now - began + 1.0, report


def test_inspect_warns_about_a_password_stored_by_an_older_version(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
) -> None:
    prepare(database, zookeeper, cluster_name)
    path = names.set_path(cluster_name, SET)
    data, _ = zookeeper.get(path)
    configuration = configuration_pb2.ReplicationSetConfiguration.FromString(data)
    configuration.database.dsn += " password=older-secret"
    zookeeper.set(path, configuration.SerializeToString())
    for words in (("set", "inspect", SET), ("cluster", "inspect")):
        report = ok(admin(sandbox, cluster_name, *words))
        assert f"warning: set '{SET}' keeps a password in its zookeeper node" in report, report
        assert "older-secret" not in report
