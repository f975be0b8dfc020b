"""The Delta and Iceberg targets on real tables: net effect per key, schema change, recovery.

Plans are made by the real planner from hand-built batches; the tables are
read back through delta-rs and pyiceberg. A crash between two table commits
of one micro-batch is simulated by a commit that raises: a new target on the
same directory completes that micro-batch from its written-ahead effects,
exactly once.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.config import parse_configuration
from pgshovel.replication.mutations import key_text
from pgshovel.replication.tables import delta_version_at, iceberg_snapshot_at
from pgshovel.replication.targets import _arrow, _parquet_chunks
from pgshovel.replication.targets._tablefmt import TableFormatTarget
from pgshovel.replication.targets.delta import DeltaTarget
from pgshovel.replication.targets.iceberg import IcebergTarget
from pgshovel.source import Chunk, Column, KeyRange, TableShape, cast_is_exact
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import plan_micro_batch
from pgshovel.stream.shapes import shape_to_proto
from pgshovel.stream.state import WorkerState
from tests._positions import after

ID = Column("id", "integer", "int4", True, 1)
A = Column("a", "text", "text", False, 2)
B = Column("b", "bigint", "int8", False, 3)
T = TableShape("public", "t", (ID, A), ("id",), relation=10)
U = TableShape("public", "u", (ID, A), ("id",), relation=11)
Op = stream_pb2.Mutation


def row(message: Any, key: int, text: str | None = None, b: int | None = None) -> None:
    message.columns.add(name="id").value.int64 = key
    value = message.columns.add(name="a").value
    if text is None:
        value.null = stream_pb2.Value.NULL
    else:
        value.string = text
    if b is not None:
        message.columns.add(name="b").value.int64 = b


def mutation(
    table: str, operation: int, old: int | None = None, new: int | None = None, **values: Any
) -> stream_pb2.Mutation:
    message = Op(schema="public", table=table, operation=operation, transaction=7, timestamp=5)  # type: ignore[arg-type]
    if old is not None:
        row(message.old, old)
    if new is not None:
        row(message.new, new, values.get("a"), values.get("b"))
    return message


def batch(number: int, *items: Any) -> CommittedBatch:
    mutations = [item for item in items if isinstance(item, stream_pb2.Mutation)]
    markers, seen = [], 0
    for item in items:
        if isinstance(item, stream_pb2.Mutation):
            seen += 1
        else:
            markers.append((seen, item))
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=number,
        begin=stream_pb2.Begin(),
        mutations=tuple(mutations),
        position=after(number),
        markers=tuple(markers),
    )


def state_after(number: int, tables: tuple[TableShape, ...]) -> WorkerState:
    return WorkerState("streaming", "100:100:", after(number), tables, horizon="120:121:")


def make(kind: str, root: Path) -> TableFormatTarget:
    return DeltaTarget(str(root)) if kind == "delta" else IcebergTarget(str(root))


def rows(target: TableFormatTarget, shape: TableShape) -> list[tuple[Any, ...]]:
    table = target.tables.read(shape)
    names = list(shape.column_names)
    return sorted(zip(*(table.column(name).to_pylist() for name in names), strict=True))


def start(kind: str, root: Path) -> TableFormatTarget:
    target = make(kind, root)
    assert target.open("c", "s") is None
    snapshot = WorkerState("snapshot", "100:100:", after(0), (T, U))
    target.begin_snapshot(snapshot)
    target.finish_snapshot(snapshot.replace(phase="streaming"))
    return target


def apply(target: TableFormatTarget, number: int, tables: Any, *items: Any) -> Any:
    result = plan_micro_batch(
        [batch(number, *items)], tables, (), can_alter_type=cast_is_exact, key_text=key_text
    )
    target.apply(result, state_after(number, result.tables))
    return result.tables


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_net_effect_key_change_truncate_and_add_column(kind: str, tmp_path: Path) -> None:
    target = start(kind, tmp_path)
    tables = apply(
        target,
        1,
        (T, U),
        *(mutation("t", Op.INSERT, new=key, a=f"v{key}") for key in (1, 2, 3)),
        mutation("t", Op.UPDATE, old=2, new=2, a="two"),
        mutation("t", Op.DELETE, old=3),
        mutation("t", Op.UPDATE, old=1, new=10, a="ten"),
        mutation("u", Op.INSERT, new=1, a="x"),
    )
    assert rows(target, T) == [(2, "two"), (10, "ten")]
    assert rows(target, U) == [(1, "x")]
    wider = TableShape("public", "t", (ID, A, B), ("id",), relation=10)
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t", relation=10
    )
    change.shape.CopyFrom(shape_to_proto(wider))
    tables = apply(
        target,
        2,
        tables,
        mutation("u", Op.TRUNCATE),
        mutation("u", Op.INSERT, new=5, a="after"),
        mutation("t", Op.INSERT, new=4, a="old shape"),
        change,
        mutation("t", Op.INSERT, new=6, a="new shape", b=60),
    )
    assert rows(target, wider) == [
        (2, "two", None),
        (4, "old shape", None),
        (6, "new shape", 60),
        (10, "ten", None),
    ]
    assert rows(target, U) == [(5, "after")]
    target.close()
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and stored.position == after(2)
    reopened.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_crash_between_table_commits_completes_the_micro_batch_once(
    kind: str, tmp_path: Path
) -> None:
    target = start(kind, tmp_path)
    tables = apply(target, 1, (T, U), mutation("t", Op.INSERT, new=1, a="a"))
    commit = target.tables.commit

    def crash(effect: Any, record: Any, *args: Any) -> Any:
        if effect.shape.name == "u":
            raise KeyboardInterrupt("killed")
        return commit(effect, record, *args)

    target.tables.commit = crash
    with pytest.raises(KeyboardInterrupt):
        apply(
            target,
            2,
            tables,
            mutation("t", Op.UPDATE, old=1, new=1, a="b"),
            mutation("u", Op.INSERT, new=9, a="u"),
        )
    target.close()
    assert rows(unrecovered(kind, tmp_path), U) == [], "the crash came before u's commit"
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and stored.position == after(2)
    assert rows(reopened, T) == [(1, "b")]
    assert rows(reopened, U) == [(9, "u")]
    assert reopened.counter(T) == reopened.counter(U) == 3
    reopened.close()


def unrecovered(kind: str, root: Path) -> TableFormatTarget:
    """A reader of the tables as the crash left them (no recovery: the tables library only)."""
    target = make(kind, root)
    target.tables = target._make_tables("pgshovel:c:s")
    return target


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_rename_and_drop_follow_the_source_through_a_crash(kind: str, tmp_path: Path) -> None:
    target = start(kind, tmp_path)
    tables = apply(target, 1, (T, U), mutation("u", Op.INSERT, new=1, a="u"))
    renamed = TableShape("public", "t2", (ID, A), ("id",), relation=10)
    rename = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t2", relation=10
    )
    rename.shape.CopyFrom(shape_to_proto(renamed))
    drop = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.DROP, schema="public", table="u", relation=11
    )
    commit = target.tables.commit

    def crash(effect: Any, record: Any, *args: Any) -> Any:
        raise KeyboardInterrupt("killed after the rename and the drop, before t2's commit")

    target.tables.commit = crash
    with pytest.raises(KeyboardInterrupt):
        apply(
            target,
            2,
            tables,
            mutation("t", Op.INSERT, new=1, a="before the rename"),
            rename,
            mutation("t2", Op.INSERT, new=2, a="after the rename"),
            mutation("u", Op.INSERT, new=2, a="gone"),
            drop,
        )
    target.tables.commit = commit
    target.close()
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and [shape.name for shape in stored.tables] == ["t2"]
    assert rows(reopened, renamed) == [(1, "before the rename"), (2, "after the rename")]
    assert not reopened.tables.exists(T) and not reopened.tables.exists(U)
    reopened.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_verify_compares_a_range_with_the_source_checksums(kind: str, tmp_path: Path) -> None:
    target = start(kind, tmp_path)
    apply(target, 1, (T, U), *(mutation("t", Op.INSERT, new=key, a=f"v{key}") for key in range(9)))
    chunk = Chunk("attempt-2", "q", KeyRange(T, 1, ("2",), ("6",)), checksums=True)
    # The source's checksums of [2, 6), where key 3 holds another value than in the copy
    source = _arrow.to_arrow(T, [(2, "v2"), (3, "other"), (4, "v4"), (5, "v5")])
    sums = _parquet_chunks.checksums(source, chunk)
    target.chunk_sink().stage_checksums(chunk.attempt, [(b, n, h) for b, (n, h) in sums.items()])
    comparison = target.compare_chunk(chunk, set())
    assert set(comparison.differing) == {_parquet_chunks.bucket_of(("3",))}
    assert not comparison.skipped
    # the same rows on both sides: equal; a key the stream changed meanwhile: skipped
    same = _arrow.to_arrow(T, [(key, f"v{key}") for key in (2, 3, 4, 5)])
    sums = _parquet_chunks.checksums(same, chunk)
    target.chunk_sink().stage_checksums("attempt-3", [(b, n, h) for b, (n, h) in sums.items()])
    again = target.compare_chunk(dataclasses.replace(chunk, attempt="attempt-3"), {("3",)})
    assert not again.differing and again.skipped == {_parquet_chunks.bucket_of(("3",))}
    target.close()


BASE = {
    "loader": {"path": "pgshovel.replication.loaders:PostgresSnapshotLoader"},
    "stream": {
        "path": "pgshovel.replication.streams:KafkaStream",
        "configuration": {"bootstrap_servers": "127.0.0.1:9092"},
    },
}


def test_replication_yml_names_a_table_format_target_by_type(tmp_path: Path) -> None:
    delta = parse_configuration({**BASE, "target": {"type": "delta", "path": str(tmp_path)}}, "r")
    assert isinstance(delta.target, DeltaTarget) and delta.target.root == tmp_path
    target = {"type": "iceberg", "warehouse": str(tmp_path), "catalog_uri": "sqlite:///c.db"}
    iceberg = parse_configuration({**BASE, "target": target}, "r")
    assert isinstance(iceberg.target, IcebergTarget)
    assert iceberg.target.catalog_uri == "sqlite:///c.db"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"type": "delta"}, "replication.yml: target: missing 'path'"),
        (
            {"type": "iceberg", "warehouse": "/w", "catalog": "x"},
            "replication.yml: target.catalog:",
        ),
        ({"type": "hudi", "path": "/w"}, "replication.yml: target.type: unknown target type"),
    ],
)
def test_a_wrong_table_format_target_is_one_line_naming_file_and_key(
    target: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_configuration({**BASE, "target": target}, "replication.yml")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_chunk_makes_its_range_hold_the_staged_rows_except_changed_keys(
    kind: str, tmp_path: Path
) -> None:
    target = start(kind, tmp_path)
    inserts = [mutation("t", Op.INSERT, new=key, a=f"old{key}") for key in range(1, 9)]
    apply(target, 1, (T, U), *inserts)
    chunk = Chunk("attempt-1", "q", KeyRange(T, 1, ("3",), ("7",)))

    def copy_out(out: Any) -> None:  # the source's rows of [3, 7): 4 deleted, 5 changed
        out.write(b"3\tsource3\n5\tsource5\n6\tsource6\n")

    assert target.chunk_sink().stage_rows(chunk.attempt, T, copy_out) == 3
    changed = {("6",)}  # the stream brought key 6's row while the chunk was read
    assert target.merge_chunk(chunk, changed, state_after(2, (T, U))) == 3
    assert rows(target, T) == [
        (1, "old1"),
        (2, "old2"),
        (3, "source3"),
        (5, "source5"),
        (6, "old6"),
        (7, "old7"),
        (8, "old8"),
    ]
    target.close()
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and stored.position == after(2)
    reopened.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_key_change_after_rows_of_the_same_micro_batch_stops_with_the_remedy(
    kind: str, tmp_path: Path
) -> None:
    target = start(kind, tmp_path)
    rekeyed = TableShape("public", "t", (ID, A), ("a",), relation=10)
    announce = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ANNOUNCE, schema="public", table="t", relation=10
    )
    announce.shape.CopyFrom(shape_to_proto(rekeyed))
    with pytest.raises(SchemaError, match=r"table 'public.t': its key changed .* remove the"):
        apply(target, 1, (T, U), mutation("t", Op.UPDATE, old=1, new=1, a="x"), announce)
    # alone in its micro-batch, or after a TRUNCATE, the new key merges by itself
    tables = apply(target, 1, (T, U), announce, mutation("t", Op.INSERT, new=1, a="x"))
    assert rows(target, rekeyed) == [(1, "x")]
    back = stream_pb2.SchemaChange()
    back.CopyFrom(announce)
    back.shape.CopyFrom(shape_to_proto(T))
    truncate = mutation("t", Op.TRUNCATE)
    apply(target, 2, tables, truncate, mutation("t", Op.INSERT, new=2, a="y"), back)
    assert rows(target, T) == [(2, "y")]
    target.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_reload_remedy_starts_the_copy_anew(kind: str, tmp_path: Path) -> None:
    target = start(kind, tmp_path)
    apply(target, 1, (T, U), mutation("t", Op.INSERT, new=1, a="x"))
    directory = target.files.directory
    target.close()
    shutil.rmtree(directory)  # the remedy: remove the target's _pgshovel/<cluster>.<set>
    again = start(kind, tmp_path)  # no state: the worker loads a snapshot, tables anew
    assert rows(again, T) == [] and again.counter(T) == 1
    apply(again, 1, (T, U), mutation("t", Op.INSERT, new=2, a="y"))
    assert rows(again, T) == [(2, "y")]
    again.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_time_travel_by_source_transaction_on_a_worker_copy(kind: str, tmp_path: Path) -> None:
    target = start(kind, tmp_path)  # loaded at horizon 100:100:
    for number, horizon in ((1, "110:110:"), (2, "120:120:")):
        result = plan_micro_batch(
            [batch(number, mutation("t", Op.INSERT, new=number, a=horizon))],
            (T, U),
            (),
            can_alter_type=cast_is_exact,
            key_text=key_text,
        )
        target.apply(result, state_after(number, (T, U)).replace(horizon=horizon))

    def as_of(txid: int) -> list[tuple[Any, ...]] | None:
        if kind == "delta":
            path = target.tables.path(T)
            version = delta_version_at(path, txid)
            return None if version is None else rows_of(DeltaTable(path, version=version))
        table = target.tables.table(T)
        snapshot = iceberg_snapshot_at(table, txid)
        return None if snapshot is None else rows_of(table.scan(snapshot_id=snapshot))

    assert as_of(99) == []
    assert as_of(105) == [(1, "110:110:")]
    assert as_of(115) == [(1, "110:110:"), (2, "120:120:")]
    assert as_of(130) is None, "not applied yet"
    target.close()


def rows_of(readable: Any) -> list[tuple[Any, ...]]:
    table = readable.to_pyarrow_table() if hasattr(readable, "to_pyarrow_table") else None
    table = readable.to_arrow() if table is None else table
    return sorted(zip(table.column("id").to_pylist(), table.column("a").to_pylist(), strict=True))


def data_files(target: TableFormatTarget, shape: TableShape) -> int:
    table = target.tables.table(shape)
    if isinstance(target, DeltaTarget):
        return len(table.file_uris())
    return int(table.inspect.files().num_rows)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_upkeep_keeps_the_files_of_a_long_stream_bounded(kind: str, tmp_path: Path) -> None:
    """Every micro-batch adds a file; compaction after the commits keeps the count bounded,
    changes no row and leaves the position where the last micro-batch put it."""
    counts = {}
    for maintained in (True, False):
        root = tmp_path / str(maintained)
        target: TableFormatTarget
        if kind == "delta":
            target = DeltaTarget(str(root), maintenance=maintained, max_small_files=3)
        else:
            target = IcebergTarget(str(root), maintenance=maintained, max_small_files=3)
        assert target.open("c", "s") is None
        snapshot = WorkerState("snapshot", "100:100:", after(0), (T, U))
        target.begin_snapshot(snapshot)
        target.finish_snapshot(snapshot.replace(phase="streaming"))
        tables: Any = (T, U)
        for number in range(1, 13):
            tables = apply(target, number, tables, mutation("t", Op.INSERT, new=number, a="x"))
        try:
            counts[maintained] = data_files(target, T)
            assert rows(target, T) == [(key, "x") for key in range(1, 13)]
        finally:
            target.close()
        reopened = make(kind, root)
        stored = reopened.open("c", "s")
        assert stored is not None and stored.position == after(12)
        reopened.close()
    assert counts[False] >= 12, counts  # one file per micro-batch without upkeep
    assert counts[True] <= 3 + 1, counts  # at most max_small_files small ones, plus the compacted
