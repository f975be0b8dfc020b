"""A set's stream through ``format("pgshovel")``: bounded reads exact, a killed pipeline resumes.

Real relay, Kafka, PostgreSQL and Spark: (a) ``spark.read`` of the whole topic and
of the range after a position returns exactly the mutations the validated stream
holds; (b) a user's ``readStream`` … ``foreachBatch`` pipeline
(``_pipeline.py``, a process of its own) killed -9 mid-stream and restarted from
its checkpoint ends with its table equal to the source, and no source
transaction was ever split across Spark micro-batches.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import ChildProcess, SandboxConnection
from pgshovel.spark_source import register
from pgshovel.spark_source.offsets import offset_document
from pgshovel.spark_source.records import batch_records, mutation_record
from pgshovel.stream.partitions import PartitionJoin
from pgshovel.stream.position import StreamPosition
from tests.integration.relay._relay import (
    RelayProcess,
    queue_drained,
    read_topic,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import create_topic
from tests.integration.relay.test_relay import prepare, run_workload, source_rows

pytestmark = [pytest.mark.integration]

PIPELINE = Path(__file__).with_name("_pipeline.py")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pgshovel.replication.config import SparkSettings
    from pgshovel.replication.spark import spark_session

    session = spark_session(
        SparkSettings(
            master="local[2]",
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        )
    )
    register(session)
    # Not stopped here: getOrCreate hands every fixture of this process the same session
    # (the replication tests' session fixture too), so stopping it would stop theirs; it
    # ends with that fixture or with the process.
    yield session


def _execute(dsn: str, *statements: str) -> None:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        connection.commit()
    finally:
        connection.close()


def _source_reader(spark: Any, kafka_config: dict[str, str], topic: str) -> Any:
    reader = spark.read.format("pgshovel").option("topic", topic)
    for key, value in kafka_config.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader


def _comparable(row: Any) -> tuple[Any, ...]:
    values = list(row)
    values[8] = round(values[8].timestamp(), 6)  # Spark hands back local naive datetimes
    return tuple(values)


def _joined(row: Any) -> tuple[Any, ...]:
    """What a partitioned read is compared on: not ``ordinal`` and ``partition`` (per
    partition), the batch and event id first (a batch's order across partitions)."""
    values = _comparable(row)
    return (values[1], values[3], *values[:1], *values[4:12])


def test_a_bounded_read_returns_exactly_the_committed_mutations(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    spark: Any,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:

        def drained() -> None:
            # Each step in batches of its own: the read from a position below has some after it.
            wait_for(lambda: queue_drained(database, cluster_name), 120, "the relay to drain")

        _execute(database, "INSERT INTO items VALUES (1, 10, 'a'), (2, 20, NULL), (3, 30, 'c')")
        drained()
        connection = psycopg2.connect(database)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (4, 40, 'rolled back')")
        connection.rollback()
        connection.close()
        _execute(database, "UPDATE items SET id = 5, value = 11 WHERE id = 1")
        drained()
        _execute(database, "DELETE FROM items WHERE id = 2")
        _execute(database, "TRUNCATE items", "INSERT INTO items VALUES (6, 60, 'after')")
        drained()
    finally:
        assert relay.stop() == 0, relay.output()
    topic = topic_of(cluster_name)
    batches = validated(read_topic(kafka_config, topic))
    expected = [_comparable(r) for batch in batches for r in batch_records(batch)]
    assert [row[6] for row in expected] == [
        *("INSERT", "INSERT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "INSERT")
    ]

    rows = _source_reader(spark, kafka_config, topic).load().collect()
    assert [_comparable(row) for row in rows] == expected
    update = rows[3].asDict()
    assert (update["key"], json.loads(update["old"])["id"]) == ('{"id":5}', 1)

    # From a position (an offset a query reported) to the end: the batches after it.
    middle = next(i for i, batch in enumerate(batches) if batch.mutations)
    start = json.dumps(offset_document(topic, batches[middle].position))
    tail = _source_reader(spark, kafka_config, topic).option("startingPosition", start).load()
    after = [_comparable(r) for batch in batches[middle + 1 :] for r in batch_records(batch)]
    assert [_comparable(row) for row in tail.collect()] == after and after
    latest = _source_reader(spark, kafka_config, topic).option("startingPosition", "latest")
    assert latest.load().count() == 0


def _spark_batches(dsn: str) -> list[tuple[int, dict[str, int]]]:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('spark_batches') IS NOT NULL")
            if not cursor.fetchone()[0]:  # type: ignore[index]
                return []
            cursor.execute("SELECT batch, transactions FROM spark_batches ORDER BY batch")
            return [(int(batch), dict(counts)) for batch, counts in cursor.fetchall()]
    finally:
        connection.close()


def _with_mutations(dsn: str) -> int:
    return sum(1 for _, counts in _spark_batches(dsn) if counts)


def test_a_killed_pipeline_resumes_from_its_checkpoint_with_whole_transactions(
    sandbox: SandboxConnection,
    database: str,
    make_database: Any,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    target = make_database("target")
    topic = topic_of(cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    arguments = [
        sys.executable,
        str(PIPELINE),
        kafka_config["bootstrap.servers"],
        json.dumps({k: v for k, v in kafka_config.items() if k != "bootstrap.servers"}),
        topic,
        str(tmp_path / "checkpoint"),
        target,
    ]
    pipelines: list[ChildProcess] = []
    stop = threading.Event()
    workload: list[dict[str, int]] = []

    def write() -> None:  # short rounds until stopped: the stream keeps flowing
        for seed in range(1000):
            workload.append(run_workload(database, 1, 5, seed=seed, pause=0.2))
            if stop.is_set():
                return

    def progress() -> str:
        applied = _spark_batches(target)
        return f"{len(applied)} micro-batch(es) applied\n{pipelines[-1].log_tail()}"

    thread = threading.Thread(target=write)
    try:
        _execute(database, "INSERT INTO items SELECT g, g, 'x' FROM generate_series(900, 909) g")
        _execute(database, "TRUNCATE items")
        thread.start()
        pipelines.append(ChildProcess("pipeline", arguments, tmp_path / "pipeline-1.log"))
        wait_for(lambda: _with_mutations(target) >= 2, 300, "micro-batches", progress)
        pipelines[0].kill()  # kill -9 of the driver, its JVM and its Python workers
        applied = _with_mutations(target)
        pipelines.append(ChildProcess("pipeline", arguments, tmp_path / "pipeline-2.log"))
        wait_for(lambda: _with_mutations(target) > applied, 300, "the restart", progress)
        stop.set()
        thread.join(120)
        assert sum(counts["committed"] for counts in workload) > 0
        _execute(database, "UPDATE items SET id = id + 100000 WHERE id IN (1, 2, 1001)")
        wait_for(lambda: queue_drained(database, cluster_name), 120, "the relay to drain")
        expected = source_rows(database)
        wait_for(lambda: source_rows(target) == expected, 300, "the pipeline", progress)
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(120)
        for pipeline in pipelines:
            pipeline.ensure_stopped()
        assert relay.stop() == 0, relay.output()

    # Whole source transactions per micro-batch: every transaction of the stream is in
    # exactly one micro-batch, with all of its mutations.
    stream = Counter(
        str(mutation.transaction)
        for batch in validated(read_topic(kafka_config, topic))
        for mutation in batch.mutations
    )
    seen: dict[str, int] = {}
    for batch, counts in _spark_batches(target):
        for transaction, count in counts.items():
            assert transaction not in seen, f"transaction {transaction} split: {seen} / {batch}"
            seen[transaction] = batch
            assert count == stream[transaction], (transaction, batch)
    assert set(seen) == set(stream)


def _all_partitions(
    kafka_config: dict[str, str], topic: str, partitions: int
) -> list[tuple[int, int, stream_pb2.Message]]:
    """Every message of every partition, as a plain consumer reads them."""
    consumer = Consumer({**kafka_config, "group.id": "pgshovel-test"})
    records: list[tuple[int, int, stream_pb2.Message]] = []
    try:
        for partition in range(partitions):
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
            consumer.assign([TopicPartition(topic, partition, 0)])
            while high and (not records or records[-1][:2] != (partition, high - 1)):
                record = consumer.poll(1.0)
                if record is None or record.error() is not None:
                    continue
                message = stream_pb2.Message.FromString(record.value() or b"")
                records.append((partition, int(record.offset() or 0), message))
    finally:
        consumer.close()
    return records


def test_a_partitioned_topic_yields_each_change_once(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    spark: Any,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    topic = topic_of(cluster_name)
    create_topic(sandbox, topic, partitions=2)
    config = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(config.read_text())
    document["writer"]["configuration"]["partitions"] = 2
    config.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        _execute(database, "INSERT INTO items SELECT g, g, 'n' FROM generate_series(1, 40) g")
        # Keys move: many of them to the other partition (written to both, yielded once).
        _execute(database, "UPDATE items SET id = id + 1000 WHERE id <= 20")
        _execute(database, "DELETE FROM items WHERE id > 30 AND id < 1000")
        _execute(database, "TRUNCATE items", "INSERT INTO items VALUES (7, 7, 'last')")
        wait_for(lambda: queue_drained(database, cluster_name), 120, "the relay to drain")
    finally:
        assert relay.stop() == 0, relay.output()
    records = _all_partitions(kafka_config, topic, 2)
    batches = list(PartitionJoin(StreamPosition.start((0, 0))).validate(records))
    written = sum(
        message.operation.rows.count
        for _partition, _offset, message in records
        if message.operation.WhichOneof("operation") == "rows"
    )
    expected = sorted(
        _joined(mutation_record(batch, 0, mutation))
        for batch in batches
        for mutation in batch.mutations
    )
    assert written > len(expected) == 40 + 20 + 10 + 1 + 1  # some changes travel twice

    rows = _source_reader(spark, kafka_config, topic).load().collect()
    assert sorted(_joined(row) for row in rows) == expected
    assert {row["partition"] for row in rows} == {0, 1}
