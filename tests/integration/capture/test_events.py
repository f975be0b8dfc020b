"""Captured events are exactly what committed, limited to the captured columns."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from pgshovel.cluster.versions import set_version
from pgshovel.protocol import configuration_pb2, stream_pb2
from tests.integration.admin._admin import execute, rows
from tests.integration.capture._capture import captured, install, ints

pytestmark = pytest.mark.integration

Mutation = stream_pb2.Mutation


def test_only_committed_changes_are_captured(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, a int, b int, secret int)")
    install(zookeeper, cluster_name, database, [{"name": "t", "columns": ["id", "a", "b"]}])
    execute(database, "INSERT INTO t VALUES (1, 10, 100, 7)")
    # An aborted transaction leaves nothing.
    execute(database, "BEGIN; INSERT INTO t VALUES (2, 20, 200, 7); ROLLBACK")
    # A rolled-back savepoint leaves nothing; the rest of its transaction stays.
    execute(
        database,
        "BEGIN; UPDATE t SET a = 11 WHERE id = 1; SAVEPOINT s; INSERT INTO t VALUES (3, 0, 0, 0);"
        " ROLLBACK TO SAVEPOINT s; COMMIT",
    )
    # Uncaptured column only: nothing. Captured column set to the same value: nothing.
    execute(database, "UPDATE t SET secret = 8 WHERE id = 1")
    execute(database, "UPDATE t SET b = 100 WHERE id = 1")
    # A primary key change carries the old key and the new row.
    execute(database, "UPDATE t SET id = 5, b = NULL WHERE id = 1")
    execute(database, "DELETE FROM t WHERE id = 5")
    execute(database, "INSERT INTO t VALUES (6, 1, 1, 1)")
    execute(database, "TRUNCATE t")

    mutations = captured(database, cluster_name)
    data, _stat = zookeeper.get(f"/{cluster_name}/sets/capture")
    version = set_version(configuration_pb2.ReplicationSetConfiguration.FromString(data))
    summary = [
        (
            m.operation,
            ints(m.old) if m.HasField("old") else None,
            ints(m.new) if m.HasField("new") else None,
        )
        for m in mutations
    ]
    assert summary == [
        (Mutation.INSERT, None, {"id": 1, "a": 10, "b": 100}),
        (Mutation.UPDATE, {"id": 1, "a": 10, "b": 100}, {"id": 1, "a": 11, "b": 100}),
        (Mutation.UPDATE, {"id": 1, "a": 11, "b": 100}, {"id": 5, "a": 11, "b": None}),
        (Mutation.DELETE, {"id": 5, "a": 11, "b": None}, None),
        (Mutation.INSERT, None, {"id": 6, "a": 1, "b": 1}),
        (Mutation.TRUNCATE, None, None),
    ]
    assert all(m.schema == "public" and m.table == "t" for m in mutations)
    assert all(list(m.key_columns) == ["id"] and m.set_version == version for m in mutations)
    txids = [m.transaction for m in mutations]
    assert len(set(txids)) == len(txids) and txids == sorted(txids)
    assert all(m.timestamp > 1_600_000_000_000_000 for m in mutations)


def test_unkeyed_tables_capture_whole_rows_without_key(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE log (n int, m int)")
    install(zookeeper, cluster_name, database, [{"name": "log"}], allow_unkeyed=True)
    execute(database, "INSERT INTO log VALUES (1, NULL)")
    execute(database, "ALTER TABLE log ADD COLUMN later int")
    execute(database, "UPDATE log SET later = 3")
    mutations = captured(database, cluster_name)
    assert [list(m.key_columns) for m in mutations] == [[], []]
    # Every column is captured, including one added after the set was created.
    assert ints(mutations[1].new) == {"n": 1, "m": None, "later": 3}
    assert rows(database, "SELECT count(*) FROM log") == [(1,)]
