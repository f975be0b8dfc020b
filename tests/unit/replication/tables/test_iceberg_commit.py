"""A net effect becomes one Iceberg catalog commit carrying the micro-batch's counter and position.

Real pyiceberg with its SQL catalog on a SQLite file in a temporary directory
(no services); every table is read back through pyiceberg's scan and polars.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgshovel.errors import ProgrammingError, SchemaError
from pgshovel.replication.tables._effect import DELETED
from pgshovel.replication.tables._iceberg import IcebergTables, same_schema, split_at
from pgshovel.source import Column, TableShape
from tests.unit.replication.tables._model import (
    ITEMS,
    Model,
    apply,
    effect,
    random_effect,
    record,
    rows_of,
)

APP = "pgshovel/default/orders"
# polars plans Iceberg scans through pyiceberg and reads the Parquet files itself.
os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")


@pytest.fixture
def tables(tmp_path: Path) -> IcebergTables:
    tables = IcebergTables(tmp_path, APP)
    tables.create(ITEMS)
    return tables


def assert_holds(tables: IcebergTables, table: TableShape, model: Model) -> None:
    assert rows_of(table, tables.read(table)) == model
    assert rows_of(table, pl.scan_iceberg(tables.table(table)).collect().to_arrow()) == model


def test_inserts_updates_deletes_and_key_changes_land_as_the_model_says(
    tables: IcebergTables,
) -> None:
    model: Model = {}
    rng = random.Random(5)
    for counter in range(1, 7):
        change = random_effect(ITEMS, model, rng, changes=30, keys=45, txid=200 + counter)
        assert not tables.commit(change, record(counter)).skipped
        model = apply(model, change)
        assert_holds(tables, ITEMS, model)
    moved = next(iter(model.values()))
    change = effect(ITEMS, [{"id": moved["id"], DELETED: True}, {**moved, "id": 1000}])
    tables.commit(change, record(7))
    assert_holds(tables, ITEMS, apply(model, change))


def test_each_micro_batch_is_one_catalog_commit_of_one_snapshot_holding_the_record(
    tables: IcebergTables,
) -> None:
    tables.commit(effect(ITEMS, [{"id": 1, "name": "a"}, {"id": 2}]), record(1))
    tables.commit(effect(ITEMS, [{"id": 1, "name": "b"}, {"id": 2, DELETED: True}]), record(2))
    history = tables.table(ITEMS).metadata.metadata_log
    # Creation, then one metadata file per micro-batch: one catalog commit each.
    assert len(history) == 2
    current = tables.table(ITEMS).current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.additional_properties["pgshovel.counter"] == "2"
    counters = [
        snapshot.summary.additional_properties.get("pgshovel.counter")
        for snapshot in tables.table(ITEMS).snapshots()
        if snapshot.summary is not None
    ]
    assert counters == ["1", "2"]  # no snapshot in between holds half a micro-batch


def test_a_micro_batch_the_table_holds_is_skipped(tables: IcebergTables) -> None:
    tables.commit(effect(ITEMS, [{"id": 1, "name": "a"}]), record(3))
    assert tables.commit(effect(ITEMS, [{"id": 1, "name": "x"}]), record(3)).skipped
    assert tables.commit(effect(ITEMS, [{"id": 1, "name": "x"}]), record(2)).skipped
    assert tables.read(ITEMS).column("name").to_pylist() == ["a"]


def test_the_position_is_read_back_even_when_nothing_changed(tables: IcebergTables) -> None:
    assert tables.last_commit(ITEMS) is None
    tables.commit(effect(ITEMS, [{"id": 9, DELETED: True}]), record(1, "5:9:7", (3,)))
    restarted = IcebergTables(tables.warehouse, APP)
    assert restarted.last_commit(ITEMS) == record(1, "5:9:7", (3,))
    assert restarted.counter(ITEMS) == 1


def test_a_truncate_first_leaves_exactly_the_rows_after_it(tables: IcebergTables) -> None:
    tables.commit(effect(ITEMS, [{"id": n} for n in range(20)]), record(1))
    change = effect(ITEMS, [{"id": 4, "name": "kept"}, {"id": 70, DELETED: True}], truncate=True)
    tables.commit(change, record(2))
    assert_holds(tables, ITEMS, apply({}, change))


def test_composite_keys_and_names_that_need_quoting(tmp_path: Path) -> None:
    odd = TableShape(
        'Schéma "x"',
        "t/with.dots",
        (
            Column("K a", "text", "text", True, 1),
            Column("k b", "bigint", "int8", True, 2),
            Column("v.w", "text", "text", False, 3),
        ),
        ("K a", "k b"),
    )
    tables = IcebergTables(tmp_path, APP)
    tables.create(odd)
    first = effect(odd, [{"K a": "it's", "k b": n, "v.w": str(n)} for n in range(4)])
    second = effect(odd, [{"K a": "it's", "k b": 2, DELETED: True}, {"K a": "z", "k b": 2}])
    tables.commit(first, record(1))
    tables.commit(second, record(2))
    assert rows_of(odd, tables.read(odd)) == apply(apply({}, first), second)


def test_a_key_column_with_a_dot_is_refused_at_creation(tmp_path: Path) -> None:
    dotted = TableShape("public", "d", (Column("a.b", "int", "int4", True, 1),), ("a.b",))
    with pytest.raises(SchemaError, match=r"key columns \['a.b'\] contain '.'"):
        IcebergTables(tmp_path, APP).create(dotted)


def test_a_table_written_by_another_set_is_refused(tables: IcebergTables) -> None:
    other = IcebergTables(tables.warehouse, "pgshovel/default/other")
    with pytest.raises(ProgrammingError, match=r"is written by 'pgshovel/default/orders'"):
        other.commit(effect(ITEMS, [{"id": 1}]), record(1))
    assert isinstance(tables.read(ITEMS), pa.Table)


def test_micro_batches_near_each_other_rewrite_only_the_rows_of_their_range(
    tables: IcebergTables,
) -> None:
    # One large file first, as an initial snapshot range writes it; then micro-batches that
    # update and delete some of the 200 most recent keys (every third and every seventh) and
    # insert new ones above: an OLTP table's changes, as the bench's stream makes them.
    model: Model = {}
    first = effect(ITEMS, [{"id": key, "name": f"n{key}", "qty": 1} for key in range(3000)])
    tables.commit(first, record(1))
    model = apply(model, first)
    rewritten: list[int] = []
    for counter in range(2, 8):
        top = 3000 + 20 * (counter - 2)
        recent = [key for key in range(top - 200, top) if (key,) in model]
        updated = recent[counter % 3 :: 3]
        changed: list[dict[str, object]] = [
            {"id": key, "name": f"u{counter}", "qty": counter} for key in updated
        ]
        changed += [{"id": key, DELETED: True} for key in recent[1::7] if key not in updated]
        changed += [{"id": key, "name": "new", "qty": 0} for key in range(top, top + 20)]
        change = effect(ITEMS, changed)
        tables.commit(change, record(counter))
        model = apply(model, change)
        current = tables.table(ITEMS).current_snapshot()
        assert current is not None and current.summary is not None
        rewritten.append(int(current.summary.additional_properties["deleted-records"]))
        assert int(current.summary.additional_properties["deleted-data-files"]) <= 2
        assert_holds(tables, ITEMS, model)
    # The first micro-batch rewrites the large file; the next ones only the rows near them
    # (the kept rows within the range and the upserts of the one before), not the file again.
    assert rewritten[0] >= 3000
    assert max(rewritten[1:]) <= 400, rewritten


def test_split_at_keeps_every_row_exactly_once() -> None:
    keys = pa.array([12, None, 5, 1, 9, 4, 10], pa.int64())
    rows = pa.table({"id": keys, "name": pa.array([str(key) for key in keys.to_pylist()])})
    parts = split_at(rows, "id", pc.min_max(pa.array([4, 10], pa.int64())))
    assert [part.column("id").to_pylist() for part in parts] == [[1], [None, 5, 9, 4, 10], [12]]
    # A key type Arrow does not order stays one part (the rows as they were).
    opaque = pa.table({"id": pa.array([b"b" * 16, b"a" * 16], pa.binary(16))})
    assert split_at(opaque, "id", pc.min_max(opaque.column("id"))) == [opaque]


def test_kept_rows_read_with_other_types_are_joined_per_schema() -> None:
    small = pa.table({"id": pa.array([1], pa.int64()), "a": pa.array(["x"], pa.string())})
    large = pa.table({"id": pa.array([2], pa.int64()), "a": pa.array(["y"], pa.large_string())})
    joined = same_schema([small, large, small])
    assert [table.schema for table in joined] == [small.schema, large.schema]
    assert [table.column("id").to_pylist() for table in joined] == [[1, 1], [2]]
