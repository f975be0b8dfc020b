"""One replicated table in Parquet: its current rows by version, its change log, its evolution.

Pure Arrow transformations plus file writes under deterministic names; the
Parquet target decides which versions are committed (its state file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Change, reduce_changes
from pgshovel.replication.provenance import stamp_of
from pgshovel.replication.targets import _arrow, _files
from pgshovel.source import TableShape
from pgshovel.stream.operations import OPERATION_NAMES
from pgshovel.stream.plan import Entry

PART = "part-00000.parquet"


def table_directory(root: Path, schema: str, name: str) -> Path:
    return root / schema / name


def shape_version(table: TableShape) -> str:
    """A short hash naming a shape: every change log row records the shape it has."""
    document = [table.schema, table.name, list(table.key)]
    document += [[c.name, c.sql_type] for c in table.columns]
    return hashlib.sha256(json.dumps(document).encode()).hexdigest()[:16]


def read_rows(root: Path, table: TableShape, version: str) -> pa.Table:
    directory = table_directory(root, table.schema, table.name) / "current" / version
    return pq.read_table(directory, schema=_arrow.table_schema(table))


def write_rows(root: Path, table: TableShape, version: str, rows: pa.Table) -> None:
    directory = table_directory(root, table.schema, table.name) / "current" / version
    _files.write_parquet(rows, directory / PART)


def merge(rows: pa.Table, table: TableShape, changes: Sequence[Change]) -> pa.Table:
    """``rows`` after ``changes`` (their net effect per key)."""
    effect = reduce_changes(changes, table.key_positions)
    if effect.truncate:
        rows = _arrow.table_schema(table).empty_table()
    if not effect.rows:
        return rows
    positions = {name: index for index, name in enumerate(table.key)}
    touched = _arrow.to_arrow(
        table,
        [
            tuple(
                key[positions[column.name]] if column.name in positions else None
                for column in table.columns
            )
            for key in effect.rows
        ],
    ).select(list(table.key))
    if rows.num_rows:
        rows = rows.filter(pc.invert(is_in_keys(rows, touched, table.key)))
    return pa.concat_tables([rows, _arrow.to_arrow(table, effect.upserts)])


def is_in_keys(rows: pa.Table, keys: pa.Table, key: Sequence[str]) -> pa.Array:
    """Which rows' keys appear in ``keys`` (composite keys compared as tuples)."""
    if len(key) == 1:
        return pc.is_in(rows.column(key[0]), value_set=keys.column(key[0]))
    wanted = set(zip(*(keys.column(name).to_pylist() for name in key), strict=True))
    present = zip(*(rows.column(name).to_pylist() for name in key), strict=True)
    return pa.array([candidate in wanted for candidate in present], pa.bool_())


def evolve(
    rows: pa.Table,
    before: TableShape,
    after: TableShape,
    defaults: Mapping[str, stream_pb2.Value],
) -> pa.Table:
    """``rows`` of shape ``before`` as rows of shape ``after`` (columns matched by number).

    Renamed columns keep their values; added columns get the value existing rows
    got in the source (or NULL); a type the stored values cannot be cast to
    exactly leaves NULLs (the table is then copied again), and so does a key
    column, for which the table is emptied instead.
    """
    old = {column.number: column for column in before.columns}
    arrays: list[pa.Array] = []
    for column in after.columns:
        previous = old.get(column.number)
        target = _arrow.arrow_type(column)
        if previous is None:
            value = defaults.get(column.name)
            filler = None if value is None else _arrow.arrow_value(column, value)
            arrays.append(pa.array([filler] * rows.num_rows, type=target))
            continue
        array = rows.column(previous.name)
        if _arrow.arrow_type(previous) == target and _arrow.converts_exactly(previous, column):
            arrays.append(array)
        elif _arrow.converts_exactly(previous, column):
            arrays.append(array.cast(target))
        elif column.name in after.key:
            return _arrow.table_schema(after).empty_table()
        else:
            arrays.append(pa.nulls(rows.num_rows, type=target))
    return pa.Table.from_arrays(arrays, schema=_arrow.table_schema(after))


#: Who made a mutation (``pgshovel.replication.provenance``): null for a mutation of a table
#: captured without provenance, and each part null when the source did not know it.
PROVENANCE = pa.struct(
    [
        pa.field("current_user", pa.string()),
        pa.field("session_user", pa.string()),
        pa.field("application_name", pa.string()),
        pa.field("client_addr", pa.string()),
        pa.field("query_id", pa.int64()),
        pa.field("annotation", pa.string()),
    ]
)


def _change_log_schema(table: TableShape) -> pa.Schema:
    row = pa.struct(list(_arrow.table_schema(table)))
    return pa.schema(
        [
            pa.field("offset", pa.int64()),
            pa.field("position", pa.int32()),
            pa.field("node", pa.string()),
            pa.field("batch_id", pa.int64()),
            pa.field("transaction", pa.int64()),
            pa.field("mutation_id", pa.int64()),
            pa.field("operation", pa.string()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("shape_version", pa.string()),
            pa.field("before", row),
            pa.field("after", row),
            # Newer than the first change logs: older files lack it (read with mergeSchema).
            pa.field("provenance", PROVENANCE),
        ]
    )


def provenance_array(entries: Sequence[Entry]) -> pa.Array:
    """The change log's provenance column: all nulls at once when no mutation has one."""
    stamps = [stamp_of(mutation) for _, mutation in entries]
    if not any(stamps):
        return pa.nulls(len(entries), PROVENANCE)
    return pa.array([None if stamp is None else stamp._asdict() for stamp in stamps], PROVENANCE)


def write_change_log(
    root: Path,
    table: TableShape,
    entries: Sequence[Entry],
    changes: Sequence[Change],
    name: str,
) -> None:
    """The change log file ``name`` of ``table``: one row per mutation, in stream order."""
    shape = shape_version(table)
    columns: list[Any] = [
        pa.array([batch.offset for batch, _ in entries], pa.int64()),
        pa.array(list(range(len(entries))), pa.int32()),
        pa.array([batch.node.hex() for batch, _ in entries], pa.string()),
        pa.array([batch.batch_id for batch, _ in entries], pa.int64()),
        pa.array([mutation.transaction for _, mutation in entries], pa.int64()),
        pa.array([mutation.id for _, mutation in entries], pa.int64()),
        pa.array([OPERATION_NAMES[mutation.operation] for _, mutation in entries]),
        pa.array([mutation.timestamp for _, mutation in entries], pa.timestamp("us", tz="UTC")),
        pa.array([shape] * len(entries), pa.string()),
        _arrow.to_struct_array(table, [change.old for change in changes]),
        _arrow.to_struct_array(table, [change.new for change in changes]),
        provenance_array(entries),
    ]
    log = pa.Table.from_arrays(columns, schema=_change_log_schema(table))
    directory = table_directory(root, table.schema, table.name) / "changes"
    _files.write_parquet(log, directory / f"{name}.parquet")
