"""Staged apply into PostgreSQL: any cut of a micro-batch into tasks and partitions, one commit.

Random micro-batches of row changes (inserts, updates that keep or move keys,
deletes, TRUNCATE, an unkeyed table with duplicate rows) are encoded as the
relay's ROWS messages, routed to partitions as the relay routes them, cut into
tasks at random batch boundaries (or, one partition, one task: a table's one
stage, committed without the sort across stages), reduced (by the general
reduce and by the PostgreSQL stage's, straight to COPY lines) and staged by
separate connections, and committed once; after every micro-batch the copy must equal a model that
applied the same changes one by one, in order.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest
from psycopg2 import sql

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.staging.postgres import (
    commit_table,
    drop_stages,
    leftover_stages,
    stage_prefix,
    write_stages,
)
from pgshovel.replication.staging.reduce import reduce_messages
from pgshovel.source import Column, TableShape, connect
from pgshovel.stream.rows import RowsBuilder, copy_line, partition_of

pytestmark = pytest.mark.integration

KEYED = TableShape(
    "public",
    "acct",
    (Column("id", "integer", "int4", True, 1), Column("note", "text", "text", False, 2)),
    ("id",),
)
UNKEYED = TableShape(
    "public",
    "journal",
    (Column("a", "integer", "int4", False, 1), Column("b", "text", "text", False, 2)),
    (),
)
INSERT, UPDATE = stream_pb2.Mutation.INSERT, stream_pb2.Mutation.UPDATE
DELETE, TRUNCATE = stream_pb2.Mutation.DELETE, stream_pb2.Mutation.TRUNCATE
NOTES = ["x", "tab\there", "back\\slash", None, "zoë", "\\N", ""]


def _row_table(shape: TableShape) -> bytes:
    entry = stream_pb2.RowTable(set_version="v")
    entry.shape.schema, entry.shape.name = shape.schema, shape.name
    entry.shape.key.extend(shape.key)
    for column in shape.columns:
        entry.shape.columns.add(name=column.name, type_name=column.type_name)
    return entry.SerializeToString()


class Model:
    """The source as the changes leave it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.keyed: dict[int, str | None] = {key: f"n{key}" for key in range(20)}
        self.unkeyed: Counter[tuple[int, str | None]] = Counter({(1, "a"): 2, (2, None): 1})
        self.event = 0

    def changes(self) -> Iterator[tuple[TableShape, int, list | None, list | None]]:
        rng = self.rng
        for _ in range(rng.randint(1, 12)):
            self.event += 1
            roll = rng.random()
            if roll < 0.03:
                table = rng.choice([KEYED, UNKEYED])
                (self.keyed if table is KEYED else self.unkeyed).clear()
                yield table, TRUNCATE, None, None
            elif roll < 0.6:
                yield from self._keyed(rng)
            else:
                yield from self._unkeyed(rng)

    def _keyed(self, rng: random.Random):
        key = rng.randrange(40)
        if key not in self.keyed:
            self.keyed[key] = rng.choice(NOTES)
            yield KEYED, INSERT, None, [str(key), self.keyed[key]]
            return
        old = [str(key), self.keyed[key]]
        roll = rng.random()
        if roll < 0.3:
            del self.keyed[key]
            yield KEYED, DELETE, old, None
            return
        new_key = key if roll < 0.7 else rng.randrange(40, 80)
        if new_key != key and new_key in self.keyed:
            new_key = key
        note = rng.choice(NOTES)
        del self.keyed[key]
        self.keyed[new_key] = note
        yield KEYED, UPDATE, old, [str(new_key), note]

    def _unkeyed(self, rng: random.Random):
        row = (rng.randrange(4), rng.choice(["a", "b", None]))
        if self.unkeyed[row] and rng.random() < 0.5:
            self.unkeyed[row] -= 1
            yield UNKEYED, DELETE, [str(row[0]), row[1]], None
            return
        self.unkeyed[row] += 1
        yield UNKEYED, INSERT, None, [str(row[0]), row[1]]


