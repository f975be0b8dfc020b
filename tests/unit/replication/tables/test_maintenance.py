"""Compaction keeps the number of files bounded over a long stream; vacuum removes orphans.

Real delta-rs and pyiceberg in a temporary directory. Small thresholds make a
short stream show what a long one does.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._maintenance import Maintenance, MaintenancePolicy
from pgshovel.replication.tables._timetravel import delta_version_at
from tests.unit.replication.tables._model import (
    ITEMS,
    Model,
    apply,
    effect,
    random_effect,
    record,
    rows_of,
)

os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
POLICY = MaintenancePolicy(max_small_files=6, sort_every=2, vacuum_every=3600.0)
BATCHES = 24


def file_count(kind: str, tables: Any) -> int:
    if kind == "delta":
        return len(tables.table(ITEMS).file_uris())
    return int(tables.table(ITEMS).inspect.files().num_rows)


def appending(counter: int) -> list[dict[str, Any]]:
    """An OLTP-like micro-batch: 15 new keys; every 4th also updates and deletes recent ones."""
    rows: list[dict[str, Any]] = [{"id": counter * 20 + n, "name": "new"} for n in range(15)]
    if counter % 4 == 0:
        rows += [{"id": (counter - 1) * 20 + n, "name": "updated"} for n in range(5)]
        rows.append({"id": (counter - 1) * 20 + 7, DELETED: True})
    return rows


def stream(kind: str, tables: Any, maintenance: Maintenance | None) -> tuple[Model, list[int]]:
    model: Model = {}
    counts = []
    for counter in range(1, BATCHES + 1):
        change = effect(ITEMS, appending(counter))
        tables.commit(change, record(counter, f"{counter + 11}:{counter + 11}:"))
        model = apply(model, change)
        if maintenance is not None:
            if kind == "delta":
                maintenance.maintain_delta(tables, ITEMS)
            else:
                maintenance.maintain_iceberg(tables, ITEMS)
        counts.append(file_count(kind, tables))
    return model, counts


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_compaction_keeps_the_file_count_bounded_and_the_rows_and_position_intact(
    kind: str, tmp_path: Path
) -> None:
    opened: Any = DeltaTables if kind == "delta" else IcebergTables
    maintained = opened(tmp_path / "kept", "m")
    maintained.create(ITEMS)
    model, bounded = stream(kind, maintained, Maintenance(POLICY))
    # With compaction the files stay under the bound (the small-file threshold plus what one
    # micro-batch adds before the next compaction); without, they grow with the stream
    # (Delta shown below; Iceberg adds one file per micro-batch by construction).
    bound = POLICY.max_small_files + 4
    assert max(bounded) <= bound, bounded
    if kind == "delta":
        unmaintained = opened(tmp_path / "plain", "m")
        unmaintained.create(ITEMS)
        _, growing = stream(kind, unmaintained, None)
        assert growing[-1] > bound + 4
    assert rows_of(ITEMS, maintained.read(ITEMS)) == model
    assert maintained.last_commit(ITEMS) == record(BATCHES, f"{BATCHES + 11}:{BATCHES + 11}:")


def test_delta_sorting_by_the_key_makes_file_ranges_disjoint_and_time_travel_still_works(
    tmp_path: Path,
) -> None:
    tables = DeltaTables(tmp_path, "m")
    tables.create(ITEMS)
    maintenance = Maintenance(MaintenancePolicy(max_small_files=2, sort_every=1))
    rng = random.Random(9)
    model: Model = {}
    for counter in range(1, 5):
        if counter == 1:
            change = random_effect(ITEMS, model, rng, 50, 1000, counter)
        else:
            change = effect(ITEMS, appending(counter + 100))
        tables.commit(change, record(counter, f"{counter + 1}:{counter + 1}:"))
        model = apply(model, change)
    report = maintenance.maintain_delta(tables, ITEMS)
    assert report.compacted and report.sorted
    actions = pa.table(tables.table(ITEMS).get_add_actions(flatten=True))
    lows, highs = actions.column("min.id").to_pylist(), actions.column("max.id").to_pylist()
    ranges = sorted(zip(lows, highs, strict=True))
    assert all(high < low for (_, high), (low, _) in itertools.pairwise(ranges))
    assert rows_of(ITEMS, tables.read(ITEMS)) == model
    # The sort commit carries the last record: the position and time travel see no change.
    assert tables.last_commit(ITEMS) == record(4, "5:5:")
    version = delta_version_at(tables.path(ITEMS), 4)
    assert version is not None and rows_of(ITEMS, tables.read(ITEMS, version)) == model


def test_iceberg_vacuum_removes_data_files_no_snapshot_references(tmp_path: Path) -> None:
    tables = IcebergTables(tmp_path, "m")
    tables.create(ITEMS)
    change = effect(ITEMS, [{"id": 1, "name": "kept"}])
    tables.commit(change, record(1))
    data = Path(tables.location(ITEMS)) / "data"
    stray = data / "00000-0-crashed.parquet"  # what a crash before the catalog commit leaves
    pq.write_table(pa.table({"id": [2]}), stray)
    hour_ago = time.time() - 3600
    os.utime(stray, (hour_ago, hour_ago))
    maintenance = Maintenance(MaintenancePolicy(vacuum_every=0.0, retention_hours=0))
    maintenance.maintain_iceberg(tables, ITEMS)  # the first call starts the interval
    report = maintenance.maintain_iceberg(tables, ITEMS)
    assert report.removed == (str(stray),)
    assert not stray.exists()
    assert rows_of(ITEMS, tables.read(ITEMS)) == apply({}, change)
