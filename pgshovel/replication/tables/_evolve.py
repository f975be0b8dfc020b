"""A shape change applied in the micro-batch's one commit, for Delta and for Iceberg.

Delta (delta-rs has no column-mapping writes: its ``TableAlterer`` adds
columns but cannot rename or drop them, and has no type widening): added
columns whose existing rows stay NULL join the MERGE by schema merge; every
other change (rename, drop, widening, an added column with a value for
existing rows, a type no cast carries) rewrites the table in the same single
overwrite commit: the stored rows streamed batch by batch through
``evolve_rows``, minus the keys the micro-batch touches, then its surviving
rows. Cost: one pass over the table for such a micro-batch (memory: one
batch), no read of the source. Iceberg changes the schema in place within the
micro-batch's transaction (renames and drops by field id, int -> long and
float -> double promotions, a column whose type no cast carries dropped and
added again as a new field, so its stored values read as NULL, then moved
back to its place in the source's column order); only an added
column with a value for existing rows rewrites the data files. In both, the
columns in ``Evolution.recopy`` hold NULL until the table is copied again,
which the caller starts (the returned ``Evolution`` says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table import Transaction

from pgshovel.replication.tables import _iceberg_files
from pgshovel.replication.tables._effect import NetEffect, stored_schema
from pgshovel.replication.tables._evolution import Defaults, Evolution, evolve_rows
from pgshovel.replication.targets._parquet_tables import is_in_keys

__all__ = ["rewrite_iceberg_files", "rewritten_rows", "update_iceberg_schema"]


def rewritten_rows(
    table: DeltaTable, evolution: Evolution, effect: NetEffect, defaults: Defaults
) -> pa.RecordBatchReader:
    """The Delta table's rows after ``evolution`` and ``effect``, as a stream of batches."""
    schema = stored_schema(evolution.after)
    keys = effect.rows.select(list(evolution.after.key))
    # Opened now: delta-rs cannot be called from inside its own writer, which pulls the batches.
    stored = None if effect.truncate or evolution.key_lost else table.to_pyarrow_dataset()

    def batches() -> Iterator[pa.RecordBatch]:
        if stored is not None:
            for batch in stored.to_batches():
                rows = evolve_rows(pa.Table.from_batches([batch]), evolution, defaults)
                if keys.num_rows:
                    rows = rows.filter(pc.invert(is_in_keys(rows, keys, evolution.after.key)))
                yield from rows.cast(schema).to_batches()
        yield from effect.upserts().cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def update_iceberg_schema(transaction: Transaction, evolution: Evolution) -> None:
    """Rename, drop, re-add and promote columns in place (paths as tuples: names may hold '.')."""
    with transaction.update_schema(allow_incompatible_changes=True) as update:
        for old, new in evolution.renamed:
            update.rename_column((old,), new)
        for name in evolution.dropped:
            update.delete_column((name,))
        for name in evolution.recopy:
            update.delete_column((name,))
    # Adds the new columns and the re-added ones, and promotes widened types, by name.
    wanted = stored_schema(evolution.after)
    with transaction.update_schema() as update:
        update.union_by_name(wanted)
    _order_columns(transaction, wanted.names)


def _order_columns(transaction: Transaction, names: list[str]) -> None:
    """Put the table's columns in the order of ``names`` (columns it does not name last, in
    their order): a column re-added by a type change the schema cannot promote lands at the
    end, where the source did not move it."""
    current = [field.name for field in transaction.table_metadata.schema().fields]
    wanted = [name for name in names if name in current]
    wanted += [name for name in current if name not in wanted]
    if current == wanted:
        return
    with transaction.update_schema() as update:
        update.move_first((wanted[0],))
        for previous, name in pairwise(wanted):
            update.move_after((name,), (previous,))


def rewrite_iceberg_files(
    change: _iceberg_files.FileChange, evolution: Evolution, effect: NetEffect, defaults: Defaults
) -> int:
    """Rewrite every data file with the values added columns got, minus the touched keys."""
    after = evolution.after
    keys = effect.rows.select(list(after.key))
    tasks = _iceberg_files.plan(change.table, AlwaysTrue())
    for task in tasks:
        rows = _iceberg_files.read(change.transaction, change.table, [task])
        filled = evolve_rows(rows, _filling(evolution), defaults)
        if keys.num_rows:
            filled = filled.filter(pc.invert(is_in_keys(filled, keys, after.key)))
        change.remove([task.file])
        change.write(filled)
    return len(tasks)


def _filling(evolution: Evolution) -> Evolution:
    """The part of ``evolution`` still to do on rows read in the new schema: fill the added
    columns (read as NULL) with their values; everything else is done by the schema."""
    after = evolution.after
    before = type(after)(
        after.schema,
        after.name,
        tuple(column for column in after.columns if column.name not in evolution.filled),
        after.key,
        after.relation,
    )
    return Evolution(before, after, added=evolution.filled, filled=evolution.filled)
