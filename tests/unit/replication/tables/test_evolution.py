"""Schema changes in the micro-batch's one commit: added, filled, renamed, dropped, widened
columns, a type no cast carries (NULL, re-copy reported) and a key that loses its values."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED
from pgshovel.replication.tables._evolution import evolve_rows, plan
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.source import Column, TableShape
from tests.unit.replication.tables._model import effect, record

os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")

ID = Column("id", "integer", "int4", True, 1)
NAME = Column("name", "text", "text", False, 2)
QTY = Column("qty", "integer", "int4", False, 3)
PRICE = Column("price", "real", "float4", False, 4)
BEFORE = TableShape("public", "t", (ID, NAME, QTY, PRICE), ("id",))


def after(*columns: Column, key: tuple[str, ...] = ("id",)) -> TableShape:
    return TableShape("public", "t", columns, key)


def value(number: int) -> stream_pb2.Value:
    return stream_pb2.Value(int64=number)


def test_plan_says_what_each_change_does() -> None:
    changed = after(
        Column("id", "bigint", "int8", True, 1),  # widened
        Column("title", "text", "text", False, 2),  # renamed
        Column("qty", "text", "text", False, 3),  # int -> text: no exact Arrow cast
        Column("note", "text", "text", False, 5),  # added, NULL for existing rows
        Column("stock", "integer", "int4", False, 6),  # added with a value
    )  # price dropped
    evolution = plan(
        BEFORE, changed, {"stock": value(7), "note": stream_pb2.Value(null=stream_pb2.Value.NULL)}
    )
    assert evolution.added == ("note", "stock") and evolution.filled == ("stock",)
    assert evolution.renamed == (("name", "title"),) and evolution.dropped == ("price",)
    assert evolution.widened == ("id",) and evolution.recopy == ("qty",)
    assert not evolution.key_lost and evolution.rewrites
    assert (
        "table 'public.t': column 'qty' changed type beyond an exact cast; the table needs a "
        "re-copy" in evolution.describe()
    )
    nullable_add = plan(BEFORE, after(ID, NAME, QTY, PRICE, Column("n", "text", "text", False, 5)))
    assert nullable_add.changed and not nullable_add.rewrites
    assert plan(BEFORE, after(Column("id", "text", "text", True, 1), NAME)).key_lost


def tables_of(kind: str, root: Path) -> Any:
    return (DeltaTables if kind == "delta" else IcebergTables)(root, "evolve")


def seeded(kind: str, root: Path) -> Any:
    tables = tables_of(kind, root)
    tables.create(BEFORE)
    rows = [{"id": n, "name": f"n{n}", "qty": n * 10, "price": n + 0.5} for n in (1, 2, 3)]
    tables.commit(effect(BEFORE, rows), record(1))
    return tables


def read(kind: str, tables: Any, shape: TableShape) -> dict[int, dict[str, Any]]:
    data = tables.read(shape)
    polars = (
        pl.read_delta(tables.path(shape))
        if kind == "delta"
        else pl.scan_iceberg(tables.table(shape)).collect()
    )
    names = list(shape.column_names)
    # The table's own column order is the source's (a re-added column moves back in place).
    assert [name for name in polars.columns if name in names] == names
    assert [name for name in data.column_names if name in names] == names
    ours = {row["id"]: row for row in data.select(names).to_pylist()}
    theirs = {row["id"]: row for row in polars.select(names).to_dicts()}
    assert ours == theirs
    return ours


KINDS = ["delta", "iceberg"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_added_column_left_null_joins_the_micro_batch_commit(kind: str, tmp_path: Path) -> None:
    tables = seeded(kind, tmp_path)
    new = after(ID, NAME, QTY, PRICE, Column("note", "text", "text", False, 5))
    evolution = plan(BEFORE, new)
    change = effect(new, [{"id": 2, "name": "b", "qty": 1, "note": "hi"}, {"id": 3, DELETED: True}])
    tables.commit(change, record(2), evolution)
    rows = read(kind, tables, new)
    assert rows[1]["note"] is None and rows[2]["note"] == "hi" and 3 not in rows
    assert tables.counter(new) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_rename_drop_widen_and_a_filled_column_in_one_commit(kind: str, tmp_path: Path) -> None:
    tables = seeded(kind, tmp_path)
    new = after(
        Column("id", "bigint", "int8", True, 1),
        Column("title", "text", "text", False, 2),
        Column("qty", "bigint", "int8", False, 3),
        Column("stock", "integer", "int4", False, 6),
    )
    defaults = {"stock": value(7)}
    evolution = plan(BEFORE, new, defaults)
    versions = len(tables.table(BEFORE).history()) if kind == "delta" else 0
    change = effect(new, [{"id": 4, "title": "d", "qty": 2**40, "stock": 1}])
    tables.commit(change, record(2), evolution, defaults)
    rows = read(kind, tables, new)
    assert rows[1] == {"id": 1, "title": "n1", "qty": 10, "stock": 7}
    assert rows[4] == {"id": 4, "title": "d", "qty": 2**40, "stock": 1}
    assert set(rows) == {1, 2, 3, 4}
    if kind == "delta":
        assert len(tables.table(new).history()) == versions + 1  # one commit
    assert tables.last_commit(new) == record(2)


@pytest.mark.parametrize("kind", KINDS)
def test_a_type_no_cast_carries_reads_null_and_asks_for_a_recopy(kind: str, tmp_path: Path) -> None:
    tables = seeded(kind, tmp_path)
    new = after(ID, NAME, Column("qty", "text", "text", False, 3), PRICE)
    evolution = plan(BEFORE, new)
    assert evolution.recopy == ("qty",)
    tables.commit(
        effect(new, [{"id": 2, "name": "b", "qty": "many", "price": 1.0}]), record(2), evolution
    )
    rows = read(kind, tables, new)
    assert rows[1]["qty"] is None and rows[2]["qty"] == "many"


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_that_loses_its_values_empties_the_table_for_the_recopy(
    kind: str, tmp_path: Path
) -> None:
    tables = seeded(kind, tmp_path)
    new = after(Column("id", "text", "text", True, 1), NAME, QTY, PRICE)
    evolution = plan(BEFORE, new)
    assert evolution.key_lost
    tables.commit(effect(new, [{"id": "x", "name": "after"}]), record(2), evolution)
    assert tables.read(new).column("id").to_pylist() == ["x"]


def test_pre_change_rows_of_the_micro_batch_convert_like_stored_rows() -> None:
    new = after(Column("id", "bigint", "int8", True, 1), Column("title", "text", "text", False, 2))
    evolution = plan(BEFORE, new)
    rows = effect(BEFORE, [{"id": 1, "name": "a", "qty": 3}, {"id": 2, DELETED: True}]).rows
    converted = evolve_rows(rows, evolution)
    assert converted.column("title").to_pylist() == ["a", None]
    assert converted.column(DELETED).to_pylist() == [False, True]
    assert effect(new, []).rows.schema.equals(converted.schema)
