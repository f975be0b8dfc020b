"""The Delta target's ``history`` option: which tables keep an SCD2 history, and its commits.

``history: true`` keeps the history (``tables._history.DeltaHistory``,
``<table>~history`` beside the copy) of every table of the set, a list of
``schema.table`` names only of those. Each micro-batch commits a table's
history right after the table, with the same counter, and the worker counts a
table as holding a micro-batch only when its history does too, so recovery
treats the history as one more table of the micro-batch (never twice, never
lost). A load (the initial snapshot or a reload of the whole target) closes
every current version with the load's horizon (its ``xmax``: every source
transaction before it is in the load) and opens the loaded rows from there; a
load restarted after a crash first removes the history commit of the attempt
it replaces. An incremental snapshot chunk (backfill, ``set resnapshot``,
repair) opens a version only for a row the chunk changes or removes, from the
horizon the copy had reached. ADD COLUMN evolves the history too; a change
that rewrites the table (a type change, a key change, a dropped or renamed
column) stops with the remedy, as the old versions cannot take the new shape.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Collection
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Field, Transaction, write_deltalake

from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.replication.tables._delta import CommitResult, DeltaTables
from pgshovel.replication.tables._effect import (
    DELETED,
    TIMESTAMP,
    TXID,
    CommitRecord,
    NetEffect,
    effect_schema,
)
from pgshovel.replication.tables._evolution import Evolution
from pgshovel.replication.tables._history import (
    END_TIME,
    END_TXID,
    START_TIME,
    START_TXID,
    DeltaHistory,
    history_schema,
)
from pgshovel.source import TableShape

__all__ = [
    "HistoryChoice",
    "TableHistories",
    "check_history_names",
    "chunk_effect",
    "horizon_txid",
]

logger = logging.getLogger(__name__)

HistoryChoice = bool | list[str]

#: the commit-metadata key marking a load's history commit
_LOAD = "pgshovel.load"
_TIME = pa.timestamp("us", tz="UTC")


def check_history_names(choice: HistoryChoice, shapes: Collection[TableShape]) -> None:
    """Stop with one line when ``history`` names a table the set does not hold."""
    if isinstance(choice, bool):
        return
    known = {shape.qualified for shape in shapes}
    unknown = sorted(name for name in choice if name not in known)
    if unknown:
        raise ConfigurationError(
            f"target history names {', '.join(repr(name) for name in unknown)}, which the set "
            f"does not replicate (its tables: {', '.join(sorted(known)) or 'none'}); name tables "
            "as schema.table, or write 'history: true' for all"
        )


def horizon_txid(horizon: str) -> int:
    """The ``xmax`` of a ``txid_snapshot`` text: every source transaction before it that is
    not in progress is visible in it."""
    try:
        return int(horizon.split(":")[1])
    except (IndexError, ValueError) as error:
        raise SchemaError(f"not a txid snapshot: {horizon!r}") from error


class TableHistories:
    """The histories the Delta target keeps (see the module docstring)."""

    def __init__(self, tables: DeltaTables, choice: HistoryChoice) -> None:
        self.choice = choice
        self.history = DeltaHistory(tables)
        self.tables = tables

    def kept(self, shape: TableShape) -> bool:
        if isinstance(self.choice, bool):
            return self.choice
        return shape.qualified in self.choice

    def exists(self, shape: TableShape) -> bool:
        return DeltaTable.is_deltatable(self.history.path(shape), self.tables.storage_options)

    def counter(self, shape: TableShape) -> int | None:
        """The micro-batch the history holds last (None: no history yet)."""
        if not self.exists(shape):
            return None
        return self.history.counter(shape)

    # -- micro-batches ----------------------------------------------------------------

    def commit(
        self,
        effect: NetEffect,
        record: CommitRecord,
        before: TableShape | None,
        evolution: Evolution | None,
    ) -> CommitResult | None:
        """The history's commit of ``effect`` after the table's (None: no history kept). A
        renamed table's history moves with it (again after a restart, unless done); a table
        new to the set (``set update``) starts its history with its first commit."""
        shape = effect.shape
        if not self.kept(shape):
            return None
        if before is not None and before.identity != shape.identity:
            source, target = Path(self.history.path(before)), Path(self.history.path(shape))
            if source.exists() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(source, target)
                logger.info("history of %s moved to %s", before.qualified, target)
        if not self.exists(shape):
            self.history.create(shape)
        if evolution is not None and evolution.changed:
            self._evolve(shape, evolution, record)
        rows = effect.rows
        if rows.num_rows and rows.column(TXID).null_count == rows.num_rows:
            # An incremental snapshot chunk: no source transaction wrote its rows.
            versions = self.history.table(shape).to_pyarrow_dataset()
            current = versions.to_table(filter=ds.field(END_TXID).is_null())
            effect = chunk_effect(current, effect, horizon_txid(record.horizon), _clock())
        return self.history.commit(effect, record)

    def _evolve(self, shape: TableShape, evolution: Evolution, record: CommitRecord) -> None:
        table = self.history.table(shape)
        if (table.transaction_version(self.tables.app_id) or 0) >= record.counter:
            return
        if evolution.rewrites or evolution.key_lost:
            raise SchemaError(
                f"table {shape.qualified!r}: its history cannot follow a schema change that "
                "rewrites the table (a type change, a key change, a dropped or renamed column); "
                "remove the history's directory "
                f"{self.history.path(shape)!r} and reload the target, or leave the table out "
                "of 'history'"
            )
        present = set(pa.schema(table.schema().to_arrow()).names)
        wanted = history_schema(shape)
        fields = [
            Field.from_arrow(wanted.field(name)) for name in evolution.added if name not in present
        ]
        if fields:
            table.alter.add_columns(fields)
            logger.info("history of %s: added columns %s", shape.qualified, evolution.added)

    def drop(self, shape: TableShape) -> None:
        """Remove the history of a table dropped in the source (with its copy)."""
        shutil.rmtree(self.history.path(shape), ignore_errors=True)

    # -- loads ------------------------------------------------------------------------

    def reset(self, shape: TableShape, resumed: bool) -> None:
        """Before a load: create the history, or (``resumed``: a load that stopped) take back
        the history commit of the load that stopped."""
        if not self.kept(shape):
            return
        if not self.exists(shape):
            self.history.create(shape)
            return
        if not resumed:
            return
        table = self.history.table(shape)
        latest = table.history(1)
        if latest and latest[0].get(_LOAD) == "true":
            version = int(latest[0]["version"])
            table.restore(version - 1)
            logger.info("history of %s: the stopped load's versions removed", shape.qualified)

    def commit_load(self, shape: TableShape, rows: pa.Table, record: CommitRecord) -> None:
        """After a load: close every current version and open ``rows`` (the loaded copy, stored
        schema) at the load's horizon and time, in one commit marked as a load's."""
        if not self.kept(shape):
            return
        txid, micros = horizon_txid(record.horizon), _clock()
        table = self.history.table(shape)
        before = table.to_pyarrow_table()
        current = pc.is_null(before.column(END_TXID))
        closed = before.set_column(
            before.schema.get_field_index(END_TXID),
            END_TXID,
            pc.if_else(current, pa.scalar(txid, pa.int64()), before.column(END_TXID)),
        )
        closed = closed.set_column(
            closed.schema.get_field_index(END_TIME),
            END_TIME,
            pc.if_else(current, pa.scalar(micros, _TIME), closed.column(END_TIME)),
        )
        count = rows.num_rows
        opened = rows.select(list(shape.column_names))
        for name, value, kind in (
            (START_TXID, txid, pa.int64()),
            (START_TIME, micros, _TIME),
            (END_TXID, None, pa.int64()),
            (END_TIME, None, _TIME),
        ):
            opened = opened.append_column(pa.field(name, kind), pa.array([value] * count, kind))
        schema = history_schema(shape)
        properties = CommitProperties(
            app_transactions=[Transaction(self.tables.app_id, record.counter)],
            custom_metadata={**record.to_properties(), _LOAD: "true"},
        )
        write_deltalake(
            table,
            pa.concat_tables([closed.cast(schema), opened.cast(schema)]),
            mode="overwrite",
            commit_properties=properties,
        )
        logger.info(
            "history of %s: %d versions opened at txid %d by the load", shape.qualified, count, txid
        )


def chunk_effect(history: pa.Table, effect: NetEffect, txid: int, micros: int) -> NetEffect:
    """An incremental snapshot chunk's net effect (change columns null) as the history takes it:
    only the rows that differ from the key's current version (``history``: the current
    versions), stamped with ``txid`` and ``micros``."""
    shape = effect.shape
    names = list(shape.column_names)
    current = {tuple(row[name] for name in names) for row in history.select(names).to_pylist()}
    keys = {
        tuple(row[name] for name in shape.key)
        for row in history.select(list(shape.key)).to_pylist()
    }
    keep = []
    for row in effect.rows.select([*names, DELETED]).to_pylist():
        if row[DELETED]:
            keep.append(tuple(row[name] for name in shape.key) in keys)
        else:
            keep.append(tuple(row[name] for name in names) not in current)
    rows = effect.rows.filter(pa.array(keep, pa.bool_()))
    count = rows.num_rows
    rows = rows.set_column(
        rows.schema.get_field_index(TXID), TXID, pa.array([txid] * count, pa.int64())
    )
    rows = rows.set_column(
        rows.schema.get_field_index(TIMESTAMP), TIMESTAMP, pa.array([micros] * count, _TIME)
    )
    return NetEffect(shape, rows.cast(effect_schema(shape)))


def _clock() -> int:
    return time.time_ns() // 1000
