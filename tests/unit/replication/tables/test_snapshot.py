"""The initial snapshot: key ranges written as Parquet files by Spark tasks, committed once.

A real local SparkSession runs one task per key range (the COPY text comes
from a generator standing in for the source); the driver commits the files
once per table. The copy is then read back by the format's reader and polars,
the stream's MERGE applies on top of it, and the files are key-ordered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import polars as pl
import pyarrow as pa
import pytest

from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import spark_session
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._snapshot import (
    SnapshotWriter,
    WrittenFile,
    commit_delta_snapshot,
    commit_iceberg_snapshot,
    snapshot_directory,
)
from pgshovel.source import KeyRange
from pgshovel.source.copytext import encode_row
from tests.unit.replication.tables._model import (
    CHANGE_NAMES,
    ITEMS,
    Model,
    apply,
    effect,
    record,
    rows_of,
)

os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
RANGES = 4
PER_RANGE = 250


def source_rows(index: int) -> list[tuple[str | None, ...]]:
    """Range ``index``'s rows as PostgreSQL prints them (keys descending: the writer sorts)."""
    first = index * PER_RANGE
    return [
        (str(key), None if key % 7 == 0 else f"name\t{key}", str(key % 13))
        for key in reversed(range(first, first + PER_RANGE))
    ]


def expected() -> Model:
    return {
        (key,): {"id": key, "name": None if key % 7 == 0 else f"name\t{key}", "qty": key % 13}
        for key in range(RANGES * PER_RANGE)
    }


def expected_stored() -> Model:
    """``expected()`` with the change columns (null after a snapshot)."""
    return {key: {**row, **dict.fromkeys(CHANGE_NAMES)} for key, row in expected().items()}


def write_range(writer: SnapshotWriter, index: int) -> list[WrittenFile]:
    key_range = KeyRange(ITEMS, index, None, None)

    def copy_out(file: IO[bytes]) -> None:
        file.write("".join(encode_row(row) for row in source_rows(index)).encode())

    return writer.load_range(key_range, copy_out)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # Not stopped here: getOrCreate hands every fixture of this process the same session,
    # so stopping it would stop the others'; it ends with the process.
    yield spark_session(SparkSettings(master="local[2]", app_name="pgshovel-test"))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_spark_tasks_write_the_ranges_and_the_driver_commits_them_once(
    kind: str, spark: Any, tmp_path: Path
) -> None:
    tables: Any = (DeltaTables if kind == "delta" else IcebergTables)(tmp_path, "snap")
    tables.create(ITEMS)
    writer = SnapshotWriter(ITEMS, snapshot_directory(tables, ITEMS), rows_per_file=100)
    results = (
        spark.sparkContext.parallelize(range(RANGES), RANGES)
        .map(lambda index: write_range(writer, index))
        .collect()
    )
    files = [file for written in results for file in written]
    assert len(files) == RANGES * 3  # 250 rows in files of at most 100
    if kind == "delta":
        before = tables.table(ITEMS).version()
        commit_delta_snapshot(tables, ITEMS, files, record(1, "50:60:55"))
        assert tables.table(ITEMS).version() == before + 1  # one commit for all files
        read = pl.read_delta(tables.path(ITEMS)).to_arrow()
    else:
        commit_iceberg_snapshot(tables, ITEMS, files, record(1, "50:60:55"))
        assert len(tables.table(ITEMS).snapshots()) == 1
        read = pl.scan_iceberg(tables.table(ITEMS)).collect().to_arrow()
    assert rows_of(ITEMS, tables.read(ITEMS), False) == expected()
    assert rows_of(ITEMS, read, False) == expected()
    assert tables.last_commit(ITEMS) == record(1, "50:60:55")
    # The stream goes on from the snapshot: a MERGE on top, reading only the files it touches.
    change = effect(ITEMS, [{"id": 5, "name": "changed"}, {"id": 6, DELETED: True}])
    result = tables.commit(change, record(2))
    if kind == "delta":
        assert result.files_skipped >= len(files) - 1
    else:
        assert result.files_scanned == 1
    assert rows_of(ITEMS, tables.read(ITEMS), False) == rows_of(
        ITEMS, pa.Table.from_pylist(list(apply(expected_stored(), change).values())), False
    )


def test_a_snapshot_committed_again_replaces_what_the_table_held(tmp_path: Path) -> None:
    tables = DeltaTables(tmp_path, "snap")
    tables.create(ITEMS)
    tables.commit(effect(ITEMS, [{"id": 99_999, "name": "stale"}]), record(1))
    writer = SnapshotWriter(ITEMS, snapshot_directory(tables, ITEMS))
    files = write_range(writer, 0)
    commit_delta_snapshot(tables, ITEMS, files, record(2))
    rows = rows_of(ITEMS, tables.read(ITEMS), False)
    assert (99_999,) not in rows and len(rows) == PER_RANGE
    assert isinstance(tables.read(ITEMS), pa.Table)
