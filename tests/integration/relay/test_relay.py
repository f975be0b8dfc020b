"""The relay end to end: triggers -> PgQ -> pgshovel-relay -> Kafka, read back and validated."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import psycopg2
import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    read_topic,
    replay,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = "CREATE TABLE items (id integer PRIMARY KEY, value integer NOT NULL, note text)"


def source_rows(dsn: str) -> dict[tuple[int], dict[str, object]]:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, value, note FROM items")
            return {(i,): {"id": i, "value": v, "note": n} for i, v, n in cursor.fetchall()}
    finally:
        connection.close()


def prepare(dsn: str, zookeeper: object, cluster: str) -> None:
    connection = psycopg2.connect(dsn)
    with connection, connection.cursor() as cursor:
        cursor.execute(SCHEMA)
    connection.close()
    install(zookeeper, cluster, dsn, [{"name": "items"}])


def workload(
    dsn: str, worker: int, transactions: int, seed: int, pause: float = 0.0
) -> dict[str, int]:
    """Multi-statement transactions on the worker's own key range; about 1 in 5 aborted."""
    rng = random.Random(seed * 1000 + worker)
    counts = {"committed": 0, "aborted": 0, "changes": 0}
    connection = psycopg2.connect(dsn)
    base = worker * 1000
    try:
        for _ in range(transactions):
            time.sleep(pause)
            abort = rng.random() < 0.2
            changed = 0
            with connection.cursor() as cursor:
                for _ in range(rng.randint(1, 4)):
                    key = base + rng.randrange(50)
                    choice = rng.random()
                    note = "ABORTED" if abort else f"w{worker}"
                    if choice < 0.5:
                        cursor.execute(
                            "INSERT INTO items VALUES (%s, %s, %s) ON CONFLICT (id)"
                            " DO UPDATE SET value = items.value + 1, note = excluded.note",
                            (key, rng.randrange(100), note),
                        )
                    elif choice < 0.8:
                        cursor.execute(
                            "UPDATE items SET value = value + 1, note = %s WHERE id = %s",
                            (note, key),
                        )
                    else:
                        cursor.execute("DELETE FROM items WHERE id = %s", (key,))
                    changed += cursor.rowcount
                if not abort and rng.random() < 0.2:
                    # A rolled-back savepoint leaves nothing behind.
                    cursor.execute("SAVEPOINT s")
                    cursor.execute(
                        "UPDATE items SET note = 'ABORTED' WHERE id >= %s AND id < %s",
                        (base, base + 1000),
                    )
                    cursor.execute("ROLLBACK TO SAVEPOINT s")
            if abort:
                connection.rollback()
                counts["aborted"] += 1
            else:
                connection.commit()
                counts["committed"] += 1
                counts["changes"] += changed
    finally:
        connection.close()
    return counts


def run_workload(
    dsn: str, workers: int, transactions: int, seed: int, pause: float = 0.0
) -> dict[str, int]:
    results: list[dict[str, int]] = []

    def run(worker: int) -> None:
        results.append(workload(dsn, worker, transactions, seed, pause))

    threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {key: sum(r[key] for r in results) for key in ("committed", "aborted", "changes")}


def test_committed_transactions_in_order_framed(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        counts = run_workload(database, workers=4, transactions=60, seed=1)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain the queue")
    finally:
        assert relay.stop() == 0, relay.output()
    # PgQ ticks at each of the relay's ticker calls (every 0.05 s) when events wait: its
    # max lag is half the interval, so a call a hair early on PgQ's clock still ticks.
    with psycopg2.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM queue_ticker_max_lag) FROM pgq.queue")
        assert [float(row[0]) for row in cursor.fetchall()] == [0.025]
    connection.close()
    messages = read_topic(kafka_config, topic_of(cluster_name))
    batches = validated(messages)
    mutations = [m for b in batches for m in b.mutations]
    assert counts["aborted"] > 0 and counts["committed"] > 0
    # Exactly the committed row changes, nothing from aborted transactions or savepoints.
    assert len(mutations) == counts["changes"]
    assert all(
        column.value.string != "ABORTED"
        for m in mutations
        for column in m.new.columns
        if column.name == "note"
    )
    # Replaying the stream in order gives the source table.
    assert replay(batches) == source_rows(database)
    # Framing: every message belongs to a Begin ... Commit; transactions are never split.
    kinds = [message.operation.WhichOneof("operation") for _, message in messages]
    assert kinds[0] == "begin" and kinds[-1] == "commit"
    assert kinds.count("begin") == kinds.count("commit") == len(batches)
    seen_in: dict[int, int] = {}
    for batch in batches:
        for mutation in batch.mutations:
            assert seen_in.setdefault(mutation.transaction, batch.batch_id) == batch.batch_id
    # Sequences are contiguous from 0 for the one publisher.
    assert [message.header.sequence for _, message in messages] == list(range(len(messages)))
    assert all(m.set_version == batches[0].begin.set_version for m in mutations)
    assert "batch" in relay.output() and "events" in relay.output()


