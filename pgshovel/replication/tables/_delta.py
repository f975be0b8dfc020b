"""A set's tables as Delta Lake tables (delta-rs): create, commit a net effect, read the position.

Each table lives under ``<root>/<schema>/<table>`` (characters of a name other
than ASCII letters, digits, ``_``, ``-`` and ``.`` escaped as ``~XX``). One
micro-batch is one Delta commit per touched table: a MERGE of the net effect
(matched and deleted: delete; matched: update all; not matched and not
deleted: insert), bounded by the first key column's range
so delta-rs skips the files outside it, or after a TRUNCATE one overwrite that
holds exactly the surviving rows. The commit carries an application
transaction ``(app_id, counter)`` and the ``CommitRecord`` as commit metadata,
so a table tells by itself which micro-batch it holds last
(``transaction_version``) and where the stream stood then. A micro-batch whose
counter the table already holds is skipped; a merge that changed nothing still
commits (no files) so the counter is recorded. Applying a net effect is
idempotent as well (each key gets its final row or none), which is what makes
the recovery across tables simple (see ``_intents``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Field, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

from pgshovel.errors import ProgrammingError
from pgshovel.replication.tables import _evolve
from pgshovel.replication.tables._effect import (
    DELETED,
    CommitRecord,
    NetEffect,
    stored_schema,
)
from pgshovel.replication.tables._evolution import Defaults, Evolution
from pgshovel.replication.tables._predicates import merge_predicate
from pgshovel.source import TableShape

__all__ = ["CHANGE_DATA_FEED", "CommitResult", "DeltaTables", "table_path"]

logger = logging.getLogger(__name__)

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"


# delta-rs reads a path as a URL (it decodes %XX) and other readers encode spaces and
# non-ASCII letters differently: anything but ASCII letters, digits, '_', '-' and '.' is
# escaped as ~XX (its UTF-8 bytes) instead.
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def _escape(character: str) -> str:
    return "".join(f"~{byte:02X}" for byte in character.encode("utf-8"))


def _component(name: str) -> str:
    """A table or schema name as one path component: injective, never '.', '..' or a '/'."""
    if name in {".", ".."}:
        return name.replace(".", "~2E")
    return "".join(character if character in _SAFE else _escape(character) for character in name)


def table_path(root: str | Path, schema: str, name: str) -> str:
    """Where a table's Delta log and files live under ``root``."""
    return f"{str(root).rstrip('/')}/{_component(schema)}/{_component(name)}"


@dataclass(frozen=True)
class CommitResult:
    """What one table commit did: the version made (None when skipped) and what it read."""

    table: str
    counter: int
    version: int | None
    files_scanned: int = 0
    files_skipped: int = 0
    seconds: float = 0.0

    @property
    def skipped(self) -> bool:
        """True when the table already held this micro-batch (nothing was written)."""
        return self.version is None


