"""Time travel by source transaction, and the change data feed, against the source's own history.

One writer commits transactions one after another (updates of one to three
rows, inserts, deletes, key changes, a TRUNCATE with a refill now and then,
one in ten rolled back) and, inside each transaction it commits, records the
transaction's txid and the table's whole state: with one writer that is the
source's state right after that transaction. Meanwhile the real relay and
``pgshovel-replicate`` copy it into Delta Lake or Iceberg, and both are
killed -9 once mid-stream. Then:

- every version of the copy that carries pgshovel's commit record holds
  exactly the source's state after the last recorded transaction its horizon
  shows committed, and the committed transactions it shows are a prefix of
  the recorded ones (no version holds half a source transaction, or one
  without those before it);
- for 20 random recorded txids, ``delta_version_at`` / ``iceberg_snapshot_at``
  finds the first version whose horizon shows the transaction, and that
  version holds the source's state of that moment;
- Delta: the change data feed, replayed from the first version on an empty
  table, ends with the copy's and the source's rows.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from kazoo.client import KazooClient
from pyiceberg.catalog.sql import SqlCatalog

from pgshovel.replication.tables import delta_version_at, iceberg_snapshot_at
from pgshovel.replication.tables._effect import CommitRecord
from pgshovel.replication.targets import _arrow, _parquet_chunks
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import TableShape
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot
from tests.integration.capture._capture import install

from ._scenario import Processes, Scenario
from ._tableformats import delta_path
from ._targets import make_target, source_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = """
CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT g, 100, 'n' || g FROM generate_series(1, 40) g;
"""

Rows = list[tuple[str | None, ...]]


def current_txid(cursor: Any) -> int:
    cursor.execute("SELECT txid_current()")
    return int(cursor.fetchone()[0])


class SerialWriter:
    """One thread: each committed transaction's txid and the table's state right after it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.history: list[tuple[int, Rows]] = []
        self.rollbacks = 0
        self.truncates = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._keys = itertools.count(1000)
        self._thread = threading.Thread(target=self._run)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        if self.errors:
            raise self.errors[0]

    def _run(self) -> None:
        rng = random.Random(7)
        connection = psycopg2.connect(self.dsn)
        try:
            while not self._stop.is_set():
                with connection.cursor() as cursor:
                    self._write(cursor, rng)
                    if rng.random() < 0.1:
                        connection.rollback()
                        self.rollbacks += 1
                        continue
                    txid = current_txid(cursor)
                    cursor.execute("SELECT id::text, balance::text, note FROM accounts")
                    state = sorted((tuple(row) for row in cursor.fetchall()), key=repr)
                connection.commit()
                self.history.append((txid, state))
                self._stop.wait(0.01)
        except BaseException as error:  # reported by stop()
            self.errors.append(error)
        finally:
            connection.close()

    def _write(self, cursor: Any, rng: random.Random) -> None:
        choice = 1.0 if len(self.history) == 60 else rng.random()  # one TRUNCATE at least
        if choice < 0.45:
            for _ in range(rng.randint(1, 3)):
                cursor.execute(
                    "UPDATE accounts SET balance = balance + %s WHERE id = "
                    "(SELECT id FROM accounts ORDER BY random() LIMIT 1)",
                    (rng.randint(-5, 5),),
                )
        elif choice < 0.65:
            cursor.execute(
                "INSERT INTO accounts VALUES (%s, %s, %s)", (next(self._keys), 100, None)
            )
        elif choice < 0.8:
            cursor.execute(
                "DELETE FROM accounts WHERE id = (SELECT min(id) FROM accounts WHERE id > %s)",
                (rng.randrange(0, 1500),),
            )
        elif choice < 0.99:
            cursor.execute(
                "UPDATE accounts SET id = %s, note = 'moved' WHERE id = "
                "(SELECT max(id) FROM accounts WHERE id < %s)",
                (next(self._keys), rng.randrange(1, 1500)),
            )
        else:
            cursor.execute("TRUNCATE accounts")
            cursor.execute(
                "INSERT INTO accounts SELECT g, 7, 'refill' FROM generate_series(%s, %s) g",
                (next(self._keys) * 10, next(self._keys) * 10 + 5),
            )
            self.truncates += 1


def as_text(shape: TableShape, table: pa.Table) -> Rows:
    """The source's columns of a copy's Arrow table as PostgreSQL prints them, sorted."""
    values = table.select(list(shape.column_names)).cast(_arrow.table_schema(shape))
    rows = [
        tuple(_parquet_chunks.texts(shape, row)) for row in _parquet_chunks.rows_as_python(values)
    ]
    return sorted(rows, key=repr)