def test_relay_killed_mid_run_loses_nothing(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    config = write_relay_yml(tmp_path, sandbox)
    done = threading.Event()
    result: dict[str, int] = {}

    def drive() -> None:
        result.update(run_workload(database, workers=3, transactions=800, seed=2, pause=0.008))
        done.set()

    driver = threading.Thread(target=drive)
    driver.start()
    restarts = 0
    try:
        while not done.is_set():
            relay = RelayProcess(sandbox, cluster_name, config, tmp_path / f"relay{restarts}.log")
            wait_for(lambda: "leading" in relay.output(), 30, "the relay to lead")  # noqa: B023
            # Killed while it publishes: once it has published a batch, wherever it is then.
            wait_for(lambda: "batch " in relay.output() or done.is_set(), 30, "a batch")  # noqa: B023
            done.wait(random.uniform(0.1, 0.6))
            relay.kill()  # kill -9, wherever it is
            restarts += 1
        relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain the queue")
    finally:
        driver.join()
        assert relay.stop() == 0, relay.output()
    assert restarts >= 1
    messages = read_topic(kafka_config, topic_of(cluster_name))
    batches = validated(messages)
    mutations = [m for b in batches for m in b.mutations]
    # After dropping re-sent batches, each committed change appears exactly once, in order.
    assert len(mutations) == result["changes"]
    assert len({(m.id) for m in mutations}) == len(mutations)
    # Event ids follow insertion inside a batch; across batches commit order rules, so an
    # older transaction's events may come later.
    for batch in batches:
        assert [m.id for m in batch.mutations] == sorted(m.id for m in batch.mutations)
    assert replay(batches) == source_rows(database)
    publishers = {message.header.publisher for _, message in messages}
    assert 2 <= len(publishers) <= restarts + 1


def test_standby_takes_over_with_a_higher_epoch(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    config = write_relay_yml(tmp_path, sandbox)
    first = RelayProcess(sandbox, cluster_name, config, tmp_path / "first.log")
    wait_for(lambda: "leading" in first.output(), 30, "the first relay to lead")
    second = RelayProcess(sandbox, cluster_name, config, tmp_path / "second.log")
    try:
        wait_for(lambda: "standing by" in second.output(), 30, "the second relay to stand by")
        run_workload(database, workers=2, transactions=30, seed=3)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the leader to drain")
        before = read_topic(kafka_config, topic_of(cluster_name))
        assert len({m.header.publisher for _, m in before}) == 1, "only the leader publishes"
        first.kill()
        counts = run_workload(database, workers=2, transactions=30, seed=4)
        wait_for(lambda: "leading" in second.output(), 30, "the standby to take over")
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the standby to drain")
    finally:
        first.kill()
        assert second.stop() == 0, second.output()
    messages = read_topic(kafka_config, topic_of(cluster_name))
    epochs = [m.header.epoch for _, m in messages]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]
    batches = validated(messages)
    assert counts["committed"] > 0
    assert replay(batches) == source_rows(database)


def test_set_update_is_picked_up_without_restart(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    from pgshovel.admin import planning, twophase
    from pgshovel.cluster.sets import parse_set_document
    from tests.integration.admin._admin import context
    from tests.integration.capture._capture import SET

    prepare(database, zookeeper, cluster_name)
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE extra (id integer PRIMARY KEY, label text)")
    connection.close()
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        wait_for(lambda: "leading" in relay.output(), 30, "the relay to lead", relay.output)
        run_workload(database, workers=1, transactions=5, seed=5)
        document = {
            "database": {"dsn": database},
            "tables": [{"name": "items"}, {"name": "extra"}],
        }
        with context(zookeeper, cluster_name) as ctx:
            plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
            twophase.execute(plan, ctx.connections, zookeeper)
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO extra VALUES (1, 'new table')")
        connection.close()
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain")
        wait_for(lambda: "changed: version" in relay.output(), 10, "the update", relay.output)
    finally:
        assert relay.stop() == 0, relay.output()
    batches = validated(read_topic(kafka_config, topic_of(cluster_name)))
    extra = [m for b in batches for m in b.mutations if m.table == "extra"]
    assert len(extra) == 1 and extra[0].operation == stream_pb2.Mutation.INSERT
    items = [m for b in batches for m in b.mutations if m.table == "items"]
    assert extra[0].set_version != items[0].set_version
    last_begin = batches[-1].begin
    assert last_begin.set_version == extra[0].set_version
