"""The SCD type 2 history beside a Delta copy, the change data feed's source transactions, and
RENAME TABLE / DROP TABLE for both formats."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pgshovel.errors import SchemaError
from pgshovel.replication.tables._ddl import drop_delta, drop_iceberg, rename_delta, rename_iceberg
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED, TIMESTAMP, TXID
from pgshovel.replication.tables._history import (
    END_TIME,
    END_TXID,
    START_TIME,
    START_TXID,
    DeltaHistory,
)
from pgshovel.replication.tables._iceberg import IcebergTables
from tests.unit.replication.tables._model import ITEMS, effect, record, rows_of, shape

os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
T0 = 1_700_000_000_000_000  # µs since the epoch


def versions(history: DeltaHistory) -> list[tuple[Any, ...]]:
    data = history.table(ITEMS).to_pyarrow_table()
    rows = [
        (row["id"], row["name"], row[START_TXID], row[END_TXID], row[END_TIME] is None)
        for row in data.to_pylist()
    ]
    return sorted(rows, key=lambda row: (row[0], row[2]))


def test_each_version_of_a_row_starts_and_ends_with_its_source_transaction(
    tmp_path: Path,
) -> None:
    tables = DeltaTables(tmp_path, "h")
    history = DeltaHistory(tables)
    tables.create(ITEMS)
    history.create(ITEMS)
    micro_batches = [
        effect(
            ITEMS,
            [
                {"id": 1, "name": "a", TXID: 10, TIMESTAMP: T0},
                {"id": 2, "name": "b", TXID: 10, TIMESTAMP: T0},
            ],
        ),
        effect(
            ITEMS,
            [
                {"id": 1, "name": "a2", TXID: 11, TIMESTAMP: T0 + 1},
                {"id": 2, DELETED: True, TXID: 12, TIMESTAMP: T0 + 2},
            ],
        ),
        effect(ITEMS, [{"id": 3, "name": "c", TXID: 13, TIMESTAMP: T0 + 3}]),
    ]
    for counter, change in enumerate(micro_batches, start=1):
        tables.commit(change, record(counter))
        history.commit(change, record(counter))
    assert history.commit(micro_batches[-1], record(3)).skipped  # re-applied: nothing twice
    assert versions(history) == [
        (1, "a", 10, 11, False),
        (1, "a2", 11, None, True),
        (2, "b", 10, 12, False),
        (3, "c", 13, None, True),
    ]
    assert history.counter(ITEMS) == 3
    # A truncate ends every current version with its own transaction.
    truncate = effect(ITEMS, [{"id": 9, "name": "z", TXID: 15, TIMESTAMP: T0 + 5}], truncate=True)
    truncate = type(truncate)(ITEMS, truncate.rows, True, 14, T0 + 4)
    tables.commit(truncate, record(4))
    history.commit(truncate, record(4))
    current = [row for row in versions(history) if row[4]]
    assert current == [(9, "z", 15, None, True)]
    ended = {row[0]: row[3] for row in versions(history) if row[2] in (11, 13)}
    assert ended == {1: 14, 3: 14}
    times = history.table(ITEMS).to_pyarrow_table().column(START_TIME).to_pylist()
    assert all(value is not None for value in times)


def test_the_change_data_feed_carries_each_written_rows_source_transaction(tmp_path: Path) -> None:
    tables = DeltaTables(tmp_path, "cdf")
    tables.create(ITEMS)
    tables.commit(effect(ITEMS, [{"id": 1, "name": "a", TXID: 21}]), record(1))
    tables.commit(effect(ITEMS, [{"id": 1, "name": "b", TXID: 22}]), record(2))
    feed = pa.table(DeltaTable(tables.path(ITEMS)).load_cdf(starting_version=0).read_all())
    changes = sorted(
        (row["_commit_version"], row["_change_type"], row[TXID]) for row in feed.to_pylist()
    )
    assert changes == [(1, "insert", 21), (2, "update_postimage", 22), (2, "update_preimage", 21)]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_rename_and_drop_table(kind: str, tmp_path: Path) -> None:
    tables: Any = (DeltaTables if kind == "delta" else IcebergTables)(tmp_path, "ddl")
    old, new = shape("items"), shape("goods", schema="sales")
    tables.create(old)
    tables.commit(effect(old, [{"id": 1, "name": "kept"}]), record(1))
    line = (rename_delta if kind == "delta" else rename_iceberg)(tables, old, new)
    assert "'public.items'" in line and "'sales.goods'" in line
    assert not tables.exists(old) and tables.exists(new)
    assert rows_of(new, tables.read(new), False) == {(1,): {"id": 1, "name": "kept", "qty": None}}
    tables.commit(effect(new, [{"id": 2}]), record(2))  # the stream goes on under the new name
    assert tables.counter(new) == 2
    (drop_delta if kind == "delta" else drop_iceberg)(tables, new)
    assert not tables.exists(new)
    if kind == "delta":
        assert not Path(tables.path(new)).exists()


def test_a_delta_rename_onto_an_existing_table_names_the_remedy(tmp_path: Path) -> None:
    tables = DeltaTables(tmp_path, "ddl")
    tables.create(shape("a"))
    tables.create(shape("b"))
    with pytest.raises(SchemaError, match=r"already exists; remove it, then restart the worker"):
        rename_delta(tables, shape("a"), shape("b"))
