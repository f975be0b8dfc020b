"""Shapes, net effects and a reference model of the copy for the table-format tests.

The model is a dict from key to row (column name to Python value): applying a
net effect to it is what the copy must look like afterwards, computed without
any table format.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from pgshovel.replication.tables._effect import (
    CHANGE_FIELDS,
    DELETED,
    TXID,
    CommitRecord,
    NetEffect,
    effect_schema,
)
from pgshovel.source import Column, TableShape

Row = dict[str, Any]
Model = dict[tuple[Any, ...], Row]

ITEMS = TableShape(
    "public",
    "items",
    (
        Column("id", "bigint", "int8", True, 1),
        Column("name", "text", "text", False, 2),
        Column("qty", "integer", "int4", False, 3),
    ),
    ("id",),
)
CHANGE_NAMES = [field.name for field in CHANGE_FIELDS]


def shape(name: str, schema: str = "public") -> TableShape:
    return TableShape(schema, name, ITEMS.columns, ITEMS.key)


def effect(table: TableShape, rows: Iterable[Row], truncate: bool = False) -> NetEffect:
    """A net effect from rows; a row with ``DELETED: True`` needs only its key."""
    rows = list(rows)
    schema = effect_schema(table)
    columns = {
        field.name: [row.get(field.name, False if field.name == DELETED else None) for row in rows]
        for field in schema
    }
    return NetEffect(table, pa.Table.from_pydict(columns, schema=schema), truncate)


def record(counter: int, horizon: str = "1:1:", batches: tuple[int, ...] = ()) -> CommitRecord:
    return CommitRecord(counter, json.dumps({"counter": counter}), horizon, batches or (counter,))


def key_of(table: TableShape, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in table.key)


def apply(model: Model, change: NetEffect) -> Model:
    """The model after ``change`` (what the copy must hold)."""
    result: Model = {} if change.truncate else dict(model)
    for row in change.rows.to_pylist():
        key = key_of(change.shape, row)
        deleted = row.pop(DELETED)
        if deleted:
            result.pop(key, None)
        else:
            result[key] = row
    return result


def rows_of(table: TableShape, data: pa.Table, change_columns: bool = True) -> Model:
    """A read table as a model (by key), optionally without the change columns."""
    names = list(table.column_names) + (CHANGE_NAMES if change_columns else [])
    return {key_of(table, row): row for row in data.select(names).to_pylist()}


def random_effect(
    table: TableShape, model: Model, rng: random.Random, changes: int, keys: int, txid: int
) -> NetEffect:
    """``changes`` random keys below ``keys``: updates, inserts and deletes (a third each)."""
    rows: list[Row] = []
    for key in rng.sample(range(keys), min(changes, keys)):
        if (key,) in model and rng.random() < 0.33:
            rows.append({"id": key, DELETED: True, TXID: txid})
        else:
            rows.append(
                {"id": key, "name": f"n{key}-{txid}", "qty": rng.randrange(100), TXID: txid}
            )
    return effect(table, rows)
