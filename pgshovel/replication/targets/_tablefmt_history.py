"""The ``history`` option of the Delta and Iceberg targets: which tables keep an SCD2 history.

``history: true`` keeps the history (``<table>~history``, in a format's
``HistoryStore``: ``tables._history.DeltaHistory``,
``tables._iceberg_history.IcebergHistory``) of every table of the set, a list
of ``schema.table`` names only of those. Each micro-batch commits a table's
history right after the table, with the same counter, and the worker counts a
table as holding a micro-batch only when its history does too
(``HistoryTarget.counter``), so recovery treats the history as one more table
of the micro-batch (never twice, never lost). A load (the initial snapshot or
a reload of the whole target) closes every current version with the load's
horizon (its ``xmax``: every source transaction before it is in the load) and
opens the loaded rows from there; a load restarted after a crash first takes
back the history commit of the attempt it replaces. An incremental snapshot
chunk (backfill, ``set resnapshot``, repair) opens a version only for a row
the chunk changes or removes, from the horizon the copy had reached. ADD
COLUMN evolves the history too; a change that rewrites the table (a type
change, a key change, a dropped or renamed column) stops with the remedy, as
the old versions cannot take the new shape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from typing import Any

from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.replication.tables._effect import TXID, CommitRecord, NetEffect
from pgshovel.replication.tables._evolution import Evolution
from pgshovel.replication.tables._history_store import HistoryStore
from pgshovel.replication.tables._maintenance import Maintenance
from pgshovel.replication.tables._versions import (
    chunk_effect,
    history_schema,
    horizon_txid,
    load_versions,
)
from pgshovel.replication.targets._tablefmt import TableFormatTarget
from pgshovel.replication.targets._tablefmt_upkeep import maintain_committed
from pgshovel.source import TableShape
from pgshovel.stream.state import WorkerState

__all__ = [
    "HistoryChoice",
    "HistoryTarget",
    "TableHistories",
    "check_history_names",
]

logger = logging.getLogger(__name__)

HistoryChoice = bool | list[str]


def check_history_names(
    choice: HistoryChoice, shapes: Collection[TableShape], *, named: bool = False
) -> None:
    """Stop with one line when ``history`` names a table the set does not hold, or (``named``:
    a catalog names a history ``<table>~history`` as it is) when a table of the set bears the
    name of another one's history."""
    known = {shape.qualified for shape in shapes}
    if not isinstance(choice, bool):
        unknown = sorted(name for name in choice if name not in known)
        if unknown:
            raise ConfigurationError(
                f"target history names {', '.join(repr(name) for name in unknown)}, which the "
                f"set does not replicate (its tables: {', '.join(sorted(known)) or 'none'}); "
                "name tables as schema.table, or write 'history: true' for all"
            )
    if not named:
        return
    kept = known if choice is True else set(choice or ())
    clashes = sorted(name for name in known if name.endswith("~history") and name[:-8] in kept)
    if clashes:
        raise ConfigurationError(
            f"target history: table {clashes[0]!r} of the set bears the name of the history of "
            f"{clashes[0][:-8]!r}; leave {clashes[0][:-8]!r} out of 'history', or rename one "
            "of the two tables in the source"
        )


