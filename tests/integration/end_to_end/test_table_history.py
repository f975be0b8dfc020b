"""End to end into Delta and Iceberg copies with ``history: true``: the history is the audit.

The source keeps its own audit: a plain trigger (not pgshovel's) writes every
row version of ``items`` with ``txid_current()`` into ``audit``, which is not
in the set, so the audit holds exactly the committed row versions. Threads
write updates, key changes, deletes and inserts, one in ten transactions
rolled back; a TRUNCATE comes mid-stream and the worker is killed -9 once.
Then every history version is a version the audit saw (same key, value and
source transaction), every source transaction in the history is a committed
one, no version is there twice, each key has at most one current version and
the current versions are the copy's rows, which are the source's.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from deltalake import DeltaTable
from kazoo.client import KazooClient
from pyiceberg.catalog.sql import SqlCatalog

from pgshovel.sandbox import SandboxConnection

from ._scenario import Processes, Scenario, captured_source
from ._tableformats import delta_path, read_arrow
from ._targets import make_target, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = """
CREATE TABLE items (id bigint PRIMARY KEY, v text);
CREATE TABLE audit (txid bigint NOT NULL, op text NOT NULL, id bigint, v text);
CREATE FUNCTION audit_items() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO audit VALUES (txid_current(), 'TRUNCATE', NULL, NULL);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO audit VALUES (txid_current(), 'DELETE', OLD.id, OLD.v);
    ELSE
        IF TG_OP = 'UPDATE' AND OLD.id <> NEW.id THEN
            INSERT INTO audit VALUES (txid_current(), 'DELETE', OLD.id, OLD.v);
        END IF;
        INSERT INTO audit VALUES (txid_current(), TG_OP, NEW.id, NEW.v);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER audit_rows AFTER INSERT OR UPDATE OR DELETE ON items
    FOR EACH ROW EXECUTE FUNCTION audit_items();
CREATE TRIGGER audit_truncate AFTER TRUNCATE ON items
    FOR EACH STATEMENT EXECUTE FUNCTION audit_items();
INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 60) g;
"""


class Writer(WriterThreads):
    """Transactions of 1-3 statements on ``items``; one in ten rolled back."""

    rolled_back = (psycopg2.errors.DeadlockDetected, psycopg2.errors.UniqueViolation)
    pause = 0.02

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn, threads=2)
        self.rollbacks = 0
        self._keys = itertools.count(1_000)

    def write(self, cursor: Any, rng: random.Random) -> None:
        for _ in range(rng.randint(1, 3)):
            key, choice = next(self._keys), rng.random()
            if choice < 0.3:
                cursor.execute("INSERT INTO items VALUES (%s, %s)", (key, f"v{key}"))
            elif choice < 0.7:
                cursor.execute(
                    "UPDATE items SET v = %s WHERE id = (SELECT id FROM items ORDER BY random() "
                    "LIMIT 1)",
                    (f"u{key}",),
                )
            elif choice < 0.85:
                cursor.execute(
                    "UPDATE items SET id = %s WHERE id = (SELECT id FROM items ORDER BY random() "
                    "LIMIT 1)",
                    (key,),
                )
            else:
                cursor.execute(
                    "DELETE FROM items WHERE id = (SELECT id FROM items ORDER BY random() LIMIT 1)"
                )
        if rng.random() < 0.1:
            cursor.connection.rollback()
            self.rollbacks += 1


def commits(kind: str, root: Path, name: str) -> list[dict[str, Any]]:
    """The properties of every commit of table ``public.<name>`` (Delta commit metadata, Iceberg
    snapshot summaries)."""
    if kind == "delta":
        return list(DeltaTable(str(delta_path(root, "public", name))).history())
    catalog = SqlCatalog("pgshovel", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root))
    snapshots = catalog.load_table(("public", name)).snapshots()
    return [dict(s.summary.additional_properties) for s in snapshots if s.summary is not None]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_history_versions_are_the_audited_versions_through_truncate_and_kill(
    kind: str,
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(make_database, zookeeper, cluster_name, SCHEMA, ["items"])
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target(kind, make_database, tmp_path, cluster_name)
    copy = dataclasses.replace(copy, spec={**copy.spec, "history": True})
    assert copy.root is not None
    configuration = run.replication_yml(copy.spec)
    relay, worker = run.start_streaming(configuration, copy.progress)
    writer = Writer(source)
    writer.start()
    try:
        time.sleep(3.0)
        worker.kill()  # kill -9 mid-stream, wherever it is between the table and its history
        worker = run.start_worker(configuration)
        time.sleep(2.0)
        with psycopg2.connect(source) as connection, connection.cursor() as cursor:
            cursor.execute("TRUNCATE items")
            cursor.execute("INSERT INTO items SELECT g, 't' || g FROM generate_series(1, 20) g")
        connection.close()
        time.sleep(3.0)
    finally:
        writer.stop()
    assert writer.committed > 30 and writer.rollbacks > 0
    run.wait_caught_up(worker, lambda: copy.progress()[0])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    with psycopg2.connect(source) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT txid, op, id, v FROM audit")
        audit = cursor.fetchall()
    connection.close()
    history = read_arrow(kind, copy.root, "public", "items~history")
    loaded = {
        int(str(entry["pgshovel.horizon"]).split(":")[1])
        for entry in commits(kind, copy.root, "items~history")
        if entry.get("pgshovel.load") == "true"
    }
    versions = list(
        zip(
            *(
                history.column(name).to_pylist()
                for name in ("id", "v", "_pgshovel_start_txid", "_pgshovel_end_txid")
            ),
            strict=True,
        )
    )
    committed = {txid for txid, _, _, _ in audit}
    written = {(key, value, txid) for txid, op, key, value in audit if op in ("INSERT", "UPDATE")}
    ended = {(key, txid) for txid, op, key, _ in audit if op != "INSERT"}
    truncates = {txid for txid, op, _, _ in audit if op == "TRUNCATE"}
    assert len(loaded) == 1, f"one load: {loaded!r}"
    assert len(truncates) == 1
    for key, value, start, end in versions:
        assert start in loaded or (key, value, start) in written, (key, value, start)
        assert start in loaded or start in committed
        assert end is None or (key, end) in ended or end in truncates, (key, value, start, end)
    twice = [version for version, count in Counter(versions).items() if count > 1]
    assert not twice, f"versions twice: {twice[:3]!r}"
    current = sorted((key, value) for key, value, _, end in versions if end is None)
    assert len({key for key, _ in current}) == len(current), "one current version per key"
    expected = [(int(str(key)), value) for key, value in source_rows(source, "items")]
    assert current == sorted(expected)
    assert sorted((int(str(key)), value) for key, value in copy.rows("items")) == sorted(expected)
    closed_by_truncate = [v for v in versions if v[3] in truncates]
    assert closed_by_truncate, "the TRUNCATE closed the versions current before it"
