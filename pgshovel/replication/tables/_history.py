"""An optional SCD type 2 history of a Delta copy (``history: true``): one row per row version.

Beside the table, ``<table>~history`` holds every version of every row with
when it started and ended: the table's columns, then ``_pgshovel_start_txid``
and ``_pgshovel_start_time`` (the source transaction and its time that wrote
the version), ``_pgshovel_end_txid`` and ``_pgshovel_end_time`` (the one that
replaced or deleted it; null while current). Each micro-batch is one MERGE
into it, committed right after the table's with the same counter (so recovery
treats it as one more table of the micro-batch): the current version of each
touched key is closed with the change's transaction, and the key's new row, if
it was not deleted, is inserted as the current version — the classic SCD2
merge, whose source holds every touched key twice: once keyed (to close) and
once with a null merge key (never matches: to insert). Versions are those the
copy committed: changes of one key inside one micro-batch fold into its last
one, as in the copy itself. A TRUNCATE closes every current version with the
truncate's own transaction (``NetEffect.truncate_txid``/``truncate_time``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction

from pgshovel.errors import ProgrammingError
from pgshovel.replication.tables._delta import CommitResult, DeltaTables
from pgshovel.replication.tables._effect import DELETED, TIMESTAMP, TXID, CommitRecord, NetEffect
from pgshovel.replication.tables._predicates import identifier
from pgshovel.replication.targets._arrow import table_schema
from pgshovel.source import TableShape

__all__ = ["END_TIME", "END_TXID", "START_TIME", "START_TXID", "DeltaHistory"]

START_TXID, START_TIME = "_pgshovel_start_txid", "_pgshovel_start_time"
END_TXID, END_TIME = "_pgshovel_end_txid", "_pgshovel_end_time"
_MERGE_KEY = "_pgshovel_merge_key_"
_TIME = pa.timestamp("us", tz="UTC")


def history_schema(shape: TableShape) -> pa.Schema:
    return pa.schema(
        [
            *table_schema(shape),
            pa.field(START_TXID, pa.int64()),
            pa.field(START_TIME, _TIME),
            pa.field(END_TXID, pa.int64()),
            pa.field(END_TIME, _TIME),
        ]
    )


class DeltaHistory:
    """The history tables of a ``DeltaTables`` (same root, same app id)."""

    def __init__(self, tables: DeltaTables) -> None:
        self.tables = tables

    def path(self, shape: TableShape) -> str:
        return f"{self.tables.path(shape)}~history"

    def create(self, shape: TableShape) -> DeltaTable:
        if DeltaTable.is_deltatable(self.path(shape), self.tables.storage_options):
            return self.table(shape)
        return DeltaTable.create(
            self.path(shape),
            history_schema(shape),
            mode="ignore",
            storage_options=self.tables.storage_options,
        )

    def table(self, shape: TableShape) -> DeltaTable:
        return DeltaTable(self.path(shape), storage_options=self.tables.storage_options)

    def counter(self, shape: TableShape) -> int | None:
        return self.table(shape).transaction_version(self.tables.app_id)

    def _source(self, effect: NetEffect) -> pa.Table:
        """Every touched key once keyed (to close it), every surviving row once unkeyed."""
        shape = effect.shape
        rows = effect.rows
        names = list(shape.column_names)
        closing = rows.select(names)
        for index, name in enumerate(shape.key):
            closing = closing.append_column(f"{_MERGE_KEY}{index}", rows.column(name))
        closing = closing.append_column(START_TXID, rows.column(TXID))
        closing = closing.append_column(START_TIME, rows.column(TIMESTAMP))
        survivors = rows.filter(pc.invert(rows.column(DELETED)))
        opening = survivors.select(names)
        for index, name in enumerate(shape.key):
            field = rows.schema.field(name)
            opening = opening.append_column(
                f"{_MERGE_KEY}{index}", pa.nulls(survivors.num_rows, field.type)
            )
        opening = opening.append_column(START_TXID, survivors.column(TXID))
        opening = opening.append_column(START_TIME, survivors.column(TIMESTAMP))
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
        inserted = {identifier(name): f"s.{identifier(name)}" for name in shape.column_names}
        inserted[identifier(START_TXID)] = f"s.{identifier(START_TXID)}"
        inserted[identifier(START_TIME)] = f"s.{identifier(START_TIME)}"
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
        if effect.truncate:
            if effect.truncate_txid is None or effect.truncate_time is None:
                raise ProgrammingError(
                    f"net effect of {shape.qualified!r} truncates without the truncate's "
                    "transaction and time, which its history needs"
                )
            ended = {
                identifier(END_TXID): str(effect.truncate_txid),
                identifier(END_TIME): f"to_timestamp_micros({effect.truncate_time})",
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
