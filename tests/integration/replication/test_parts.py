"""Batches larger than the worker holds: applied in parts, committed once, discarded on rollback.

The stream is read ten messages at a time with ``part_mutations`` 7, so every
batch of the workload is applied in several parts inside one target
transaction. Two batches are first sent half-way and abandoned (a rollback by
the same publisher; a new publisher taking over) after parts of them were
applied: their parts must be discarded, the re-sent batch applied once. Both
targets end equal to the source, with nothing of the abandoned attempts left.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.replication.streams import KafkaStream
from pgshovel.replication.targets.parquet import ParquetTarget, change_files
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.replication.worker import Worker
from pgshovel.stream.publisher import Publisher
from tests.stored_state import applied_offset, parquet_state

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
from .test_parquet import source_rows, spark_rows
from .test_stream import stored_offset as postgres_offset

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def parquet_offset(path: Path) -> int:
    offset = applied_offset(parquet_state(path))
    return -1 if offset is None else offset


Batch = tuple[Any, Any, Any, list[Any]]


def split_batches(messages: list[Any]) -> list[Batch]:
    """(identifier, start tick, end tick, mutations) of each framed batch."""
    batches: list[Batch] = []
    for message in messages:
        operation = message.operation
        if operation.HasField("begin"):
            batches.append((operation.batch, operation.begin.start, operation.begin.end, []))
        elif operation.HasField("mutation"):
            batches[-1][3].append(operation.mutation)
    return batches


def poisoned(batch: Batch, key: int) -> list[Any]:
    """The batch's mutations after an INSERT of a row the source never had: applied, it
    would stay in the target unless the attempt holding it is discarded."""
    poison = stream_pb2.Mutation()
    poison.CopyFrom(next(m for m in batch[3] if m.operation == stream_pb2.Mutation.INSERT))
    poison.ClearField("provenance_of")  # it comes first: nothing before it to refer to
    for column in poison.new.columns:
        if column.name == "Id":
            column.value.int64 = key
    return [poison, *batch[3]]


def stream_with_abandoned_attempts(batches: list[Batch]) -> list[Any]:
    """The batches framed in order; the last two are first sent part-way and abandoned:
    one rolled back by its publisher, the other taken over by a new publisher."""
    publisher = Publisher(epoch=1)
    messages: list[Any] = []
    for batch in batches[:-2]:
        messages += publisher.frame_batch(*batch[:3], "v1", batch[3])
    rolled, taken = batches[-2], batches[-1]
    attempt = publisher.frame_batch(*rolled[:3], "v1", poisoned(rolled, 900_001))[:20]
    publisher.rewind(attempt[-1].header.sequence + 1)
    messages += [*attempt, publisher.rollback(rolled[0])]
    messages += publisher.frame_batch(*rolled[:3], "v1", rolled[3])
    # The next attempt's publisher dies after 15 messages; a new one sends the batch whole.
    messages += publisher.frame_batch(*taken[:3], "v1", poisoned(taken, 900_002))[:15]
    messages += Publisher(epoch=2).frame_batch(*taken[:3], "v1", taken[3])
    return messages


@pytest.mark.parametrize("kind", ["postgresql", "parquet"])
def test_batches_in_parts_converge_and_abandoned_parts_leave_nothing(
    kind: str,
    spark: Any,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="pgshovel.replication.worker")
    source, target_dsn = make_database("source"), make_database("target")
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS])
    ensure_topic(kafka_config, topic)
    parquet = tmp_path / "parquet"

    def worker() -> Worker:
        target = PostgresTarget(target_dsn) if kind == "postgresql" else ParquetTarget(str(parquet))
        settings = worker_configuration(target_dsn, kafka_config, topic, target=target)
        stream = KafkaStream(
            kafka_config["bootstrap.servers"],
            topic=topic,
            properties={k: v for k, v in kafka_config.items() if k != "bootstrap.servers"},
            max_batch_messages=10,
            poll_timeout=0.2,
            part_mutations=7,
        )
        settings = dataclasses.replace(settings, stream=stream)
        return Worker("test", "set", configuration, settings, spark)

    worker().run(lambda: True)  # the snapshot

    recorder = RecordingSource(source, [ITEMS])
    scratch, mutations = random_items_stream(
        recorder, Publisher(epoch=1), batches=6, per_batch=30, seed=5
    )
    recorder.close()
    messages = stream_with_abandoned_attempts(split_batches(scratch))
    publish(kafka_config, topic, messages)
    end = len(messages) - 1

    def applied() -> int:
        return postgres_offset(target_dsn) if kind == "postgresql" else parquet_offset(parquet)

    running = worker()
    running.run(lambda: applied() >= end)

    assert applied() == end
    log = caplog.text
    assert "applied part 3 of batch" in log, log[-3000:]
    # A batch applied in parts is timed from its first part (its mutations are all of them):
    # a line counted every part's mutations over the last part's seconds.
    in_parts = 0.0
    for line in log.splitlines():
        part = re.search(r"applied part \d+ of batch \d+ uncommitted: .* in ([\d.]+)s", line)
        if part:
            in_parts += float(part.group(1))
        if "ended without commit after" in line:
            in_parts = 0.0  # its parts are discarded; the re-sent batch is timed anew
        whole = re.search(r"applied \d+ batch\(es\), .* in ([\d.]+)s of applying", line)
        if whole:
            assert float(whole.group(1)) >= in_parts, log[-3000:]
            in_parts = 0.0
    assert log.count("ended without commit after") == 2, log[-3000:]
    assert running.metrics.mutations >= mutations
    if kind == "postgresql":
        assert dump(target_dsn, *ITEMS) == dump(source, *ITEMS)
        assert not relation_exists(target_dsn, "pgshovel_replication.audit"), "audit is off"
    else:
        assert spark_rows(spark, str(parquet), *ITEMS) == source_rows(source, *ITEMS)
        # Nothing of the parts is left but the committed version and committed change logs.
        versions = list((parquet / ITEMS[0] / ITEMS[1] / "current").iterdir())
        assert len(versions) == 1, versions
        logs = sorted((parquet / ITEMS[0] / ITEMS[1] / "changes").glob("*.parquet"))
        assert [str(log) for log in logs] == change_files(str(parquet), *ITEMS)