class DeltaTables:
    """The tables of one set (one app id) under one root directory or URI."""

    def __init__(
        self,
        root: str | Path,
        app_id: str,
        *,
        storage_options: dict[str, str] | None = None,
        change_data_feed: bool = True,
        prune_by_key_range: bool = True,
    ) -> None:
        self.root = str(root)
        self.app_id = app_id
        self.storage_options = storage_options
        self.change_data_feed = change_data_feed
        #: bound the merge by the first key column's range (off only to measure what it saves)
        self.prune_by_key_range = prune_by_key_range
        self._open: dict[str, DeltaTable] = {}
        #: path -> (version, counter): the counter the table held at that version, so a
        #: commit reads it from the log only when the table moved by other means
        self._counters: dict[str, tuple[int, int | None]] = {}

    # -- tables ---------------------------------------------------------------------

    def path(self, shape: TableShape) -> str:
        return table_path(self.root, shape.schema, shape.name)

    def exists(self, shape: TableShape) -> bool:
        path = self.path(shape)
        # An open table exists: whatever removes one forgets it (``forget``).
        return path in self._open or DeltaTable.is_deltatable(path, self.storage_options)

    def table(self, shape: TableShape) -> DeltaTable:
        """The table's current state (cached; this process is its only writer)."""
        path = self.path(shape)
        table = self._open.get(path)
        if table is None:
            try:
                table = DeltaTable(path, storage_options=self.storage_options)
            except TableNotFoundError as error:
                raise ProgrammingError(
                    f"delta table of {shape.qualified!r} does not exist at {path!r}; "
                    "create it first"
                ) from error
            self._open[path] = table
        return table

    def forget(self, shape: TableShape) -> None:
        """Drop the cached state (after the table was changed by other means)."""
        self._open.pop(self.path(shape), None)
        self._counters.pop(self.path(shape), None)

    def create(self, shape: TableShape, record: CommitRecord | None = None) -> DeltaTable:
        """Create the (empty) table unless it exists; ``record`` is stored with the creation."""
        if self.exists(shape):
            return self.table(shape)
        configuration = {CHANGE_DATA_FEED: "true"} if self.change_data_feed else {}
        table = DeltaTable.create(
            self.path(shape),
            stored_schema(shape),
            mode="ignore",
            name=f"{shape.schema}.{shape.name}",
            configuration=configuration,
            storage_options=self.storage_options,
            commit_properties=self._properties(record),
        )
        self._open[self.path(shape)] = table
        logger.info("created delta table %s at %s", shape.qualified, self.path(shape))
        return table

    # -- commits --------------------------------------------------------------------

    def _properties(self, record: CommitRecord | None) -> CommitProperties | None:
        if record is None:
            return None
        return CommitProperties(
            app_transactions=[Transaction(self.app_id, record.counter)],
            custom_metadata=record.to_properties(),
        )

    def counter(self, shape: TableShape) -> int | None:
        """The counter of the last micro-batch the table holds (None: none yet)."""
        path = self.path(shape)
        table = self.table(shape)
        version = table.version()
        known = self._counters.get(path)
        if known is not None and known[0] == version:
            return known[1]
        counter: int | None = table.transaction_version(self.app_id)
        self._counters[path] = (version, counter)
        return counter

    def commit(
        self,
        effect: NetEffect,
        record: CommitRecord,
        evolution: Evolution | None = None,
        defaults: Defaults | None = None,
    ) -> CommitResult:
        """Apply ``effect`` as one commit carrying ``record`` (skipped if already held).

        With ``evolution`` (the table's shape changed in this micro-batch; ``effect`` is in
        the new shape): added columns that existing rows leave NULL join the MERGE (schema
        merge); any other change rewrites the table in the same single commit (``_evolve``).
        """
        started = time.perf_counter()
        shape = effect.shape
        table = self.table(shape)
        held = self.counter(shape)
        if held is not None and held >= record.counter:
            logger.info(
                "delta table %s already holds micro-batch %d (it holds %d); skipped",
                shape.qualified,
                record.counter,
                held,
            )
            return CommitResult(shape.qualified, record.counter, None)
        before = table.version()
        properties = self._properties(record)
        scanned = skipped = 0
        merge_schema = evolution is not None and evolution.changed
        if evolution is not None and (evolution.rewrites or evolution.key_lost):
            write_deltalake(
                table,
                _evolve.rewritten_rows(table, evolution, effect, defaults or {}),
                mode="overwrite",
                schema_mode="overwrite",
                commit_properties=properties,
            )
        elif effect.truncate:
            write_deltalake(
                table,
                effect.upserts(),
                mode="overwrite",
                schema_mode="overwrite" if merge_schema else None,
                commit_properties=properties,
            )
        elif evolution is not None and merge_schema and not effect.rows.num_rows:
            added = stored_schema(shape)
            fields = [Field.from_arrow(added.field(name)) for name in evolution.added]
            table.alter.add_columns(fields, commit_properties=properties)
        elif effect.rows.num_rows:
            keys = effect.rows.select(list(shape.key))
            metrics = (
                table.merge(
                    effect.rows,
                    merge_predicate(shape, keys if self.prune_by_key_range else keys.slice(0, 0)),
                    source_alias="s",
                    target_alias="t",
                    merge_schema=merge_schema,
                    commit_properties=properties,
                )
                .when_matched_delete(f"s.{DELETED}")
                .when_matched_update_all(except_cols=[DELETED])
                .when_not_matched_insert_all(f"NOT s.{DELETED}", except_cols=[DELETED])
                .execute()
            )
            scanned = metrics["num_target_files_scanned"]
            skipped = metrics["num_target_files_skipped_during_scan"]
        if table.version() == before:
            # Nothing to write (every touched key absent and deleted): record the counter.
            table.create_write_transaction(
                [], mode="append", schema=table.schema(), commit_properties=properties
            )
            table.update_incremental()
        self._counters[self.path(shape)] = (table.version(), record.counter)
        return CommitResult(
            shape.qualified,
            record.counter,
            table.version(),
            scanned,
            skipped,
            time.perf_counter() - started,
        )

    # -- the position ---------------------------------------------------------------

    def _records(self, shape: TableShape) -> Iterator[tuple[int, CommitRecord | None]]:
        """(version, record) of the table's commits, newest first, as far as the log goes."""
        for entry in self.table(shape).history():
            yield int(entry["version"]), CommitRecord.from_properties(entry)

    def last_commit(self, shape: TableShape) -> CommitRecord | None:
        """The record of the last micro-batch the table holds, read from its own log."""
        counter = self.counter(shape)
        if counter is None:
            return None
        for _, record in self._records(shape):
            if record is not None and record.counter == counter:
                return record
        raise ProgrammingError(
            f"delta table {self.path(shape)!r} holds micro-batch {counter!r} of "
            f"{self.app_id!r} but its log no longer has that commit's record"
        )

    def read(self, shape: TableShape, version: int | None = None) -> pa.Table:
        """The table's rows (at ``version``), through delta-rs."""
        if version is None:
            return self.table(shape).to_pyarrow_table()
        table = DeltaTable(self.path(shape), version=version, storage_options=self.storage_options)
        return table.to_pyarrow_table()
