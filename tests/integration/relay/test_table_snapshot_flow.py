"""A table-topic snapshot does not hold the stream back: other tables' commits keep arriving.

A table of ``ROWS`` rows is snapshotted in chunks while a probe commits a row
into another table every ``PROBE_SECONDS``; a consumer of the set topic notes
when each probe arrives. Probes committed while the snapshot runs must arrive
before it ends, and the test prints their latency next to the latency once it
is done (the figures in the report of issue 15).
"""

from __future__ import annotations

import hashlib
import statistics
import threading
import time
from pathlib import Path

import psycopg2
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.rows import mutations_in
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    topic_of,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import fold, read_all, snapshots_done

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROWS = 100_000
CHUNK_ROWS = 5_000
PROBE_SECONDS = 0.05


def probe(dsn: str, stop: threading.Event, committed: dict[int, float]) -> None:
    """Commit one row into ``other`` every PROBE_SECONDS; note when each committed."""
    connection = psycopg2.connect(dsn)
    try:
        number = 0
        while not stop.wait(PROBE_SECONDS):
            number += 1
            with connection, connection.cursor() as cursor:
                cursor.execute("INSERT INTO other VALUES (%s)", (number,))
            committed[number] = time.monotonic()
    finally:
        connection.close()


def arrivals(
    kafka_config: dict[str, str], topic: str, stop: threading.Event, seen: dict[int, float]
) -> None:
    """Note when each insert into ``other`` reaches the set topic."""
    consumer = Consumer(
        {**kafka_config, "group.id": "pgshovel-test-flow", "enable.auto.commit": "false"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while not stop.is_set():
            record = consumer.poll(0.05)
            if record is None or record.error() is not None or record.value() is None:
                continue
            message = stream_pb2.Message.FromString(record.value() or b"")
            for mutation in mutations_in(message):
                if mutation.table == "other" and mutation.operation == stream_pb2.Mutation.INSERT:
                    number = int(mutation.new.columns[0].value.int64)
                    seen.setdefault(number, time.monotonic())
    finally:
        consumer.close()


def _summary(latencies: list[float]) -> str:
    if not latencies:
        return "none"
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"n={len(ordered)} p50={statistics.median(ordered) * 1000:.0f}ms "
        f"p95={p95 * 1000:.0f}ms max={ordered[-1] * 1000:.0f}ms"
    )


def test_other_tables_flow_while_a_big_table_is_snapshotted(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE big (id integer PRIMARY KEY, payload text NOT NULL)")
        cursor.execute("CREATE TABLE other (id integer PRIMARY KEY)")
        cursor.execute(
            "INSERT INTO big SELECT n, md5(n::text) FROM generate_series(1, %s) n", (ROWS,)
        )
    connection.close()
    install(zookeeper, cluster_name, database, [{"name": "big"}, {"name": "other"}])
    prefix = topic_of(cluster_name)
    config = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(config.read_text())
    document["writer"]["configuration"]["table_topics"] = {"snapshot_chunk_rows": CHUNK_ROWS}
    config.write_text(yaml.safe_dump(document))

    committed: dict[int, float] = {}
    seen: dict[int, float] = {}
    stop, stop_reading = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=probe, args=(database, stop, committed)),
        threading.Thread(target=arrivals, args=(kafka_config, prefix, stop_reading, seen)),
    ]
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        wait_for(lambda: "leading" in relay.output(), 30, "the relay to lead", relay.output)
        for thread in threads:
            thread.start()
        wait_for(
            lambda: snapshots_done(kafka_config, prefix, [f"{prefix}.big"]),
            240,
            "the snapshot of big to finish",
            relay.output,
        )
        done = time.monotonic()
        time.sleep(3.0)  # probes once the snapshot is done
        stop.set()
        threads[0].join()
        wait_for(lambda: set(seen) >= set(committed), 60, "the last probes", relay.output)
        wait_for(
            lambda: queue_drained(database, cluster_name), 60, "the relay to drain", relay.output
        )
    finally:
        stop.set()
        stop_reading.set()
        for thread in threads:
            if thread.is_alive():
                thread.join()
        assert relay.stop() == 0, relay.output()
    # Probes committed and published while the snapshot ran (more than a second before its
    # end was noticed, which takes a read of the snapshots topic).
    during = [seen[n] - committed[n] for n in committed if n in seen and seen[n] < done - 1.0]
    after = [seen[n] - committed[n] for n in committed if n in seen and committed[n] > done]
    print(
        f"\nset-topic latency of another table's commits while {ROWS} rows are snapshotted "
        f"in chunks of {CHUNK_ROWS}: {_summary(during)}; after: {_summary(after)}"
    )
    assert len(during) >= 10, (len(during), _summary(after))
    # Nothing lost: every probe reached the set topic, the table topic holds the whole table.
    assert set(seen) == set(committed)
    big = fold(read_all(kafka_config, f"{prefix}.big", limit=120))
    assert len(big) == ROWS
    assert big[b'{"id":4242}'] == {
        "id": 4242,
        "payload": hashlib.md5(b"4242", usedforsecurity=False).hexdigest(),
    }
