"""An optional SCD type 2 history of a Delta copy (``history: true``): one row per row version.

Beside the table, ``<table>~history`` holds every version of every row with
when it started and ended (columns and the versions a change closes and opens:
``_versions``). Each micro-batch is one MERGE into it, committed right after
the table's with the same counter as an application transaction (so recovery
treats it as one more table of the micro-batch): the current version of each
touched key is closed with the change's transaction, and the key's new row,
if it was not deleted, is inserted as the current version — the classic SCD2
merge, whose source holds every touched key twice: once keyed (to close) and
once with a null merge key (never matches: to insert). Versions are those the
copy committed: changes of one key inside one micro-batch fold into its last
one, as in the copy itself. A TRUNCATE closes every current version with the
truncate's own transaction (``NetEffect.truncate_txid``/``truncate_time``).
``DeltaHistory`` is the Delta ``HistoryStore``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Field, Transaction, write_deltalake

from pgshovel.replication.tables import _versions
from pgshovel.replication.tables._delta import CommitResult, DeltaTables
from pgshovel.replication.tables._effect import CommitRecord, NetEffect
from pgshovel.replication.tables._predicates import identifier
from pgshovel.replication.tables._versions import END_TIME, END_TXID, START_TIME, START_TXID
from pgshovel.source import TableShape

__all__ = ["END_TIME", "END_TXID", "START_TIME", "START_TXID", "DeltaHistory"]

logger = logging.getLogger(__name__)

_MERGE_KEY = "_pgshovel_merge_key_"


class DeltaHistory:
    """The history tables of a ``DeltaTables`` (same root, same app id)."""

    def __init__(self, tables: DeltaTables) -> None:
        self.tables = tables

    def path(self, shape: TableShape) -> str:
        return f"{self.tables.path(shape)}~history"

    def where(self, shape: TableShape) -> str:
        return self.path(shape)

    def removal(self, shape: TableShape) -> str:
        return f"remove the history's directory {self.path(shape)!r}"

    def exists(self, shape: TableShape) -> bool:
        return bool(DeltaTable.is_deltatable(self.path(shape), self.tables.storage_options))

    def create(self, shape: TableShape) -> None:
        if self.exists(shape):
            return
        DeltaTable.create(
            self.path(shape),
            _versions.history_schema(shape),
            mode="ignore",
            storage_options=self.tables.storage_options,
        )

    def table(self, shape: TableShape) -> DeltaTable:
        return DeltaTable(self.path(shape), storage_options=self.tables.storage_options)

    def counter(self, shape: TableShape) -> int | None:
        counter: int | None = self.table(shape).transaction_version(self.tables.app_id)
        return counter

    def last_commit(self, shape: TableShape) -> CommitRecord | None:
        """The record of the last micro-batch (or load) the history holds, from its log (the
        newest entries first: maintenance commits carry it too, vacuum's do not)."""
        table = self.table(shape)
        counter = table.transaction_version(self.tables.app_id)
        if counter is None:
            return None
        for limit in (16, None):
            for entry in table.history(limit):
                record = CommitRecord.from_properties(entry)
                if record is not None and record.counter == counter:
                    return record
        return None

    def columns(self, shape: TableShape) -> list[str]:
        return list(pa.schema(self.table(shape).schema().to_arrow()).names)

    def add_columns(self, shape: TableShape, fields: Sequence[pa.Field]) -> None:
        self.table(shape).alter.add_columns([Field.from_arrow(field) for field in fields])

    def current(self, shape: TableShape) -> pa.Table:
        versions = self.table(shape).to_pyarrow_dataset()
        current: pa.Table = versions.to_table(filter=ds.field(END_TXID).is_null())
        return current

    def versions(self, shape: TableShape) -> pa.Table:
        versions: pa.Table = self.table(shape).to_pyarrow_table()
        return versions

    def _source(self, effect: NetEffect) -> pa.Table:
        """Every touched key once keyed (to close it), every surviving row once unkeyed."""
        shape = effect.shape
        ending = _versions.closings(effect)
        # One schema for both halves, without the end columns (the target's, unambiguous): the
        # closing half holds the keys and, as its start, the end of their current version.
        schema = pa.schema(
            [
                field.with_nullable(True)
                for field in _versions.history_schema(shape)
                if field.name not in (END_TXID, END_TIME)
            ]
        )
        ends = {START_TXID: ending.column(END_TXID), START_TIME: ending.column(END_TIME)}
        closing = pa.table(
            {
                field.name: ends.get(field.name, pa.nulls(ending.num_rows, field.type))
                for field in schema
            },
            schema=schema,
        )
        opening = _versions.openings(effect).select(schema.names).cast(schema)
        for index, name in enumerate(shape.key):
            kind = opening.schema.field(name).type
            closing = closing.append_column(f"{_MERGE_KEY}{index}", ending.column(name))
            opening = opening.append_column(
                f"{_MERGE_KEY}{index}", pa.nulls(opening.num_rows, kind)
            )
        return pa.concat_tables([closing, opening])

    def commit(self, effect: NetEffect, record: CommitRecord) -> CommitResult:
        shape = effect.shape
        table = self.table(shape)
        held = table.transaction_version(self.tables.app_id)
        if held is not None and held >= record.counter:
            return CommitResult(f"{shape.qualified}~history", record.counter, None)
        properties = CommitProperties(
            app_transactions=[Transaction(self.tables.app_id, record.counter)],
            custom_metadata=record.to_properties(),
        )
        current = f"t.{identifier(END_TXID)} IS NULL"
        inserted = {
            identifier(name): f"s.{identifier(name)}"
            for name in (*shape.column_names, START_TXID, START_TIME)
        }
        closed = {
            identifier(END_TXID): f"s.{identifier(START_TXID)}",
            identifier(END_TIME): f"s.{identifier(START_TIME)}",
        }
        before = table.version()
        keyed = " AND ".join(
            f"t.{identifier(name)} = s.{identifier(_MERGE_KEY + str(index))}"
            for index, name in enumerate(shape.key)
        )
        merger = table.merge(
            self._source(effect),
            f"{keyed} AND {current}",
            source_alias="s",
            target_alias="t",
            commit_properties=properties,
        ).when_matched_update(closed)
        truncate = _versions.truncation(effect)
        if truncate is not None:
            ended = {
                identifier(END_TXID): str(truncate[0]),
                identifier(END_TIME): f"to_timestamp_micros({truncate[1]})",
            }
            merger = merger.when_not_matched_by_source_update(
                ended, predicate=current.replace("t.", "", 1)
            )
        merger.when_not_matched_insert(
            inserted, predicate=f"s.{identifier(_MERGE_KEY + '0')} IS NULL"
        ).execute()
        if table.version() == before:
            table.create_write_transaction(
                [], mode="append", schema=table.schema(), commit_properties=properties
            )
            table.update_incremental()
        return CommitResult(f"{shape.qualified}~history", record.counter, table.version())

    def commit_load(self, shape: TableShape, versions: pa.Table, record: CommitRecord) -> None:
        properties = CommitProperties(
            app_transactions=[Transaction(self.tables.app_id, record.counter)],
            custom_metadata={**record.to_properties(), _versions.LOAD: "true"},
        )
        write_deltalake(
            self.table(shape),
            versions.cast(_versions.history_schema(shape)),
            mode="overwrite",
            commit_properties=properties,
        )

    def undo_load(self, shape: TableShape) -> bool:
        table = self.table(shape)
        latest = table.history(1)
        if not latest or latest[0].get(_versions.LOAD) != "true":
            return False
        table.restore(int(latest[0]["version"]) - 1)
        return True

    def rename(self, before: TableShape, after: TableShape) -> None:
        source, target = Path(self.path(before)), Path(self.path(after))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source, target)

    def drop(self, shape: TableShape) -> None:
        shutil.rmtree(self.path(shape), ignore_errors=True)