class Versions:
    """The copy's versions of public.accounts that carry pgshovel's commit record."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        #: (version or snapshot id, horizon), oldest first
        self.recorded: list[tuple[int, str]] = []
        if kind == "delta":
            self.path = str(delta_path(root, "public", "accounts"))
            for entry in DeltaTable(self.path).history():
                record = CommitRecord.from_properties(entry)
                if record is not None:
                    self.recorded.append((int(entry["version"]), record.horizon))
            self.recorded.sort()
        else:
            catalog = SqlCatalog(
                "pgshovel", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root)
            )
            self.table = catalog.load_table(("public", "accounts"))
            ordered = []
            for snapshot in self.table.snapshots():
                summary = snapshot.summary
                properties = {} if summary is None else summary.additional_properties
                record = CommitRecord.from_properties(properties)
                if record is not None:
                    ordered.append((snapshot.sequence_number or 0, snapshot.snapshot_id, record))
            ordered.sort(key=lambda item: (item[0], item[1]))
            self.recorded = [(snapshot, record.horizon) for _, snapshot, record in ordered]

    def read(self, version: int) -> pa.Table:
        if self.kind == "delta":
            return DeltaTable(self.path, version=version).to_pyarrow_table()
        return self.table.scan(snapshot_id=version).to_arrow()

    def at(self, txid: int) -> int | None:
        if self.kind == "delta":
            return delta_version_at(self.path, txid)
        return iceberg_snapshot_at(self.table, txid)


def committed_prefix(history: list[tuple[int, Rows]], horizon: str) -> int:
    """How many recorded transactions the horizon shows committed (checked: the first ones)."""
    snapshot = parse_txid_snapshot(horizon)
    shown = [is_visible(txid, snapshot) for txid, _ in history]
    count = sum(shown)
    assert shown == [True] * count + [False] * (len(shown) - count), (
        f"horizon {horizon} shows a recorded transaction without every one committed before it"
    )
    return count


def replay_change_feed(path: str, first: int, shape: TableShape) -> Rows:
    """The change data feed from version ``first`` replayed on an empty table, keyed by id."""
    feed = pa.table(DeltaTable(path).load_cdf(starting_version=first).read_all())
    changes = as_text_with_changes(shape, feed)
    rows: dict[str | None, tuple[str | None, ...]] = {}
    # Per version: deletes and pre-images leave, then inserts and post-images arrive (a
    # version holds at most one change per key of a micro-batch's net effect; a key change
    # is the old key's delete and the new key's insert).
    for version in sorted({version for version, _, _ in changes}):
        for _, kind, row in changes:
            if _ == version and kind == "delete":
                rows.pop(row[0], None)
        for _, kind, row in changes:
            if _ == version and kind in ("insert", "update_postimage"):
                rows[row[0]] = row
    return sorted(rows.values(), key=repr)


def as_text_with_changes(shape: TableShape, feed: pa.Table) -> list[tuple[int, str, Any]]:
    versions = feed.column("_commit_version").to_pylist()
    kinds = feed.column("_change_type").to_pylist()
    values = feed.select(list(shape.column_names)).cast(_arrow.table_schema(shape))
    rows = [
        tuple(_parquet_chunks.texts(shape, row)) for row in _parquet_chunks.rows_as_python(values)
    ]
    return list(zip(versions, kinds, rows, strict=True))


@pytest.mark.parametrize("target_kind", ["delta", "iceberg"])
def test_every_version_is_a_source_state_and_time_travel_finds_it(
    target_kind: str,
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = make_database("source")
    with psycopg2.connect(source) as connection, connection.cursor() as cursor:
        cursor.execute(SCHEMA)
        setup_txid = current_txid(cursor)
    connection.close()
    initial = source_rows(source, "accounts")
    install(zookeeper, cluster_name, source, [{"name": "accounts"}])
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target(target_kind, make_database, tmp_path, cluster_name)
    configuration = run.replication_yml(copy.spec)
    relay, worker = run.start_streaming(configuration, copy.progress)
    writer = SerialWriter(source)
    writer.start()
    try:
        time.sleep(4.0)
        worker.kill()  # kill -9 mid-stream
        worker = run.start_worker(configuration)
        time.sleep(3.0)
        relay.kill()
        relay = run.start_relay(lead=False)
        time.sleep(4.0)
    finally:
        writer.stop()
    assert len(writer.history) > 100, "the writer kept committing"
    assert writer.rollbacks > 0, "some transactions were rolled back"
    assert writer.truncates > 0, "the table was truncated and refilled"
    run.wait_caught_up(worker, lambda: copy.progress()[0])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    shape = copy.shape("accounts")
    history = [(setup_txid, initial), *writer.history]
    versions = Versions(target_kind, copy.root or tmp_path)
    assert len(versions.recorded) >= 5, f"few versions to travel through: {versions.recorded}"
    prefixes = []
    for version, horizon in versions.recorded:
        count = committed_prefix(history, horizon)
        assert count > 0, f"version {version} holds the table without its creating transaction"
        prefixes.append(count)
        state = as_text(shape, versions.read(version))
        txid, expected = history[count - 1]
        assert state == expected, (
            f"version {version} (horizon {horizon}) is not the source's state after txid {txid}"
        )
    assert prefixes == sorted(prefixes), "versions go back in source time"
    assert as_text(shape, versions.read(versions.recorded[-1][0])) == source_rows(
        source, "accounts"
    )

    ordinal = {version: index for index, (version, _) in enumerate(versions.recorded)}
    for index in random.Random(11).sample(range(1, len(history)), 20):
        txid, _ = history[index]
        found = versions.at(txid)
        assert found is not None, f"txid {txid} was applied but no version is found for it"
        position = ordinal[found]
        assert prefixes[position] > index, f"version {found} does not hold txid {txid}"
        assert position == 0 or prefixes[position - 1] <= index, (
            f"version {found} is not the first that holds txid {txid}"
        )
        # that version is the source's state of a moment at or after txid (checked above for
        # every version) and before any transaction the previous version did not yet hold

    if target_kind == "delta":
        first = versions.recorded[0][0]
        assert replay_change_feed(versions.path, first, shape) == source_rows(source, "accounts")
