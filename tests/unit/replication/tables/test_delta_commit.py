"""A net effect becomes one Delta commit carrying the micro-batch's counter and position.

Real delta-rs on a temporary directory (no services). Every table is read
back through delta-rs and through polars' own Delta reader.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pgshovel.errors import CodecError, SchemaError
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED, TXID, stored_schema
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


@pytest.fixture
def tables(tmp_path: Path) -> DeltaTables:
    tables = DeltaTables(tmp_path, APP)
    tables.create(ITEMS)
    return tables


def read_polars(tables: DeltaTables, table: TableShape) -> pa.Table:
    return pl.read_delta(tables.path(table)).to_arrow()


def assert_holds(tables: DeltaTables, table: TableShape, model: Model) -> None:
    assert rows_of(table, tables.read(table)) == model
    assert rows_of(table, read_polars(tables, table)) == model


def test_inserts_updates_deletes_and_key_changes_land_as_the_model_says(
    tables: DeltaTables,
) -> None:
    model: Model = {}
    rng = random.Random(7)
    for counter in range(1, 9):
        change = random_effect(ITEMS, model, rng, changes=40, keys=60, txid=100 + counter)
        result = tables.commit(change, record(counter))
        model = apply(model, change)
        assert result.counter == counter and not result.skipped
        assert_holds(tables, ITEMS, model)
    # A key change is the old key's delete and the new key's row in one net effect.
    moved = next(iter(model.values()))
    change = effect(ITEMS, [{"id": moved["id"], DELETED: True}, {**moved, "id": 1000}])
    tables.commit(change, record(9))
    model = apply(model, change)
    assert_holds(tables, ITEMS, model)
    assert tables.counter(ITEMS) == 9


def test_a_micro_batch_the_table_holds_is_skipped_and_changes_nothing(
    tables: DeltaTables,
) -> None:
    tables.commit(effect(ITEMS, [{"id": 1, "name": "a"}]), record(1))
    version = tables.table(ITEMS).version()
    result = tables.commit(effect(ITEMS, [{"id": 1, "name": "changed"}]), record(1))
    assert result.skipped and tables.table(ITEMS).version() == version
    assert tables.read(ITEMS).column("name").to_pylist() == ["a"]
    # An older micro-batch, too (a restart re-reading from further back).
    assert tables.commit(effect(ITEMS, [{"id": 2}]), record(1)).skipped


def test_a_net_effect_that_changes_nothing_still_records_its_counter(tables: DeltaTables) -> None:
    tables.commit(effect(ITEMS, [{"id": 1, "name": "a"}]), record(1))
    result = tables.commit(effect(ITEMS, [{"id": 5, DELETED: True}]), record(2))
    assert result.version is not None and tables.counter(ITEMS) == 2
    last = tables.last_commit(ITEMS)
    assert last is not None and last.counter == 2 and last.position == '{"counter": 2}'
    assert tables.read(ITEMS).num_rows == 1


def test_a_truncate_first_leaves_exactly_the_rows_after_it_in_one_commit(
    tables: DeltaTables,
) -> None:
    tables.commit(effect(ITEMS, [{"id": n, "name": str(n)} for n in range(10)]), record(1))
    before = tables.table(ITEMS).version()
    change = effect(ITEMS, [{"id": 3, "name": "new"}, {"id": 50, DELETED: True}], truncate=True)
    tables.commit(change, record(2))
    assert tables.table(ITEMS).version() == before + 1
    assert_holds(tables, ITEMS, apply({}, change))
    feed = pa.table(DeltaTable(tables.path(ITEMS)).load_cdf(starting_version=before + 1).read_all())
    kinds = sorted(feed.column("_change_type").to_pylist())
    assert kinds == ["delete"] * 10 + ["insert"]


def test_the_record_is_read_back_from_the_log_and_shows_in_history(tables: DeltaTables) -> None:
    assert tables.last_commit(ITEMS) is None and tables.counter(ITEMS) is None
    tables.commit(effect(ITEMS, [{"id": 1}]), record(4, "10:15:12", (77, 78)))
    last = tables.last_commit(ITEMS)
    assert last == record(4, "10:15:12", (77, 78))
    fresh = DeltaTables(tables.root, APP)  # a restarted worker
    assert fresh.last_commit(ITEMS) == last and fresh.counter(ITEMS) == 4
    assert DeltaTables(tables.root, "another/app").counter(ITEMS) is None
    entry = DeltaTable(tables.path(ITEMS)).history(1)[0]
    assert entry["pgshovel.horizon"] == "10:15:12" and entry["pgshovel.counter"] == "4"


def test_the_merge_reads_only_the_files_the_key_range_touches(tmp_path: Path) -> None:
    tables = DeltaTables(tmp_path, APP)
    tables.create(ITEMS)
    # 20 files of 1,000 keys each, written in key order.
    for part in range(20):
        rows = [{"id": part * 1000 + n, "name": "x", TXID: 1} for n in range(1000)]
        tables.commit(effect(ITEMS, rows), record(part + 1))
    assert len(tables.table(ITEMS).file_uris()) >= 20
    change = effect(ITEMS, [{"id": 5001, "name": "y"}, {"id": 5999, DELETED: True}])
    result = tables.commit(change, record(21))
    assert result.files_scanned <= 2 and result.files_skipped >= 18
    data = tables.read(ITEMS)
    assert data.num_rows == 19_999
    assert rows_of(ITEMS, data)[(5001,)]["name"] == "y"


def test_composite_keys_and_names_that_need_quoting(tmp_path: Path) -> None:
    odd = TableShape(
        'My "Schema"',
        "tablé with space/slash",
        (
            Column('Key "A"', "text", "text", True, 1),
            Column("key b", "integer", "int4", True, 2),
            Column("Value", "date", "date", False, 3),
        ),
        ('Key "A"', "key b"),
    )
    tables = DeltaTables(tmp_path, APP)
    tables.create(odd)
    first = effect(odd, [{'Key "A"': "it's", "key b": n, "Value": None} for n in range(3)])
    tables.commit(first, record(1))
    second = effect(
        odd, [{'Key "A"': "it's", "key b": 1, DELETED: True}, {'Key "A"': "b", "key b": 1}]
    )
    tables.commit(second, record(2))
    assert_holds(tables, odd, apply(apply({}, first), second))
    assert Path(tables.path(odd)).parent.parent == tmp_path


def test_a_date_a_table_format_cannot_store_stops_with_table_and_column() -> None:
    dated = TableShape(
        "public",
        "d",
        (Column("id", "int", "int4", True, 1), Column("day", "date", "date")),
        ("id",),
    )
    with pytest.raises(CodecError, match=r"table 'public.d' column 'day' \(date\) holds a value"):
        effect(dated, [{"id": 1, "day": 2147483647}])  # PostgreSQL's 'infinity'


def test_a_source_column_with_the_reserved_prefix_is_refused() -> None:
    clash = TableShape("public", "c", (Column("_pgshovel_txid", "int", "int4", True, 1),), ())
    with pytest.raises(SchemaError, match=r"columns \['_pgshovel_txid'\] start with"):
        stored_schema(clash)
