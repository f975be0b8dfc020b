"""The ``history`` option of the Delta and Iceberg targets: the SCD2 history the worker writes.

Real delta-rs tables, and a real pyiceberg SQL catalog (SQLite) and warehouse, in a
temporary directory; micro-batches planned from protobuf mutations as the worker
plans them (helpers of ``test_table_targets``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.config import parse_configuration
from pgshovel.replication.tables._maintenance import Maintenance, MaintenancePolicy
from pgshovel.replication.tables._versions import END_TXID, START_TXID
from pgshovel.replication.targets._tablefmt_history import HistoryTarget
from pgshovel.replication.targets.delta import DeltaTarget
from pgshovel.replication.targets.iceberg import IcebergTarget
from pgshovel.source import Chunk, Column, KeyRange, TableShape
from pgshovel.stream.shapes import shape_to_proto
from pgshovel.stream.state import WorkerState
from tests._positions import after
from tests.unit.replication.test_table_targets import (
    BASE,
    ID,
    Op,
    T,
    U,
    apply,
    mutation,
    rows,
    state_after,
)

B = Column("b", "bigint", "int8", False, 3)


def tx(txid: int, message: stream_pb2.Mutation) -> stream_pb2.Mutation:
    message.transaction = txid
    return message


KINDS = pytest.mark.parametrize("kind", ["delta", "iceberg"])


def make(kind: str, root: Path, history: Any = True) -> HistoryTarget:
    if kind == "delta":
        return DeltaTarget(str(root), history=history)
    return IcebergTarget(str(root), history=history)


def target(kind: str, root: Path, history: Any = True) -> HistoryTarget:
    made = make(kind, root, history)
    assert made.open("c", "s") is None
    snapshot = WorkerState("snapshot", "100:100:", after(0), (T, U))
    made.begin_snapshot(snapshot)
    made.finish_snapshot(snapshot.replace(phase="streaming"))
    return made


def versions(made: HistoryTarget, shape: TableShape, *extra: str) -> list[tuple[Any, ...]]:
    assert made._histories is not None
    table = made._histories.store.versions(shape)
    names = ["id", "a", *extra, START_TXID, END_TXID]
    return sorted(
        zip(*(table.column(name).to_pylist() for name in names), strict=True),
        key=lambda row: (row[0], row[-2]),
    )


@KINDS
def test_each_micro_batch_closes_and_opens_versions_truncate_included(
    kind: str, tmp_path: Path
) -> None:
    made = target(kind, tmp_path)
    tables = apply(
        made,
        1,
        (T, U),
        tx(10, mutation("t", Op.INSERT, new=1, a="a")),
        tx(10, mutation("t", Op.INSERT, new=2, a="b")),
        tx(11, mutation("t", Op.INSERT, new=3, a="c")),
    )
    tables = apply(
        made,
        2,
        tables,
        tx(12, mutation("t", Op.UPDATE, old=1, new=1, a="a2")),
        tx(13, mutation("t", Op.UPDATE, old=1, new=1, a="a3")),  # folds into one version
        tx(14, mutation("t", Op.UPDATE, old=2, new=20, a="b2")),  # key change
        tx(15, mutation("t", Op.DELETE, old=3)),
    )
    assert versions(made, T) == [
        (1, "a", 10, 13),
        (1, "a3", 13, None),
        (2, "b", 10, 14),
        (3, "c", 11, 15),
        (20, "b2", 14, None),
    ]
    apply(
        made,
        3,
        tables,
        tx(16, mutation("t", Op.TRUNCATE)),
        tx(16, mutation("t", Op.INSERT, new=5, a="e")),
    )
    current = [row for row in versions(made, T) if row[-1] is None]
    assert current == [(5, "e", 16, None)]
    assert [row for row in versions(made, T) if row[0] in (1, 20)][-1] == (20, "b2", 14, 16)
    assert rows(made, T) == [(5, "e")]
    assert made.counter(T) == 4
    made.close()


@KINDS
def test_a_crash_between_the_table_and_its_history_is_recovered_once(
    kind: str, tmp_path: Path
) -> None:
    made = target(kind, tmp_path)
    tables = apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    histories = made._histories
    assert histories is not None
    commit = histories.commit

    def crash(*args: Any) -> Any:
        raise KeyboardInterrupt("killed after the table's commit")

    histories.commit = crash  # type: ignore[method-assign,assignment]
    with pytest.raises(KeyboardInterrupt):
        apply(made, 2, tables, tx(11, mutation("t", Op.UPDATE, old=1, new=1, a="b")))
    histories.commit = commit  # type: ignore[method-assign]
    made.close()
    assert rows(made, T) == [(1, "b")], "the table committed, its history did not"
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and stored.position == after(2)
    assert versions(reopened, T) == [(1, "a", 10, 11), (1, "b", 11, None)]
    assert reopened.counter(T) == 3
    reopened.close()
    again = make(kind, tmp_path)
    again.open("c", "s")  # nothing left to recover: the history is not written twice
    assert versions(again, T) == [(1, "a", 10, 11), (1, "b", 11, None)]
    again.close()


@KINDS
def test_a_reload_closes_every_current_version_at_its_horizon(kind: str, tmp_path: Path) -> None:
    made = target(kind, tmp_path)
    apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    reload = WorkerState("snapshot", "200:230:", after(5), (T, U))
    made.begin_snapshot(reload)  # the source is empty now: nothing is opened
    made.finish_snapshot(reload.replace(phase="streaming"))
    assert versions(made, T) == [(1, "a", 10, 230)]
    made.close()


@KINDS
def test_add_column_evolves_the_history_and_a_type_change_stops(kind: str, tmp_path: Path) -> None:
    made = target(kind, tmp_path, ["public.t"])
    tables = apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    wider = TableShape("public", "t", (ID, T.columns[1], B), ("id",), relation=10)
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t", relation=10
    )
    change.shape.CopyFrom(shape_to_proto(wider))
    tables = apply(made, 2, tables, change, tx(11, mutation("t", Op.INSERT, new=2, a="b", b=7)))
    assert versions(made, wider, "b") == [(1, "a", None, 10, None), (2, "b", 7, 11, None)]
    assert made._histories is not None
    assert not made._histories.store.exists(U), "u keeps no history"
    narrower = TableShape(
        "public",
        "t",
        (ID, T.columns[1], Column("b", "integer", "int4", False, 3)),
        ("id",),
        relation=10,
    )
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t", relation=10
    )
    change.shape.CopyFrom(shape_to_proto(narrower))
    with pytest.raises(SchemaError, match=r"public.t.*history cannot follow.*reload") as raised:
        apply(made, 3, tables, change, tx(12, mutation("t", Op.INSERT, new=3, a="c", b=1)))
    assert "leave the table out of 'history'" in str(raised.value)
    made.close()
    # The error's remedy run to the end: the target opened again with t out of 'history'
    # applies the same micro-batch; the copy follows the change (the narrowed column reads
    # NULL in the stored rows until the copy of t the worker then starts refills it).
    again = make(kind, tmp_path, [])
    try:
        assert again.open("c", "s") is not None
        apply(again, 3, tables, change, tx(12, mutation("t", Op.INSERT, new=3, a="c", b=1)))
        assert rows(again, narrower) == [(1, "a", None), (2, "b", None), (3, "c", 1)]
    finally:
        again.close()


@KINDS
def test_history_names_a_table_of_the_set_and_a_catalog_no_clashing_table(
    kind: str, tmp_path: Path
) -> None:
    made = make(kind, tmp_path / "unknown", ["public.nope"])
    made.open("c", "s")
    with pytest.raises(ConfigurationError) as raised:
        made.begin_snapshot(WorkerState("snapshot", "100:100:", after(0), (T, U)))
    assert "'public.nope'" in str(raised.value) and "\n" not in str(raised.value)
    made.close()
    spec = {"type": kind, "history": ["public.t"]}
    spec.update({"path": str(tmp_path)} if kind == "delta" else {"warehouse": str(tmp_path)})
    configured = parse_configuration({**BASE, "target": spec}, "r")
    assert isinstance(configured.target, HistoryTarget)
    assert configured.target.history == ["public.t"]
    # A source table named like t's history: the catalog would hold two tables of one name.
    clash = TableShape("public", "t~history", (ID, T.columns[1]), ("id",), relation=12)
    made = make(kind, tmp_path / "clash")
    made.open("c", "s")
    loading = WorkerState("snapshot", "100:100:", after(0), (T, clash))
    if kind == "delta":  # its paths escape '~': no clash
        made.begin_snapshot(loading)
    else:
        with pytest.raises(ConfigurationError) as raised:
            made.begin_snapshot(loading)
        assert "'public.t~history'" in str(raised.value) and "\n" not in str(raised.value)
    made.close()


@KINDS
def test_rename_and_drop_carry_the_history_along(kind: str, tmp_path: Path) -> None:
    made = target(kind, tmp_path)
    inserts = (tx(10, mutation(name, Op.INSERT, new=1, a=name)) for name in "tu")
    tables = apply(made, 1, (T, U), *inserts)
    renamed = TableShape("public", "t2", (ID, T.columns[1]), ("id",), relation=10)
    rename = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t2", relation=10
    )
    rename.shape.CopyFrom(shape_to_proto(renamed))
    drop = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.DROP, schema="public", table="u", relation=11
    )
    apply(made, 2, tables, rename, tx(11, mutation("t2", Op.UPDATE, old=1, new=1, a="b")), drop)
    assert made._histories is not None
    store = made._histories.store
    assert not store.exists(T) and not store.exists(U)
    assert versions(made, renamed) == [(1, "t", 10, 11), (1, "b", 11, None)]
    assert made.counter(renamed) == 3
    made.close()


@KINDS
def test_a_load_restarted_after_a_crash_replaces_the_stopped_loads_versions(
    kind: str, tmp_path: Path
) -> None:
    made = target(kind, tmp_path)
    apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    reload = WorkerState("snapshot", "200:230:", after(5), (T, U))
    made.begin_snapshot(reload)
    write_state = made.files.write_state

    def crash(counter: int, state: Any) -> None:
        raise KeyboardInterrupt("killed after the load's history commit")

    made.files.write_state = crash  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        made.finish_snapshot(reload.replace(phase="streaming"))
    made.files.write_state = write_state  # type: ignore[method-assign]
    made.close()
    again = make(kind, tmp_path)
    stored = again.open("c", "s")
    assert stored is not None and stored.phase == "snapshot"
    later = WorkerState("snapshot", "300:340:", after(5), (T, U))
    again.begin_snapshot(later)  # the stopped load's history commit is taken back
    again.finish_snapshot(later.replace(phase="streaming"))
    assert versions(again, T) == [(1, "a", 10, 340)]
    again.close()


@KINDS
def test_a_chunk_opens_versions_only_for_the_rows_it_changes_or_removes(
    kind: str, tmp_path: Path
) -> None:
    made = target(kind, tmp_path)
    inserts = [tx(10, mutation("t", Op.INSERT, new=key, a=f"v{key}")) for key in range(1, 6)]
    apply(made, 1, (T, U), *inserts)
    chunk = Chunk("attempt-1", "q", KeyRange(T, 1, ("2",), ("5",)))

    def copy_out(out: Any) -> None:  # the source's rows of [2, 5): 2 unchanged, 3 changed
        out.write(b"2\tv2\n3\tsource3\n")

    made.chunk_sink().stage_rows(chunk.attempt, T, copy_out)
    made.merge_chunk(chunk, set(), state_after(2, (T, U)))
    horizon = 121  # the copy's horizon (state_after's): where the chunk's versions start
    assert versions(made, T) == [
        (1, "v1", 10, None),
        (2, "v2", 10, None),
        (3, "v3", 10, horizon),
        (3, "source3", horizon, None),
        (4, "v4", 10, horizon),
        (5, "v5", 10, None),
    ]
    assert rows(made, T) == [(1, "v1"), (2, "v2"), (3, "source3"), (5, "v5")]
    made.close()


def history_files(made: HistoryTarget, shape: TableShape) -> int:
    assert made._histories is not None
    table = made._histories.store.table(shape)  # type: ignore[attr-defined]
    if isinstance(made, DeltaTarget):
        return len(table.file_uris())
    return int(table.inspect.files().num_rows)


@KINDS
def test_upkeep_keeps_the_files_of_a_long_history_bounded(kind: str, tmp_path: Path) -> None:
    """With the history kept, the upkeep after each commit compacts the history too: its files
    stay bounded, no version changes, and its counter (what recovery reads) stays the table's,
    so a crash between the table and its history after compactions is still recovered once."""
    counts, kept = {}, {}
    for maintained in (True, False):
        root = tmp_path / str(maintained)
        made: HistoryTarget
        if kind == "delta":
            made = DeltaTarget(str(root), history=True, maintenance=maintained, max_small_files=3)
        else:
            made = IcebergTarget(str(root), history=True, maintenance=maintained, max_small_files=3)
        assert made.open("c", "s") is None
        snapshot = WorkerState("snapshot", "100:100:", after(0), (T, U))
        made.begin_snapshot(snapshot)
        made.finish_snapshot(snapshot.replace(phase="streaming"))
        tables: Any = (T, U)
        for number in range(1, 13):
            insert = mutation("t", Op.INSERT, new=number, a="x")
            tables = apply(made, number, tables, tx(10 + number, insert))
            assert made._histories is not None  # after each commit, compactions included:
            assert made._histories.counter(T) == made.tables.counter(T) == number + 1
        counts[maintained] = history_files(made, T)
        kept[maintained] = versions(made, T)
        assert made._histories is not None
        if not maintained:
            made.close()
            continue
        histories = made._histories
        commit = histories.commit

        def crash(*args: Any) -> Any:
            raise KeyboardInterrupt("killed after the table's commit")

        histories.commit = crash  # type: ignore[method-assign,assignment]
        with pytest.raises(KeyboardInterrupt):
            apply(made, 13, tables, tx(30, mutation("t", Op.UPDATE, old=1, new=1, a="13")))
        histories.commit = commit  # type: ignore[method-assign]
        made.close()
        for _ in range(2):  # recovered once, and nothing left to recover the second time
            reopened = make(kind, root)
            stored = reopened.open("c", "s")
            assert stored is not None and stored.position == after(13)
            assert reopened.counter(T) == 14
            assert [row for row in versions(reopened, T) if row[0] == 1][-2:] == [
                (1, "x", 11, 30),
                (1, "13", 30, None),
            ]
            assert len(versions(reopened, T)) == len(kept[True]) + 1
            reopened.close()
    assert kept[True] == kept[False], "compaction changes no version"
    assert counts[False] >= 12, counts  # a file per micro-batch without upkeep
    assert counts[True] <= 3 + 1, counts  # at most max_small_files small ones, plus the compacted


@KINDS
def test_history_upkeep_sorts_and_vacuums_on_the_tables_schedule(kind: str, tmp_path: Path) -> None:
    """The history's upkeep sorts (Delta) and vacuums (Iceberg: expires snapshots, removes an
    orphan data file in the history's own directory) and keeps its versions and counter."""
    made = target(kind, tmp_path)
    made.maintenance = Maintenance(
        MaintenancePolicy(max_small_files=1, sort_every=1, vacuum_every=0.0, retention_hours=0)
    )
    histories = made._histories
    assert histories is not None
    tables: Any = (T, U)
    for number in range(1, 4):
        insert = mutation("t", Op.INSERT, new=10 - number, a="x")
        tables = apply(made, number, tables, tx(10 + number, insert))
    stray = None
    if kind == "iceberg":
        store: Any = histories.store
        data = Path(store.location(T)) / "data"
        stray = data / "00000-0-crashed.parquet"
        pq.write_table(pa.table({"id": [2]}), stray)
        hour_ago = time.time() - 3600
        os.utime(stray, (hour_ago, hour_ago))
    apply(made, 4, tables, tx(20, mutation("t", Op.UPDATE, old=9, new=9, a="y")))
    assert histories.counter(T) == made.counter(T) == 5
    assert versions(made, T) == [
        (7, "x", 13, None),
        (8, "x", 12, None),
        (9, "x", 11, 20),
        (9, "y", 20, None),
    ]
    table = histories.store.table(T)  # type: ignore[attr-defined]
    if stray is not None:
        assert not stray.exists(), "the history's orphan data file is removed"
        assert len(table.snapshots()) == 1, "older snapshots expired"
    else:
        assert any(entry.get("operation") == "OPTIMIZE" for entry in table.history())
        assert history_files(made, T) == 1
    made.close()
