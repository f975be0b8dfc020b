"""Keeping a copy's files few and key-ordered: compaction, sorting, vacuum and orphan cleanup.

Every micro-batch adds files (a MERGE rewrites the files it touches and
writes the new rows; Iceberg appends one file per commit), so the file count
grows with the stream unless it is compacted. ``maintain`` is what the worker
calls for a table between micro-batches — in the thread that commits, so never
concurrently with a MERGE: it compacts when the table has more than
``max_small_files`` files smaller than ``small_file_bytes`` (so the count
stays bounded by that plus the compacted files), rewrites the table ordered by
its first key column every ``sort_every`` compactions (Delta's z-order on one
column is a sort: the key ranges of files stop overlapping and the MERGE's key
bounds prune again), and vacuums every ``vacuum_every`` seconds, keeping
``retention_hours`` of history for readers and time travel. Maintenance
commits carry the last ``CommitRecord`` so the table's position and time travel
are unchanged by them (they change no row; Delta marks them ``dataChange:
false``, so its change data feed skips them). Iceberg (pyiceberg has no
rewrite action): compaction replaces the small files by their rows sorted by
the first key column in one snapshot (at most ``max_small_files`` small files,
so bounded memory); vacuum expires snapshots older than the retention (a
pyiceberg commit copies the whole table metadata, so its cost grows with the
snapshots kept) and removes data files no snapshot references (what a crash
between writing files and committing leaves). A table's SCD2 history
(``<table>~history``) is maintained the same way (``maintain_*_history``),
its maintenance commits carrying the history's own last record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table import Table

from pgshovel.replication.tables import _iceberg_files
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import CommitRecord
from pgshovel.replication.tables._history import DeltaHistory
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._iceberg_history import IcebergHistory
from pgshovel.source import TableShape

__all__ = ["Maintenance", "MaintenancePolicy", "MaintenanceReport"]

logger = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class MaintenancePolicy:
    """When ``maintain`` compacts, sorts and vacuums a table (see the module docstring)."""

    max_small_files: int = 16
    small_file_bytes: int = 32 * MIB
    target_file_bytes: int = 128 * MIB
    #: sort by the first key column every this many compactions (0: never)
    sort_every: int = 8
    vacuum_every: float = 3600.0
    retention_hours: int = 168


@dataclass(frozen=True)
class MaintenanceReport:
    """What ``maintain`` did to one table."""

    table: str
    files_before: int
    files_after: int
    compacted: bool = False
    sorted: bool = False
    removed: tuple[str, ...] = ()


@dataclass
class Maintenance:
    """Per-table maintenance state of one worker (how many compactions, when last vacuumed)."""

    policy: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    _compactions: dict[str, int] = field(default_factory=dict)
    _vacuumed: dict[str, float] = field(default_factory=dict)

    def _vacuum_due(self, name: str) -> bool:
        last = self._vacuumed.get(name)
        if last is None:
            self._vacuumed[name] = time.monotonic()  # the first one after a full interval
            return False
        return time.monotonic() - last >= self.policy.vacuum_every

    def _compaction(self, name: str) -> bool:
        """Count one compaction; whether this one also sorts."""
        count = self._compactions.get(name, 0) + 1
        self._compactions[name] = count
        return self.policy.sort_every > 0 and count % self.policy.sort_every == 0

    # -- Delta -----------------------------------------------------------------------

    def maintain_delta(self, tables: DeltaTables, shape: TableShape) -> MaintenanceReport:
        return self._maintain_delta(
            tables.table(shape), shape.qualified, shape.key[0], tables.last_commit(shape)
        )

    def maintain_delta_history(self, history: DeltaHistory, shape: TableShape) -> MaintenanceReport:
        """Maintain the table's SCD2 history (``<table>~history``) as a table of its own."""
        return self._maintain_delta(
            history.table(shape), history.where(shape), shape.key[0], history.last_commit(shape)
        )

    def _maintain_delta(
        self, table: DeltaTable, name: str, first_key: str, record: CommitRecord | None
    ) -> MaintenanceReport:
        sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
        small = sum(1 for size in sizes if size < self.policy.small_file_bytes)
        compacted = sorted_now = False
        properties = CommitProperties(custom_metadata=record.to_properties()) if record else None
        if small > self.policy.max_small_files:
            compacted = True
            if self._compaction(name):
                sorted_now = True
                table.optimize.z_order(
                    [first_key],
                    target_size=self.policy.target_file_bytes,
                    commit_properties=properties,
                )
            else:
                table.optimize.compact(
                    target_size=self.policy.target_file_bytes, commit_properties=properties
                )
        removed: list[str] = []
        if self._vacuum_due(name):
            removed = table.vacuum(
                retention_hours=self.policy.retention_hours,
                dry_run=False,
                enforce_retention_duration=False,
                full=True,
            )
            self._vacuumed[name] = time.monotonic()
        report = MaintenanceReport(
            name, len(sizes), len(table.file_uris()), compacted, sorted_now, tuple(removed)
        )
        if compacted or removed:
            logger.info(
                "delta table %s: %d files -> %d (sorted: %s), %d unreferenced files removed",
                name,
                report.files_before,
                report.files_after,
                sorted_now,
                len(removed),
            )
        return report

    # -- Iceberg ---------------------------------------------------------------------

    def maintain_iceberg(self, tables: IcebergTables, shape: TableShape) -> MaintenanceReport:
        return self._maintain_iceberg(
            lambda: tables.table(shape),
            lambda: tables.last_commit(shape),
            shape.qualified,
            shape.key[0],
            tables.location(shape),
        )

    def maintain_iceberg_history(
        self, history: IcebergHistory, shape: TableShape
    ) -> MaintenanceReport:
        """Maintain the table's SCD2 history (``<table>~history``) as a table of its own: its
        record is its current snapshot's (its counter), so compaction's snapshot carries it."""
        return self._maintain_iceberg(
            lambda: history.table(shape),
            lambda: history.last_commit(shape),
            history.where(shape),
            shape.key[0],
            history.location(shape),
        )

    def _maintain_iceberg(
        self,
        load: Callable[[], Table],
        last_commit: Callable[[], CommitRecord | None],
        name: str,
        first_key: str,
        location: str,
    ) -> MaintenanceReport:
        table = load()
        files = table.inspect.files()
        sizes = files.column("file_size_in_bytes").to_pylist()
        small = sum(1 for size in sizes if size < self.policy.small_file_bytes)
        compacted = False
        if small > self.policy.max_small_files:
            compacted = True
            record = last_commit()
            tasks = [
                task
                for task in _iceberg_files.plan(table, AlwaysTrue())
                if task.file.file_size_in_bytes < self.policy.small_file_bytes
            ]
            with table.transaction() as transaction:
                change = _iceberg_files.FileChange(transaction, table)
                rows = _iceberg_files.read(transaction, table, tasks)
                change.remove(task.file for task in tasks)
                change.write(rows.sort_by([(first_key, "ascending")]))
                _iceberg_files.replace(change, record.to_properties() if record else {})
            table = load()
        removed: tuple[str, ...] = ()
        if self._vacuum_due(name):
            removed = self._vacuum_iceberg(load, name, location)
            self._vacuumed[name] = time.monotonic()
            table = load()
        after = table.inspect.files().num_rows
        return MaintenanceReport(name, len(sizes), after, compacted, False, removed)

    def _vacuum_iceberg(
        self, load: Callable[[], Table], name: str, location: str
    ) -> tuple[str, ...]:
        horizon = datetime.now(timezone.utc) - timedelta(hours=self.policy.retention_hours)
        table = load()
        current = table.current_snapshot()
        old = [
            snapshot.snapshot_id
            for snapshot in table.snapshots()
            if snapshot.timestamp_ms < horizon.timestamp() * 1000
            and (current is None or snapshot.snapshot_id != current.snapshot_id)
        ]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        return remove_orphan_data_files(load(), location, name, horizon)


def remove_orphan_data_files(
    table: Table, location: str, name: str, older_than: datetime
) -> tuple[str, ...]:
    """Remove data files under the table's ``data/`` (at ``location``) that no snapshot
    references."""
    referenced = {
        path.removeprefix("file://")
        for path in table.inspect.all_files().column("file_path").to_pylist()
    }
    directory = Path(location.removeprefix("file://")) / "data"
    if not directory.is_dir():
        return ()
    cutoff = older_than.timestamp()
    removed = []
    for path in sorted(directory.rglob("*.parquet")):
        if str(path) not in referenced and path.stat().st_mtime < cutoff:
            path.unlink()
            removed.append(str(path))
    if removed:
        logger.info("iceberg table %s: removed %d orphan data files", name, len(removed))
    return tuple(removed)
