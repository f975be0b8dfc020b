"""Provenance in the targets: the Parquet change log's column and the PostgreSQL audit table.

The stream is the seeded Items workload with provenance stamped by hand (two
users, three application names, an annotation on one transaction, some
batches without provenance), its last two batches first sent part-way and
abandoned (``test_parts``). The PostgreSQL worker (the real CLI, ``audit:
true``) applies batches in parts and is killed with -9 in the middle: in the
end the audit table holds exactly one row per committed mutation with its
provenance, none of the abandoned attempts and none of the snapshot load.
The Parquet change log carries each mutation's provenance, null where there
is none, and a change log file written before the column existed still reads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient

from pgshovel.protocol import stream_pb2
from pgshovel.replication.provenance import stamp_of
from pgshovel.replication.streams import KafkaStream
from pgshovel.replication.targets.parquet import ParquetTarget, change_files, read_changes
from pgshovel.replication.worker import Worker
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import connect
from pgshovel.stream.publisher import Publisher
from tests.stored_state import sole_postgres_state

from ._process import WorkerProcess, wait_for, write_replication_yml
from ._recording import RecordingSource
from ._support import (
    dump,
    ensure_topic,
    execute,
    publish,
    relation_exists,
    set_configuration,
    worker_configuration,
)
from ._workload import ITEMS, ITEMS_DDL, random_items_stream
from .test_parquet import stored_offset as parquet_offset
from .test_parts import split_batches, stream_with_abandoned_attempts
from .test_stream import stored_offset as postgres_offset

pytestmark = [pytest.mark.integration, pytest.mark.spark]

#: The transaction (batch index) whose mutations carry an annotation.
ANNOTATED = 2
Expected = dict[tuple[int, int], tuple[str, tuple[Any, ...] | None]]


def stamp(messages: list[stream_pb2.Message]) -> None:
    """Stamp the mutations of ``messages`` in place: every fourth batch has no provenance
    (a table captured without it), the others alternate two users and three applications,
    two mutations in a row alike; batch ``ANNOTATED`` carries a request id, some have no
    client address or query id."""
    number, index = -1, 0
    for message in messages:
        operation = message.operation
        if operation.HasField("begin"):
            number += 1
            index = 0
        if not operation.HasField("mutation") or number % 4 == 3:
            continue
        index += 1
        pair = (index + 1) // 2
        operation.mutation.provenance.CopyFrom(
            stream_pb2.Provenance(
                current_user="alice" if pair % 2 else "bob",
                session_user="app_login",
                application_name=f"app-{number % 3}",
                client_addr="" if number % 5 == 1 else f"10.0.{number % 7}.{pair}",
                query_id=0 if number % 6 == 0 else -(number * 1000 + pair),
                annotation=f"request {number}\t✓" if number == ANNOTATED else "",
            )
        )


def stamped_stream(source: str, batches: int, seed: int) -> tuple[list[Any], Expected]:
    """The stamped workload with two abandoned attempts; what each committed mutation must
    leave: (batch id, mutation id) -> (operation, provenance). Batches of 30 mutations: an
    abandoned attempt is cut before its Commit."""
    recorder = RecordingSource(source, [ITEMS])
    scratch, _ = random_items_stream(
        recorder, Publisher(epoch=1), batches=batches, per_batch=30, seed=seed
    )
    recorder.close()
    stamp(scratch)
    committed = split_batches(scratch)
    expected: Expected = {}
    for identifier, _, _, mutations in committed:
        for mutation in mutations:
            found = stamp_of(mutation)
            operation = stream_pb2.Mutation.Operation.Name(mutation.operation)
            expected[(identifier.id, mutation.id)] = (operation, None if found is None else found)
    assert len(expected) == sum(len(batch[3]) for batch in committed), "ids are unique"
    assert refer(committed) > 0
    return stream_with_abandoned_attempts(committed), expected


def refer(committed: list[Any]) -> int:
    """Send a provenance once per run, as the relay does: a mutation whose provenance is
    the previous one's refers to the mutation that carries it (``provenance_of``); the
    worker's reader resolves it. Returns how many refer."""
    referring = 0
    for _, _, _, mutations in committed:
        carrier: stream_pb2.Mutation | None = None
        for mutation in mutations:
            if not mutation.HasField("provenance"):
                carrier = None
            elif carrier is not None and mutation.provenance == carrier.provenance:
                mutation.ClearField("provenance")
                mutation.provenance_of = carrier.id
                referring += 1
            else:
                carrier = mutation
    return referring


def audit_rows(dsn: str) -> list[tuple[Any, ...]]:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT batch_id, mutation_id, operation, current_user_name, session_user_name, "
            "application_name, host(client_addr), query_id, annotation, cluster, set_name, key "
            "FROM pgshovel_replication.audit"
        )
        rows = cursor.fetchall()
    connection.close()
    return rows


def query_one(dsn: str, statement: str) -> Any:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(statement)
        row = cursor.fetchone()
    connection.close()
    return None if row is None else row[0]


def streaming(dsn: str) -> bool:
    state = sole_postgres_state(dsn)
    return state is not None and state.phase == "streaming"


def committed_by(messages: list[stream_pb2.Message], offset: int) -> set[tuple[int, int]]:
    """(batch id, mutation id) of the mutations of batches whose Commit is at or before
    ``offset`` (the topic holds ``messages`` from offset 0)."""
    done: set[tuple[int, int]] = set()
    pending: list[tuple[int, int]] = []
    for message in messages[: offset + 1]:
        operation = message.operation
        if operation.HasField("begin"):
            pending = []
        elif operation.HasField("mutation"):
            pending.append((operation.batch.id, operation.mutation.id))
        elif operation.HasField("commit"):
            done.update(pending)
    return done


