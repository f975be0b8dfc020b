"""The Delta Lake target: the set's tables as Delta tables under ``path`` (delta-rs, no JVM).

A thin adapter over ``pgshovel.replication.tables`` (``DeltaTables``); what it
shares with the Iceberg target is in ``_tablefmt``. Each table lives under
``<path>/<schema>/<table>`` with the change data feed on; each micro-batch is
one MERGE commit per touched table carrying an application transaction
(``pgshovel:<cluster>:<set>``, the micro-batch's counter) and the stream
position in its commit metadata. The worker's own files are under
``<path>/_pgshovel/``. Read a table with ``deltalake.DeltaTable(path)``,
DuckDB's ``delta_scan`` or Spark with the Delta runtime. Needs the ``tables``
extra (``pip install 'pgshovel[tables]'``). With ``history`` a table keeps an SCD
type 2 history ``<table>~history`` beside its copy (``_tablefmt_history``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from pgshovel.settings import NonEmptyText, PositiveInt
from pgshovel.source import TableShape
from pgshovel.stream.state import WorkerState

try:
    from pgshovel.replication.tables._ddl import drop_delta, rename_delta
    from pgshovel.replication.tables._delta import DeltaTables
    from pgshovel.replication.tables._effect import NetEffect
    from pgshovel.replication.tables._maintenance import Maintenance, MaintenanceReport
    from pgshovel.replication.tables._snapshot import WrittenFile, commit_delta_snapshot
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the delta target needs the tables extra: pip install 'pgshovel[tables]' ({error})"
    ) from error

from pgshovel.replication.targets._tablefmt import TableFormatTarget
from pgshovel.replication.targets._tablefmt_history import (
    HistoryChoice,
    TableHistories,
    check_history_names,
)
from pgshovel.replication.targets._tablefmt_upkeep import upkeep_policy

__all__ = ["DeltaTarget"]


class DeltaTarget(TableFormatTarget):
    """Replicates into Delta tables under ``path`` (a local or mounted directory)."""

    kind = "delta"
    snapshot_suffix = ""

    def __init__(
        self,
        path: NonEmptyText,
        change_data_feed: bool = True,
        maintenance: bool = True,
        max_small_files: PositiveInt = 16,
        history: HistoryChoice = False,
    ) -> None:
        super().__init__(Path(path), upkeep_policy(maintenance, max_small_files))
        self.path = path
        self.change_data_feed = change_data_feed
        #: the tables that keep an SCD2 history beside their copy (True: all)
        self.history = history
        self._histories: TableHistories | None = None

    def _make_tables(self, app_id: str) -> DeltaTables:
        tables = DeltaTables(self.root, app_id, change_data_feed=self.change_data_feed)
        self._histories = TableHistories(tables, self.history) if self.history else None
        return tables

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        state = super().open(cluster, set_name)
        if state is not None:
            check_history_names(self.history, state.tables)
        return state

    def begin_snapshot(self, state: WorkerState) -> None:
        check_history_names(self.history, state.tables)
        super().begin_snapshot(state)

    def counter(self, shape: TableShape) -> int | None:
        counter: int | None = self.tables.counter(shape)
        if self._histories is None or not self._histories.kept(shape) or counter is None:
            return counter
        held: int = min(counter, self._histories.counter(shape) or 0)
        return held

    def _commit_history(
        self, effect: NetEffect, record: Any, before: TableShape | None, evolution: Any
    ) -> None:
        if self._histories is not None:
            self._histories.commit(effect, record, before, evolution)

    def _load_history(self, shape: TableShape, record: Any) -> None:
        if self._histories is not None and self._histories.kept(shape):
            self._histories.commit_load(shape, self.tables.read(shape), record)

    def _maintain(self, maintenance: Maintenance, shape: TableShape) -> MaintenanceReport:
        return maintenance.maintain_delta(self.tables, shape)

    def _reset_table(self, shape: TableShape) -> None:
        self.tables.forget(shape)
        shutil.rmtree(self.tables.path(shape), ignore_errors=True)
        self.tables.create(shape)
        if self._histories is not None:
            self._histories.reset(shape, self._resumed_load)

    def _commit_snapshot(
        self, shape: TableShape, files: Sequence[WrittenFile], record: Any
    ) -> None:
        commit_delta_snapshot(self.tables, shape, files, record)

    def _rename_table(self, before: TableShape, after: TableShape) -> None:
        rename_delta(self.tables, before, after)

    def _drop_table(self, shape: TableShape) -> None:
        drop_delta(self.tables, shape)
        if self._histories is not None:
            self._histories.drop(shape)

    def _read_between(self, shape: TableShape, name: str, low: Any, high: Any) -> pa.Table:
        dataset = self.tables.table(shape).to_pyarrow_dataset()
        field = ds.field(name)
        bounds = [field >= low] if low is not None else []
        bounds += [field <= high] if high is not None else []
        condition = bounds[0] if len(bounds) == 1 else bounds[0] & bounds[1]
        table: pa.Table = dataset.to_table(filter=condition)
        return table
