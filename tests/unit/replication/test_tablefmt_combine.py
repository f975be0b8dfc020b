"""The table formats' staged combine: any cut of a micro-batch into tasks and partitions.

Random micro-batches of one keyed table's row changes (inserts, updates that
keep or move keys across partitions, deletes, TRUNCATE) are routed as the
relay routes them, cut into tasks, reduced with their details and turned into
stage rows; ``combine`` must give the table's net effect: exactly the keys the
micro-batch touched, each with the source's last row, transaction and batch,
deleted keys flagged, TRUNCATE reported.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.replication.staging.reduce import reduce_messages
from pgshovel.replication.staging.tablefmt import (
    FileStage,
    combine,
    read_stage,
    stage_rows,
    stage_schema,
)
from pgshovel.replication.tables._effect import effect_schema
from tests._staged_rows import KEYED, Changes, cut

SHAPES = {KEYED.identity: KEYED}


def _net(rows: pa.Table) -> dict[int, tuple[str | None, int | None, int | None, bool]]:
    return {
        row["id"]: (
            row["note"],
            row["_pgshovel_txid"],
            row["_pgshovel_batch"],
            row["_pgshovel_deleted"],
        )
        for row in rows.to_pylist()
    }


@pytest.mark.parametrize("seed", range(30))
def test_any_cut_combines_to_the_net_effect(seed: int) -> None:
    rng = random.Random(seed)
    changes = Changes(rng)
    for micro_batch in range(4):
        before = dict(changes.model)
        truncates = changes.truncates
        batches = rng.randint(1, 5)
        parts, _whole = changes.micro_batch(batches, rng.choice([1, 2, 4]))
        batch_ids = [100 * micro_batch + ordinal for ordinal in range(batches)]
        tasks = cut(rng, parts)
        rng.shuffle(tasks)
        staged = [reduce_messages(task, SHAPES, details=True) for task in tasks]
        for found in staged:
            for table in found.values():
                table.batch_ids = dict(enumerate(batch_ids))
        tables = [found[KEYED.identity] for found in staged if KEYED.identity in found]
        places = [table.truncated for table in tables if table.truncated is not None]
        net = combine(KEYED, [stage_rows(table) for table in tables], max(places, default=None))
        assert net.schema.equals(effect_schema(KEYED))
        truncated = changes.truncates > truncates
        assert bool(places) == truncated
        copy: dict[int, tuple[str | None, int | None]] = {} if truncated else dict(before)
        result = _net(net)
        for key, (note, _txid, batch, deleted) in result.items():
            assert batch is None if deleted else batch in batch_ids
            if deleted:
                # the deleting change's transaction, as the driver path records it
                assert _txid == changes.deleted_by[key]
                copy.pop(key, None)
            else:
                copy[key] = (note, _txid)
        assert copy == changes.model, f"micro-batch {micro_batch}"
        for key, (note, txid) in changes.model.items():
            if before.get(key) != (note, txid) or truncated:
                assert result[key][:2] == (note, txid)
                assert result[key][2] == batch_ids[txid - 1000 - (changes.txid - batches - 1000)]


def test_rows_at_or_before_the_truncate_are_dropped() -> None:
    schema = stage_schema(KEYED)

    def stage(key: int, ordinal: int, event: int) -> pa.Table:
        values: dict[str, list[Any]] = {name: [None] for name in schema.names}
        values.update(id=[key], note=["n"], _pgshovel_txid=[1], _pgshovel_batch=[10 + ordinal])
        values.update(_pgshovel_deleted=[False])
        values.update(_pgshovel_ordinal=[ordinal], _pgshovel_event=[event])
        return pa.Table.from_pydict(values, schema=schema)

    net = combine(KEYED, [stage(1, 0, 5), stage(2, 1, 3), stage(3, 1, 4)], (1, 3))
    assert net.column("id").to_pylist() == [3]
    assert net.column("_pgshovel_batch").to_pylist() == [11]


def test_a_stage_the_driver_cannot_find_names_the_shared_directory_remedy(tmp_path: Path) -> None:
    stage = FileStage("public", "acct", str(tmp_path / "elsewhere.parquet"), 1, None, None)
    with pytest.raises(ConfigurationError, match=r"'public\.acct'.*one directory shared"):
        read_stage(KEYED, stage)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_table_formats_take_the_staged_path(kind: str, tmp_path: Path) -> None:
    from pgshovel.replication.staged import Stager
    from pgshovel.replication.targets.delta import DeltaTarget
    from pgshovel.replication.targets.iceberg import IcebergTarget

    target = DeltaTarget(str(tmp_path)) if kind == "delta" else IcebergTarget(str(tmp_path))
    assert Stager(object(), target, {}, "topic", 1).enabled