def as_seen(expected: Expected) -> dict[tuple[int, int], tuple[Any, ...]]:
    """The expected rows as the audit table shows them (a gap is NULL)."""
    return {
        key: (operation, *((None,) * 6 if found is None else tuple(found)))
        for key, (operation, found) in expected.items()
    }


@pytest.mark.slow
def test_audit_rows_exactly_once_through_kill_parts_and_abandoned_batches(
    sandbox: SandboxConnection,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
    worker_processes: list[WorkerProcess],
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS])
    zookeeper.create(f"/{cluster_name}/sets/set", configuration.SerializeToString(), makepath=True)
    ensure_topic(kafka_config, topic)
    replication_yml = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target, "audit": True},
        },
        # Reads of 10 messages end inside every batch (30 mutations), and a part is taken
        # from two mutations on: every batch, the abandoned attempts (20 and 15 messages)
        # included, is applied in parts whatever the fetch sizes.
        max_batch_messages=10,
        part_mutations=2,
    )

    def start() -> WorkerProcess:
        worker = WorkerProcess(
            replication_yml, cluster_name, sandbox.zookeeper_hosts, tmp_path / "worker.log"
        )
        worker_processes.append(worker)
        return worker

    worker = start()
    wait_for(lambda: streaming(target), "the snapshot", worker)
    assert relation_exists(target, "pgshovel_replication.audit")
    assert query_one(target, "SELECT count(*) FROM pgshovel_replication.audit") == 0, (
        "a snapshot load writes no audit rows"
    )
    messages, expected = stamped_stream(source, batches=60, seed=11)
    publish(kafka_config, topic, messages)
    end = len(messages) - 1
    wait_for(lambda: postgres_offset(target) > end // 3, "a third of the stream", worker)
    worker.kill()
    stopped_at = postgres_offset(target)
    assert stopped_at < end, "the kill should have hit the middle of the stream"
    # Exactly the mutations of the batches committed up to the stored position.
    at_kill = {(row[0], row[1]) for row in audit_rows(target)}
    assert 0 < len(at_kill) < len(expected)
    assert at_kill == committed_by(messages, stopped_at)
    assert len(audit_rows(target)) == len(at_kill)

    worker = start()
    wait_for(lambda: postgres_offset(target) == end, "the end of the stream", worker)
    assert worker.stop() == 0
    log = (tmp_path / "worker.log").read_text()
    assert "applied part 1 of batch" in log
    assert log.count("ended without commit after") >= 2, log[-3000:]

    rows = audit_rows(target)
    seen = {(batch, mutation): tuple(rest[:7]) for batch, mutation, *rest in rows}
    assert len(rows) == len(seen) == len(expected), "one audit row per applied mutation"
    assert seen == as_seen(expected)
    assert {(row[9], row[10]) for row in rows} == {(cluster_name, "set")}
    # The poisoned INSERTs of the abandoned attempts left no row.
    assert not [row for row in rows if row[11] and row[11]["Id"] in ("900001", "900002")]
    annotated = [row for row in rows if row[8] is not None]
    assert annotated and {row[8] for row in annotated} == {f"request {ANNOTATED}\t✓"}
    assert {row[3] for row in rows} == {"alice", "bob", None}
    assert dump(target, *ITEMS) == dump(source, *ITEMS)


def test_parquet_change_log_carries_provenance_and_old_files_still_read(
    spark: Any,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    tmp_path: Path,
) -> None:
    source = make_database("source")
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS])
    ensure_topic(kafka_config, topic)
    output = tmp_path / "parquet"

    def worker() -> Worker:
        settings = worker_configuration("", kafka_config, topic, target=ParquetTarget(str(output)))
        stream = KafkaStream(
            kafka_config["bootstrap.servers"],
            topic=topic,
            properties={k: v for k, v in kafka_config.items() if k != "bootstrap.servers"},
            max_batch_messages=10,
            poll_timeout=0.2,
            part_mutations=7,
        )
        return Worker(
            "test", "set", configuration, dataclasses.replace(settings, stream=stream), spark
        )

    worker().run(lambda: True)  # the snapshot
    messages, expected = stamped_stream(source, batches=6, seed=3)
    publish(kafka_config, topic, messages)
    end = len(messages) - 1
    worker().run(lambda: parquet_offset(output) >= end)
    assert parquet_offset(output) == end

    def read() -> dict[tuple[int, int], tuple[Any, ...]]:
        frame = read_changes(spark, str(output), *ITEMS)
        assert frame is not None
        rows = frame.select("batch_id", "mutation_id", "operation", "provenance").collect()
        found = {}
        for row in rows:
            provenance = row["provenance"]
            parts = (None,) * 6 if provenance is None else tuple(provenance.asDict().values())
            found[(row["batch_id"], row["mutation_id"])] = (row["operation"], *parts)
        assert len(found) == len(rows) == len(expected)
        return found

    assert read() == as_seen(expected)
    # A file written before the column existed: the same rows without it still read,
    # their provenance null, the other files' intact.
    oldest = Path(change_files(str(output), *ITEMS)[0])
    table = pq.read_table(oldest)
    assert "provenance" in table.column_names
    pq.write_table(table.drop_columns(["provenance"]), oldest)
    batch_ids, mutation_ids = table.column("batch_id"), table.column("mutation_id")
    old = set(zip(batch_ids.to_pylist(), mutation_ids.to_pylist(), strict=True))
    wanted = as_seen(expected)
    for key in old:
        wanted[key] = (wanted[key][0], *(None,) * 6)
    assert read() == wanted
