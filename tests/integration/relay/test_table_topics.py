"""Table topics on the real stack: folded by key they equal the source through kill -9.

Also: the set topic with more than one partition is refused by the relay and named by readers.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import psycopg2
import pytest
import yaml

from pgshovel.errors import StreamError
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.reader import KafkaReader
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    topic_of,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import (
    compare_with_source,
    create_topic,
    fold,
    read_all,
    snapshots_done,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = Path(__file__).with_name("debezium_envelope.schema.json")
TRANSACTION_SCHEMA = Path(__file__).with_name("debezium_transaction.schema.json")

ISO_TIMESTAMP = re.compile(r"[+-]?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")

TABLES = """
CREATE TABLE items (
    id integer PRIMARY KEY, value integer NOT NULL, note text, price numeric(14,3),
    seen timestamptz, day date, doc jsonb, blob bytea, tags integer[], flag boolean,
    ratio double precision, span interval
);
CREATE SCHEMA sales;
CREATE TABLE sales.orders (
    region text, number integer, total numeric, PRIMARY KEY (region, number)
);
"""


def prepare(dsn: str, zookeeper: object, cluster: str) -> None:
    connection = psycopg2.connect(dsn)
    with connection, connection.cursor() as cursor:
        cursor.execute(TABLES)
    connection.close()
    install(zookeeper, cluster, dsn, [{"name": "items"}, {"schema": "sales", "name": "orders"}])


def populate(dsn: str) -> int:
    """Rows that exist before any relay runs: only a snapshot can publish them."""
    rng = random.Random(11)
    connection = psycopg2.connect(dsn)
    with connection, connection.cursor() as cursor:
        for key in [*range(0, 3000, 25), *range(3000, 6000, 3), *range(9000, 9060)]:
            cursor.execute(
                "INSERT INTO items VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (key, *_values(rng, 9)),
            )
        for number in range(40):
            cursor.execute(
                "INSERT INTO sales.orders VALUES (%s, %s, %s)", ("before", number, number / 4)
            )
        cursor.execute("SELECT count(*) FROM items")
        (count,) = cursor.fetchone()  # type: ignore[misc]
    connection.close()
    return int(count)


def _values(rng: random.Random, worker: int) -> tuple[Any, ...]:
    seen = rng.choice(
        [
            "infinity",
            "-infinity",
            "2024-02-29 23:59:59.999999+00",
            "1999-12-31 12:00:00.5+00",
            "294276-12-31 23:59:59.999999+00",  # past the protocol's int64: carried as text
        ]
    )
    day = rng.choice(["0044-03-15 BC", "2000-01-01", "infinity", "1970-01-01", "5874897-12-31"])
    doc = json.dumps({"w": worker, "n": rng.randrange(10**6), "nested": {"ok": rng.random() < 0.5}})
    span = rng.choice(["1 year 2 mons 3 days 04:05:06.5", "-00:00:01.5", "0", "-1 days +02:00"])
    return (
        rng.randrange(1000),
        rng.choice(["x", "é \"quoted\" 'it'", None]),
        rng.choice(["1.500", "-99999999999.999", "NaN", None]),
        seen,
        day,
        doc,
        psycopg2.Binary(bytes(rng.randrange(256) for _ in range(rng.randrange(5)))),
        rng.choice([[1, 2, None], [], None, [[1, 2], [3, 4]]]),
        rng.choice([True, False, None]),
        rng.choice([0.1, float("nan"), -1e300, None]),
        span,
    )


def workload(dsn: str, worker: int, transactions: int, seed: int, pause: float) -> None:
    """Inserts, updates, key changes and deletes on the worker's keys; about 1 in 5 aborted."""
    rng = random.Random(seed * 1000 + worker)
    base = worker * 1000
    connection = psycopg2.connect(dsn)
    try:
        for _ in range(transactions):
            time.sleep(pause)
            with connection.cursor() as cursor:
                for _ in range(rng.randint(1, 4)):
                    key = base + rng.randrange(40)
                    choice = rng.random()
                    if choice < 0.45:
                        cursor.execute(
                            "INSERT INTO items VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                            " %s, %s) ON CONFLICT (id) DO UPDATE SET value = excluded.value,"
                            " note = excluded.note, seen = excluded.seen, doc = excluded.doc",
                            (key, *_values(rng, worker)),
                        )
                    elif choice < 0.65:
                        cursor.execute(
                            "UPDATE items SET value = value + 1, price = %s WHERE id = %s",
                            (rng.choice(["0.001", "12.340"]), key),
                        )
                    elif choice < 0.8:
                        target = base + rng.randrange(40)
                        cursor.execute(
                            "UPDATE items SET id = %s WHERE id = %s"
                            " AND NOT EXISTS (SELECT FROM items WHERE id = %s)",
                            (target, key, target),
                        )
                    elif choice < 0.9:
                        cursor.execute("DELETE FROM items WHERE id = %s", (key,))
                    else:
                        cursor.execute(
                            "INSERT INTO sales.orders VALUES (%s, %s, %s) ON CONFLICT"
                            " (region, number) DO UPDATE SET total = excluded.total",
                            (f"r{worker}", rng.randrange(30), str(rng.randrange(10**6) / 100)),
                        )
            if rng.random() < 0.2:
                connection.rollback()
            else:
                connection.commit()
    finally:
        connection.close()


