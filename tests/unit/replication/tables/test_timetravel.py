"""Time travel by source transaction: the version found holds exactly the source at its horizon.

A simulated source commits transactions out of txid order; micro-batches take
what committed between two horizons. For 20 random transactions, the version
(Delta) or snapshot (Iceberg) found must hold the transaction, its previous one
must not, and its rows must equal the source's state at the found horizon.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import DELETED, TXID
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._timetravel import (
    delta_version_at,
    first_holding,
    iceberg_snapshot_at,
)
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot
from tests.unit.replication.tables._model import ITEMS, Model, apply, effect, record, rows_of

os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")


def test_the_first_horizon_showing_the_transaction_committed_is_chosen() -> None:
    horizons = [(1, "10:10:"), (2, "10:14:10,12"), (3, "12:16:12"), (4, "17:17:")]
    assert first_holding(horizons, 9) == 1
    assert first_holding(horizons, 11) == 2
    assert first_holding(horizons, 10) == 3  # in progress at 2's horizon
    assert first_holding(horizons, 12) == 4
    assert first_holding(horizons, 17) is None  # not applied yet
    assert first_holding([], 5) is None


def horizon(committed: set[int], started: int) -> str:
    running = sorted(set(range(1, started + 1)) - committed)
    xmax = started + 1
    xmin = running[0] if running else xmax
    return f"{xmin}:{xmax}:{','.join(map(str, running))}"


def simulated_source(rng: random.Random, transactions: int) -> list[tuple[str, list[int]]]:
    """Micro-batches as (horizon, txids in commit order), txids committing out of order."""
    order = list(range(1, transactions + 1))
    for index in range(0, transactions - 3, 3):  # neighbours swap: commit order != txid order
        window = order[index : index + 3]
        rng.shuffle(window)
        order[index : index + 3] = window
    batches, committed, position = [], set(), 0
    while position < transactions:
        size = rng.randint(1, 5)
        chunk = order[position : position + size]
        position += size
        committed.update(chunk)
        started = max(max(committed), min(transactions, max(chunk) + 1))
        batches.append((horizon(committed, started), chunk))
    return batches


def changes_of(txid: int) -> list[dict[str, Any]]:
    rng = random.Random(txid)
    return [
        {"id": key, DELETED: True, TXID: txid}
        if rng.random() < 0.3
        else {"id": key, "name": f"t{txid}", TXID: txid}
        for key in rng.sample(range(12), 3)
    ]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_version_found_holds_the_source_as_of_its_horizon(kind: str, tmp_path: Path) -> None:
    rng = random.Random(kind)
    tables: Any = (DeltaTables if kind == "delta" else IcebergTables)(tmp_path, "tt")
    tables.create(ITEMS)
    states: dict[str, Model] = {}  # the source's state at each horizon
    model: Model = {}
    batches = simulated_source(rng, 60)
    for counter, (text, chunk) in enumerate(batches, start=1):
        rows: dict[int, dict[str, Any]] = {}
        for txid in chunk:  # commit order: the last change per key wins
            for row in changes_of(txid):
                rows[row["id"]] = row
        change = effect(ITEMS, rows.values())
        tables.commit(change, record(counter, text))
        model = apply(model, change)
        states[text] = model
    for txid in rng.sample(range(1, 61), 20):
        if kind == "delta":
            version = delta_version_at(tables.path(ITEMS), txid)
            assert version is not None
            found = tables.read(ITEMS, version)
            entry = next(e for e in tables.table(ITEMS).history() if e["version"] == version)
            text = entry["pgshovel.horizon"]
        else:
            snapshot_id = iceberg_snapshot_at(tables.table(ITEMS), txid)
            assert snapshot_id is not None
            found = tables.read(ITEMS, snapshot_id)
            snapshot = tables.table(ITEMS).snapshot_by_id(snapshot_id)
            text = snapshot.summary.additional_properties["pgshovel.horizon"]
        assert is_visible(txid, parse_txid_snapshot(text))
        assert rows_of(ITEMS, found) == states[text], txid
        earlier = [h for h, _ in batches[: [h for h, _ in batches].index(text)]]
        assert not any(is_visible(txid, parse_txid_snapshot(h)) for h in earlier)
