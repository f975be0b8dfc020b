"""The table_formats group's work: a target of each kind, its table loaded, a stream of plans.

Everything goes through the worker's own targets (``DeltaTarget``,
``IcebergTarget``, ``ParquetTarget``, ``PostgresTarget``) the way the worker
drives them, without services: the table is loaded through the target's
snapshot sink (the loader's path: COPY text per key range, then
``finish_snapshot``), and each micro-batch is a ``CommittedBatch`` of
protobuf mutations planned by the real planner (``plan_micro_batch``) and
applied with ``target.apply``. The stream is the same for every size: each
micro-batch inserts new keys after the highest one and updates and deletes
keys among the most recent ones (what an OLTP table's changes look like), so a
table 100 times larger gets exactly the same changes, only further up the key
space.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.source import Column, KeyRange, TableShape, cast_is_exact
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import MicroBatchPlan, plan_micro_batch
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.state import Phase, WorkerState

SHAPE = TableShape(
    "public",
    "bench_tf",
    (
        Column("id", "bigint", "int8", True, 1),
        Column("name", "text", "text", False, 2),
        Column("qty", "integer", "int4", False, 3),
    ),
    ("id",),
    relation=1,
)
#: rows per key range of the snapshot load (a Spark task's share in the worker)
RANGE_ROWS = 10_000
CLUSTER = "bench"
SET = "tf"
SNAPSHOT = "100:100:"
KINDS = ("delta", "iceberg", "parquet")
Op = stream_pb2.Mutation


def position(offset: int) -> StreamPosition:
    """The stream position after message ``offset`` of a one-partition topic."""
    return StreamPosition((PartitionCursor(offset + 1, b"p" * 16, 0, 1),), ())


def state(phase: Phase, offset: int) -> WorkerState:
    return WorkerState(phase, SNAPSHOT, position(offset), (SHAPE,), horizon="120:121:")


def make_target(kind: str, where: str, maintenance: bool = False, max_small_files: int = 16) -> Any:
    """The worker's target of ``kind`` on directory (or DSN for postgresql) ``where``."""
    if kind == "delta":
        from pgshovel.replication.targets.delta import DeltaTarget

        return DeltaTarget(where, maintenance=maintenance, max_small_files=max_small_files)
    if kind == "iceberg":
        from pgshovel.replication.targets.iceberg import IcebergTarget

        return IcebergTarget(where, maintenance=maintenance, max_small_files=max_small_files)
    if kind == "parquet":
        from pgshovel.replication.targets.parquet import ParquetTarget

        return ParquetTarget(where)
    if kind == "postgresql":
        from pgshovel.replication.targets.postgresql import PostgresTarget

        return PostgresTarget(where)
    raise ValueError(f"unknown target kind {kind!r}")


def load(kind: str, where: str, rows: int) -> None:
    """Open the target and load the table with ``rows`` rows through its snapshot sink."""
    target = make_target(kind, where)
    try:
        target.open(CLUSTER, SET)
        target.begin_snapshot(state("snapshot", 0))
        sink = target.snapshot_sink()
        for index, first in enumerate(range(0, rows, RANGE_ROWS)):
            keys = range(first, min(rows, first + RANGE_ROWS))

            def copy_out(file: IO[bytes], keys: range = keys) -> None:
                file.write("".join(f"{n}\tname {n}\t{n % 1000}\n" for n in keys).encode())

            sink.load_range(KeyRange(SHAPE, index, None, None), copy_out)
        target.finish_snapshot(state("streaming", 0))
    finally:
        target.close()


def _row(message: Any, key: int, name: str | None = None, qty: int | None = None) -> None:
    message.columns.add(name="id").value.int64 = key
    if name is not None:
        message.columns.add(name="name").value.string = name
        message.columns.add(name="qty").value.int64 = qty if qty is not None else 0


@dataclass
class StreamMaker:
    """Micro-batches of ``changes`` mutations against a table of ``rows`` keys: a third
    inserts of new keys, a half updates, a sixth deletes, both among the live keys of the
    ``2 * changes`` highest (deterministic: the same for every size, shifted by it)."""

    rows: int
    changes: int
    seed: int = 11

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # noqa: S311 (benchmark data)
        window = max(1, min(self.rows, 2 * self.changes))
        self.live = list(range(self.rows - window, self.rows))
        self.next_key = self.rows
        self.txid = 1000
        #: rows the table holds after the micro-batches made so far
        self.expected = self.rows

    def batch(self, number: int) -> CommittedBatch:
        inserts = self.changes // 3
        deletes = self.changes // 6
        updates = self.changes - inserts - deletes
        self.txid += 1
        mutations: list[stream_pb2.Mutation] = []

        def mutation(operation: Any) -> Any:
            return Op(
                schema=SHAPE.schema,
                table=SHAPE.name,
                operation=operation,
                transaction=self.txid,
                timestamp=5,
            )

        touched = self.rng.sample(self.live, min(len(self.live), updates + deletes))
        gone = set(touched[:deletes])
        for key in touched:
            if key in gone:
                message = mutation(Op.DELETE)
                _row(message.old, key)
            else:
                message = mutation(Op.UPDATE)
                _row(message.old, key)
                _row(message.new, key, f"updated {key} {self.txid}", self.rng.randrange(1000))
            mutations.append(message)
        for key in range(self.next_key, self.next_key + inserts):
            message = mutation(Op.INSERT)
            _row(message.new, key, f"new {key}", 7)
            mutations.append(message)
        self.live = [key for key in self.live if key not in gone]
        self.live.extend(range(self.next_key, self.next_key + inserts))
        self.live = self.live[-2 * self.changes :]
        self.next_key += inserts
        self.expected += inserts - len(gone)
        return CommittedBatch(
            node=b"n" * 16,
            batch_id=number,
            begin=stream_pb2.Begin(),
            mutations=tuple(mutations),
            position=position(number),
            markers=(),
        )

    def plans(self, count: int, first: int = 1) -> Iterator[tuple[MicroBatchPlan, WorkerState]]:
        """``count`` planned micro-batches with the state after each."""
        for number in range(first, first + count):
            plan = plan_micro_batch(
                [self.batch(number)],
                (SHAPE,),
                (),
                can_alter_type=cast_is_exact,
                key_text=key_text,
            )
            yield plan, state("streaming", number)


def row_count(kind: str, target: Any) -> int:
    """Rows the target's copy of the table holds now."""
    if kind in ("delta", "iceberg"):
        return int(target.tables.read(SHAPE).num_rows)
    if kind == "parquet":
        from pgshovel.replication.targets._parquet_readers import read_current_text

        return len(read_current_text(target.path, SHAPE.schema, SHAPE.name))
    import psycopg2
    from psycopg2 import sql

    connection = psycopg2.connect(target.dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(SHAPE.schema, SHAPE.name))
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return int(row[0]) if row else 0


def data_files(kind: str, target: Any) -> int:
    """The data files the table's current version refers to (Delta and Iceberg targets)."""
    table = target.tables.table(SHAPE)
    if kind == "delta":
        return len(table.file_uris())
    return sum(1 for _ in table.scan().plan_files())