def touch(dsn: str, stop: threading.Event) -> None:
    """Updates, deletes and inserts all over the snapshot's key range until ``stop``."""
    rng = random.Random(5)
    connection = psycopg2.connect(dsn)
    try:
        while not stop.wait(0.005):
            key = rng.randrange(3000, 6000)
            with connection, connection.cursor() as cursor:
                choice = rng.random()
                if choice < 0.6:
                    # Ten rows at a time: most chunk windows see some of their rows change.
                    keys = [rng.randrange(1000, 2000) * 3 for _ in range(10)]
                    cursor.execute("UPDATE items SET value = value + 1 WHERE id = ANY(%s)", (keys,))
                elif choice < 0.8:
                    cursor.execute("DELETE FROM items WHERE id = %s", (key,))
                else:
                    cursor.execute(
                        "INSERT INTO items (id, value) VALUES (%s, 1) ON CONFLICT DO NOTHING",
                        (key,),
                    )
    finally:
        connection.close()


def truncations(dsn: str, done: threading.Event, count: int) -> None:
    connection = psycopg2.connect(dsn)
    try:
        for _ in range(count):
            if done.wait(0.7):
                break
            with connection, connection.cursor() as cursor:
                cursor.execute("TRUNCATE sales.orders")
    finally:
        connection.close()


def check_transaction_topic(kafka_config: dict[str, str], prefix: str) -> None:
    """Every END closes a BEGIN of its transaction; its counts add up; all validate."""
    validator = jsonschema.Draft202012Validator(json.loads(TRANSACTION_SCHEMA.read_text()))
    records = [
        json.loads(value or b"null")
        for *_, value in read_all(kafka_config, f"{prefix}.transaction")
    ]
    begun: set[str] = set()
    ends = 0
    for record in records:
        validator.validate(record)
        if record["status"] == "BEGIN":
            begun.add(record["id"])
        else:
            ends += 1
            assert record["id"] in begun
            counts = [c["event_count"] for c in record["data_collections"]]
            assert sum(counts) == record["event_count"]
            assert {c["data_collection"] for c in record["data_collections"]} <= {
                "public.items",
                "sales.orders",
            }
    assert ends > 0


def check_debezium_topic(
    validator: jsonschema.Draft202012Validator,
    table: str,
    records: list[tuple[int, int, bytes | None, bytes | None]],
    state: dict[bytes, Any],
) -> list[dict[str, Any]]:
    """Every event validates; reads are marked; the live rows (the ``after`` of each key)."""
    for _partition, _offset, _key, value in records:
        if value is not None:
            validator.validate(json.loads(value))
    assert all(event["op"] in ("c", "u", "r") for event in state.values())
    reads = [json.loads(v) for *_, v in records if v is not None and b'"op":"r"' in v]
    assert reads and reads[0]["source"]["snapshot"] in ("true", "last")
    if table == "items":
        # Reads and live events interleave on a partition: the stream was not held back.
        interleaved = False
        for partition in {partition for partition, *_ in records}:
            ops = [
                json.loads(value)["op"]
                for p, _, _, value in sorted(records)
                if p == partition and value is not None
            ]
            interleaved |= "u" in ops and "r" in ops[ops.index("u") :]
        assert interleaved, "every read came before the first update"
    marks = {read["source"]["snapshot"] for read in reads}
    # The last chunk's last row read is "last"; items ends with rows no one touches (a
    # chunk may have no row left: the last chunk of a truncated table has none).
    assert marks == {"true", "last"} if table == "items" else marks <= {"true", "last"}
    return [event["after"] for event in state.values()]


