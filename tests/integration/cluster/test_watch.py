"""A set's watch on a real ZooKeeper: changes, a move and a drop arrive; a refresh reads at once."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.cluster.watch import SetWatch
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.sandbox import SandboxConnection

pytestmark = [pytest.mark.integration]


def configuration(dsn: str, *tables: str) -> bytes:
    value = configuration_pb2.ReplicationSetConfiguration()
    value.database.dsn = dsn
    for name in tables:
        value.tables.add(schema="public", name=name)
    return value.SerializeToString(deterministic=True)


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_watch_follows_the_set_node(
    sandbox: SandboxConnection, zookeeper: KazooClient, cluster_name: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"set 'orders' does not exist in cluster"):
        SetWatch.open(sandbox.zookeeper_hosts, cluster_name, "orders")
    path = names.set_path(cluster_name, "orders")
    zookeeper.create(path, configuration("host=a", "items"), makepath=True)
    watch = SetWatch.open(sandbox.zookeeper_hosts, cluster_name, "orders")
    try:
        first = watch.follow()
        assert [t.name for t in first.configuration.tables] == ["items"]
        assert first.node_version == 0 and watch.watching and not watch.changed.is_set()

        zookeeper.set(path, configuration("host=a", "items", "orders"))
        eventually(watch.changed.is_set, "the change")
        assert [t.name for t in watch.current().configuration.tables] == ["items", "orders"]
        assert not watch.moved.is_set()

        # A refresh returns what was just written, without waiting for the notification.
        zookeeper.set(path, configuration("host=a", "items", "orders", "late"))
        assert [t.name for t in watch.refresh().configuration.tables][-1] == "late"
        assert watch.current().node_version == 2

        zookeeper.set(path, configuration("host=b", "items"))
        eventually(watch.moved.is_set, "the move")
        assert watch.follow().dsn == "host=b" and not watch.moved.is_set()

        zookeeper.delete(path)
        eventually(watch.dropped.is_set, "the drop")
        assert not watch.exists and watch.current().dsn == "host=b"
    finally:
        watch.close()
    assert not watch.watching