def _messages(
    model: Model, batches: int, partitions: int
) -> list[list[tuple[int, stream_pb2.MutationBatch]]]:
    """Each partition's (batch ordinal, message) list, a message per batch per partition."""
    out: list[list[tuple[int, stream_pb2.MutationBatch]]] = [[] for _ in range(partitions)]
    for ordinal in range(batches):
        builders = [RowsBuilder() for _ in range(partitions)]
        for table, operation, old, new in model.changes():
            if operation == TRUNCATE:
                targets = set(range(partitions))
            elif not table.key:
                targets = {partition_of("public", table.name, None, partitions)}
            else:
                targets = {
                    partition_of("public", table.name, (row[0],), partitions)
                    for row in (old, new)
                    if row is not None
                }
            for partition in targets:
                builders[partition].add(
                    _row_table(table),
                    model.event,
                    operation,
                    1000 + ordinal,
                    1,
                    None if old is None else copy_line(old),
                    None if new is None else copy_line(new),
                )
        for partition, builder in enumerate(builders):
            payload = builder.take()
            if payload is not None:
                out[partition].append((ordinal, stream_pb2.MutationBatch.FromString(payload)))
    return out


def _copy(dsn: str) -> tuple[dict[int, str | None], Counter[tuple[int, str | None]]]:
    connection = connect(dsn, "test")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, note FROM acct")
            keyed = dict(cursor.fetchall())
            cursor.execute("SELECT a, b FROM journal")
            unkeyed = Counter(cursor.fetchall())
        connection.rollback()
    finally:
        connection.close()
    return keyed, unkeyed


@pytest.mark.parametrize(
    ("copy", "whole"),
    [(False, False), (True, False), (True, True)],
    ids=["general-reduce", "copy-reduce", "copy-reduce-one-task"],
)
@pytest.mark.parametrize("seed", range(6))
def test_any_cut_into_tasks_and_partitions_commits_the_micro_batch_exactly(
    database, seed, copy, whole
):
    rng = random.Random(seed)
    model = Model(rng)
    driver = connect(database, "test")
    with driver.cursor() as cursor:
        cursor.execute(
            "CREATE SCHEMA pgshovel_replication; "
            "CREATE TABLE acct (id integer PRIMARY KEY, note text); "
            "CREATE TABLE journal (a integer, b text)"
        )
        cursor.executemany("INSERT INTO acct VALUES (%s, %s)", list(model.keyed.items()))
        cursor.executemany("INSERT INTO journal VALUES (%s, %s)", list(model.unkeyed.elements()))
    driver.commit()
    shapes = {KEYED.identity: KEYED, UNKEYED.identity: UNKEYED}
    try:
        for micro_batch in range(8):
            partitions = 1 if whole else rng.choice([1, 2, 4])
            prefix = stage_prefix("c", "s", f"m{micro_batch}")
            stages = []
            tasks = 0
            for messages in _messages(model, rng.randint(1, 6), partitions):
                cuts = (
                    []
                    if whole
                    else sorted(
                        rng.sample(range(1, len(messages)), max(0, min(2, len(messages) - 1)))
                    )
                )
                for start, end in zip([0, *cuts], [*cuts, len(messages)], strict=True):
                    tasks += 1
                    worker = connect(database, "task")
                    try:
                        staged = reduce_messages(messages[start:end], shapes, copy=copy)
                        stages += write_stages(worker, prefix, tasks, staged)
                    finally:
                        worker.close()
            with driver.cursor() as cursor:
                for shape in (KEYED, UNKEYED):
                    mine = [stage for stage in stages if stage.table == shape.name]
                    if mine:
                        commit_table(cursor, shape, mine)
                drop_stages(cursor, leftover_stages(cursor, prefix))
            driver.commit()
            assert _copy(database) == (model.keyed, model.unkeyed), f"micro-batch {micro_batch}"
        with driver.cursor() as cursor:
            assert leftover_stages(cursor, stage_prefix("c", "s")) == []
    finally:
        driver.close()