def _relay_yml(tmp_path: Path, sandbox: SandboxConnection, format: str) -> Path:
    path = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(path.read_text())
    document["writer"]["configuration"]["table_topics"] = {
        "format": format,
        "database": "src",
        "transaction_topic": format == "debezium",
        # Several chunks per table, each read while the workload writes to the same keys.
        "snapshot_chunk_rows": 25,
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("format", ["json", "debezium"])
def test_table_topics_fold_to_the_source_through_kill_9(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    format: str,
) -> None:
    prepare(database, zookeeper, cluster_name)
    populate(database)
    prefix = topic_of(cluster_name)
    # An operator creates one topic compacted (a 0.9 broker has no admin API); the relay
    # leaves the other to the broker's auto-creation.
    create_topic(sandbox, f"{prefix}.items", partitions=2, compact=True)
    config = _relay_yml(tmp_path, sandbox, format)
    done = threading.Event()
    touched = threading.Event()

    def drive() -> None:
        threads = [
            threading.Thread(target=workload, args=(database, w, 250, 7, 0.05)) for w in range(3)
        ]
        threads.append(threading.Thread(target=truncations, args=(database, done, 3)))
        for thread in threads[:3]:
            thread.start()
        threads[3].start()
        for thread in threads[:3]:
            thread.join()
        done.set()
        threads[3].join()

    driver = threading.Thread(target=drive)
    driver.start()
    restarts = 0
    relay: RelayProcess | None = None
    try:
        while not done.is_set():
            relay = RelayProcess(sandbox, cluster_name, config, tmp_path / f"relay{restarts}.log")
            wait_for(lambda: "leading" in relay.output(), 30, "the relay to lead", relay.output)  # type: ignore[union-attr]  # noqa: B023
            done.wait(random.uniform(0.5, 1.5))
            relay.kill()
            restarts += 1
        relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
        topics = [f"{prefix}.items", f"{prefix}.sales.orders"]
        # Writes over the whole key range while the last relay reads its chunks.
        toucher = threading.Thread(target=touch, args=(database, touched))
        toucher.start()
        try:
            wait_for(
                lambda: snapshots_done(kafka_config, prefix, topics),
                90,
                "the snapshots to finish",
                relay.output,
            )
        finally:
            touched.set()
            toucher.join()
        wait_for(
            lambda: queue_drained(database, cluster_name), 90, "the relay to drain", relay.output
        )
        # A TRUNCATE once the snapshots are long done: its keys are read back from the topic.
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("TRUNCATE sales.orders")
            cursor.execute("INSERT INTO sales.orders VALUES ('last', 1, 1.5)")
        connection.close()
        wait_for(
            lambda: queue_drained(database, cluster_name), 90, "the relay to drain", relay.output
        )
    finally:
        driver.join()
        if relay is not None:
            assert relay.stop() == 0, relay.output()
    assert restarts >= 1
    # Chunks were read while the workload changed their keys: those rows were left to the
    # stream (the relay logs how many per chunk).
    logs = "".join(path.read_text() for path in tmp_path.glob("relay*.log"))
    changed = [int(n) for n in re.findall(r"\((\d+) changed meanwhile\)", logs)]
    assert len(changed) > 10 and sum(changed) > 0, changed
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for schema, table, topic in [
        ("public", "items", f"{prefix}.items"),
        ("sales", "orders", f"{prefix}.sales.orders"),
    ]:
        records = read_all(kafka_config, topic)
        assert records, f"nothing on {topic}"
        state = fold(records)
        if format == "debezium":
            rows = check_debezium_topic(validator, table, records, state)
        else:
            rows = list(state.values())
        # The key of every live message is the key of the row it holds.
        key_columns = ["id"] if table == "items" else ["region", "number"]
        for key, row in zip(state, rows, strict=True):
            assert json.loads(key) == {name: row[name] for name in key_columns}
            assert key == json.dumps(json.loads(key), separators=(",", ":")).encode()
        if table == "items":
            # Every timestamp in ISO 8601, also those the protocol carries as text.
            seen = {row["seen"] for row in rows} - {None, "infinity", "-infinity"}
            assert "+294276-12-31T23:59:59.999999Z" in seen
            assert all(ISO_TIMESTAMP.fullmatch(value) for value in seen), seen
        missing, extra = compare_with_source(database, schema, table, rows)
        assert (missing, extra) == ([], []), topic
    # The TRUNCATEs did delete keys (tombstones), and the compacted topic kept per-key order.
    orders = read_all(kafka_config, f"{prefix}.sales.orders")
    assert any(value is None for *_, value in orders)
    items = read_all(kafka_config, f"{prefix}.items")
    assert {partition for partition, *_ in items} == {0, 1}
    # The rows no transaction touched came from the snapshot alone.
    untouched = {
        json.dumps({"id": key}, separators=(",", ":")).encode() for key in range(9000, 9060)
    }
    assert untouched <= set(fold(items))
    if format == "debezium":
        check_transaction_topic(kafka_config, prefix)
    snapshots = read_all(kafka_config, f"__pgshovel-snapshots.{prefix}")
    assert {key for _, _, key, _ in snapshots} >= {f"{prefix}.items".encode()}


def test_set_topic_with_three_partitions_is_refused(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    topic = topic_of(cluster_name)
    create_topic(sandbox, topic, partitions=3)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items (id, value) VALUES (1, 1)")
        connection.close()
        wait_for(lambda: not relay.alive(), 60, "the relay to refuse the topic", relay.output)
    finally:
        code = relay.stop()
    assert code != 0
    assert f"topic {topic!r} has 3 partitions, a set topic must have exactly one" in relay.output()
    reader = KafkaReader(kafka_config["bootstrap.servers"], topic, kafka_config)
    try:
        with pytest.raises(StreamError, match="has 3 partitions"):
            reader.seek(0)
    finally:
        reader.close()


def _table_topic_relay(
    tmp_path: Path, sandbox: SandboxConnection, **table_topics: Any
) -> tuple[Path, dict[str, Any]]:
    path = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(path.read_text())
    document["writer"]["configuration"].update(table_topics.pop("writer", {}))
    document["writer"]["configuration"]["table_topics"] = table_topics
    path.write_text(yaml.safe_dump(document))
    return path, document


def test_a_table_added_by_set_update_starts_with_its_rows(
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
        cursor.execute("INSERT INTO extra SELECT n, 'before ' || n FROM generate_series(1, 50) n")
    connection.close()
    config, _ = _table_topic_relay(
        tmp_path, sandbox, prefix=cluster_name, writer={"set_topic": False}
    )
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        wait_for(lambda: "leading" in relay.output(), 30, "the relay to lead", relay.output)
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items (id, value) VALUES (1, 1)")
        document = {
            "database": {"dsn": database},
            "tables": [{"name": "items"}, {"schema": "sales", "name": "orders"}, {"name": "extra"}],
        }
        with context(zookeeper, cluster_name) as ctx:
            plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
            twophase.execute(plan, ctx.connections, zookeeper)
        with connection, connection.cursor() as cursor:
            cursor.execute("UPDATE extra SET label = 'changed' WHERE id = 7")
            cursor.execute("DELETE FROM extra WHERE id = 8")
        connection.close()
        # The new table's snapshot goes in chunks beside the stream: a drained queue does
        # not mean it is done.
        wait_for(lambda: "holds public.extra" in relay.output(), 60, "the snapshot", relay.output)
        wait_for(
            lambda: queue_drained(database, cluster_name), 60, "the relay to drain", relay.output
        )
    finally:
        assert relay.stop() == 0, relay.output()
    state = fold(read_all(kafka_config, f"{cluster_name}.extra"))
    assert len(state) == 49
    assert compare_with_source(database, "public", "extra", list(state.values())) == ([], [])
    items = fold(read_all(kafka_config, f"{cluster_name}.items"))
    assert list(items) == [b'{"id":1}'] and items[b'{"id":1}']["value"] == 1
    # set_topic: false: the set's protobuf topic was never written.
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(dict(kafka_config)).list_topics(timeout=30).topics
    assert topic_of(cluster_name) not in topics


def test_snapshot_false_publishes_only_changes(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute(TABLES)
    connection.close()
    populate(database)  # before capture exists: no event for these rows
    install(zookeeper, cluster_name, database, [{"name": "items"}])
    config, _ = _table_topic_relay(tmp_path, sandbox, snapshot=False)
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("UPDATE items SET value = -1 WHERE id = 9001")
            cursor.execute("INSERT INTO items (id, value) VALUES (-5, 5)")
        connection.close()
        wait_for(
            lambda: queue_drained(database, cluster_name), 60, "the relay to drain", relay.output
        )
    finally:
        assert relay.stop() == 0, relay.output()
    state = fold(read_all(kafka_config, f"{topic_of(cluster_name)}.items"))
    assert sorted(json.loads(key)["id"] for key in state) == [-5, 9001]
    assert state[b'{"id":9001}']["value"] == -1

    # The topic now holds a key the table loses without an event (triggers off); a relay
    # with snapshot: true then publishes every row and tombstones that key.
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("DELETE FROM items WHERE id = -5")
    connection.close()
    config, _ = _table_topic_relay(tmp_path, sandbox, snapshot=True, snapshot_chunk_rows=7)
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay-snapshot.log")
    try:
        wait_for(lambda: "holds public.items" in relay.output(), 120, "the snapshot", relay.output)
    finally:
        assert relay.stop() == 0, relay.output()
    assert "1 key(s) the table no longer has get tombstones" in relay.output()
    state = fold(read_all(kafka_config, f"{topic_of(cluster_name)}.items"))
    assert b'{"id":-5}' not in state
    assert compare_with_source(database, "public", "items", list(state.values())) == ([], [])
