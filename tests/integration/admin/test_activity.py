"""set inspect shows what runs: the leading relay and its epoch, the backlog, each worker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.protocol import configuration_pb2
from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.status import StatusBoard
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState
from tests.integration.admin._admin import admin, ok
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import RelayProcess, queue_drained, wait_for, write_relay_yml
from tests.integration.relay.test_kafka_outage import insert_rows
from tests.integration.relay.test_relay import prepare

pytestmark = pytest.mark.integration


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
    assert re.search(r"backlog: 40 event\(s\) not yet published", report), report
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
    board = StatusBoard(lambda: zookeeper, cluster_name, SET, "PostgresTarget")
    board.publish(metrics)
    report = inspect(sandbox, cluster_name)
    assert re.search(r"PostgresTarget, streaming, offset 41, lag 0\.0s \(3 message", report), report
    assert "verify of public.items: 7/~40 rows" in report
    board.close()
    assert "workers: none running" in inspect(sandbox, cluster_name)


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