class TableHistories:
    """The histories a target keeps in ``store`` (see the module docstring)."""

    def __init__(self, store: HistoryStore, choice: HistoryChoice) -> None:
        self.choice = choice
        self.store = store

    def kept(self, shape: TableShape) -> bool:
        if isinstance(self.choice, bool):
            return self.choice
        return shape.qualified in self.choice

    def counter(self, shape: TableShape) -> int | None:
        """The micro-batch the history holds last (None: no history yet)."""
        if not self.store.exists(shape):
            return None
        return self.store.counter(shape)

    # -- micro-batches ----------------------------------------------------------------

    def commit(
        self,
        effect: NetEffect,
        record: CommitRecord,
        before: TableShape | None,
        evolution: Evolution | None,
    ) -> None:
        """Commit the history of ``effect`` after the table's (nothing when none is kept). A
        renamed table's history moves with it (again after a restart, unless done); a table
        new to the set (``set update``) starts its history with its first commit."""
        shape = effect.shape
        if not self.kept(shape):
            return
        store = self.store
        if before is not None and before.identity != shape.identity:
            if store.exists(before) and not store.exists(shape):
                store.rename(before, shape)
                logger.info("history of %s moved to %s", before.qualified, store.where(shape))
        store.create(shape)
        if evolution is not None and evolution.changed:
            self._evolve(shape, evolution, record)
        rows = effect.rows
        if rows.num_rows and rows.column(TXID).null_count == rows.num_rows:
            # An incremental snapshot chunk: no source transaction wrote its rows.
            effect = chunk_effect(
                store.current(shape), effect, horizon_txid(record.horizon), _clock()
            )
        store.commit(effect, record)

    def _evolve(self, shape: TableShape, evolution: Evolution, record: CommitRecord) -> None:
        if (self.store.counter(shape) or 0) >= record.counter:
            return
        if evolution.rewrites or evolution.key_lost:
            raise SchemaError(
                f"table {shape.qualified!r}: its history cannot follow a schema change that "
                "rewrites the table (a type change, a key change, a dropped or renamed column); "
                f"{self.store.removal(shape)} and reload the target, or leave the table out "
                "of 'history'"
            )
        present = set(self.store.columns(shape))
        wanted = history_schema(shape)
        fields = [wanted.field(name) for name in evolution.added if name not in present]
        if fields:
            self.store.add_columns(shape, fields)
            logger.info("history of %s: added columns %s", shape.qualified, evolution.added)

    def drop(self, shape: TableShape) -> None:
        """Remove the history of a table dropped in the source (with its copy)."""
        self.store.drop(shape)

    # -- loads ------------------------------------------------------------------------

    def reset(self, shape: TableShape, resumed: bool) -> None:
        """Before a load: create the history, or (``resumed``: a load that stopped) take back
        the history commit of the load that stopped."""
        if not self.kept(shape):
            return
        if not self.store.exists(shape):
            self.store.create(shape)
            return
        if resumed and self.store.undo_load(shape):
            logger.info("history of %s: the stopped load's versions removed", shape.qualified)

    def commit_load(self, shape: TableShape, rows: Any, record: CommitRecord) -> None:
        """After a load: close every current version and open ``rows`` (the loaded copy, stored
        schema) at the load's horizon and time, in one commit marked as a load's."""
        if not self.kept(shape):
            return
        txid = horizon_txid(record.horizon)
        versions = load_versions(shape, self.store.versions(shape), rows, txid, _clock())
        self.store.commit_load(shape, versions, record)
        logger.info(
            "history of %s: %d versions opened at txid %d by the load",
            shape.qualified,
            rows.num_rows,
            txid,
        )


class HistoryTarget(TableFormatTarget):
    """A table-format target that keeps the histories its ``history`` option names: the
    format's target gives ``_history_store``; recovery counts a table with its history."""

    history: HistoryChoice = False
    #: whether the format names a history as ``<table>~history`` unescaped (a catalog)
    history_named: bool = False
    _histories: TableHistories | None = None

    def _history_store(self, tables: Any) -> HistoryStore:
        raise NotImplementedError

    def _maintain_history(self, maintenance: Maintenance, shape: TableShape) -> Any:
        """Maintain the table's history (the format's ``Maintenance.maintain_*_history``)."""
        raise NotImplementedError

    def _upkeep(self, shapes: Sequence[TableShape]) -> None:
        super()._upkeep(shapes)
        histories = self._histories
        if self.maintenance is None or histories is None:
            return
        kept = [shape for shape in shapes if histories.kept(shape)]
        maintain_committed(self.maintenance, self._maintain_history, kept, "~history")

    def _keep_histories(self, tables: Any) -> None:
        store = self._history_store(tables) if self.history else None
        self._histories = None if store is None else TableHistories(store, self.history)

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        state = super().open(cluster, set_name)
        if state is not None:
            check_history_names(self.history, state.tables, named=self.history_named)
        return state

    def begin_snapshot(self, state: WorkerState) -> None:
        check_history_names(self.history, state.tables, named=self.history_named)
        super().begin_snapshot(state)

    def counter(self, shape: TableShape) -> int | None:
        counter: int | None = self.tables.counter(shape)
        if self._histories is None or not self._histories.kept(shape) or counter is None:
            return counter
        return min(counter, self._histories.counter(shape) or 0)

    def _commit_history(
        self, effect: NetEffect, record: Any, before: TableShape | None, evolution: Any
    ) -> None:
        if self._histories is not None:
            self._histories.commit(effect, record, before, evolution)

    def _load_history(self, shape: TableShape, record: Any) -> None:
        if self._histories is not None and self._histories.kept(shape):
            self._histories.commit_load(shape, self.tables.read(shape), record)

    def _reset_history(self, shape: TableShape) -> None:
        if self._histories is not None:
            self._histories.reset(shape, self._resumed_load)

    def _drop_history(self, shape: TableShape) -> None:
        if self._histories is not None:
            self._histories.drop(shape)


def _clock() -> int:
    return time.time_ns() // 1000