def test_a_copy_missing_a_removed_row_is_an_error_naming_the_table(database):
    driver = connect(database, "test")
    with driver.cursor() as cursor:
        cursor.execute(
            "CREATE SCHEMA pgshovel_replication; CREATE TABLE journal (a integer, b text); "
            "INSERT INTO journal VALUES (1, 'a')"
        )
    driver.commit()
    builder = RowsBuilder()
    for event in (1, 2):
        builder.add(_row_table(UNKEYED), event, DELETE, 5, 1, copy_line(["1", "a"]), None)
    payload = builder.take()
    assert payload is not None
    staged = reduce_messages(
        [(0, stream_pb2.MutationBatch.FromString(payload))], {UNKEYED.identity: UNKEYED}
    )
    stages = write_stages(driver, stage_prefix("c", "s", "x"), 0, staged)
    with (
        driver.cursor() as cursor,
        pytest.raises(StreamError, match=r"'public\.journal' lacks 1 of"),
    ):
        commit_table(cursor, UNKEYED, stages)
    driver.rollback()
    with driver.cursor() as cursor:
        cursor.execute(sql.SQL("SELECT count(*) FROM journal"))
        assert cursor.fetchone() == (1,)
    driver.close()


def test_the_target_commits_the_attempts_it_is_given_and_drops_every_stage(database):
    """A task Spark ran twice left two attempts' stages: the commit applies the attempt whose
    stages it was handed, once, with the state, and drops both; a crash's stages of another
    micro-batch are dropped when the target opens."""
    from pgshovel.replication.targets.postgresql import PostgresTarget
    from pgshovel.stream.position import StreamPosition
    from pgshovel.stream.state import WorkerState

    driver = connect(database, "test")
    with driver.cursor() as cursor:
        cursor.execute(
            "CREATE SCHEMA pgshovel_replication; "
            "CREATE TABLE acct (id integer PRIMARY KEY, note text); "
            "CREATE TABLE journal (a integer, b text); INSERT INTO acct VALUES (1, 'one')"
        )
    driver.commit()
    shapes = {KEYED.identity: KEYED, UNKEYED.identity: UNKEYED}
    builder = RowsBuilder()
    builder.add(_row_table(KEYED), 1, UPDATE, 5, 1, copy_line(["1", "one"]), copy_line(["2", "x"]))
    builder.add(_row_table(UNKEYED), 2, INSERT, 5, 1, None, copy_line(["7", "j"]))
    payload = builder.take()
    assert payload is not None
    staged = reduce_messages([(0, stream_pb2.MutationBatch.FromString(payload))], shapes)
    crashed = stage_prefix("c", "s", "crashed")
    crash = connect(database, "crash")
    write_stages(crash, crashed, 0, staged)
    crash.close()
    target = PostgresTarget(database)
    try:
        target.open("c", "s")
        with driver.cursor() as cursor:
            assert leftover_stages(cursor, stage_prefix("c", "s")) == []
        driver.rollback()
        sink, prefix = target.stage_sink("m1")
        sink.stage(0, 0, staged)  # the attempt Spark lost after it committed
        stages = sink.stage(0, 1, staged)
        position = StreamPosition.start((0, 0))
        state = WorkerState("streaming", "10:10:", position, tables=(KEYED, UNKEYED))
        assert target.commit_stages(prefix, stages, state) == 3
    finally:
        target.close()
    assert _copy(database) == ({2: "x"}, Counter({(7, "j"): 1}))
    with driver.cursor() as cursor:
        assert leftover_stages(cursor, stage_prefix("c", "s")) == []
        cursor.execute("SELECT count(*) FROM pgshovel_replication.worker_state")
        assert cursor.fetchone() == (1,)
    driver.close()
