"""The Delta and Iceberg targets' sinks and chunk merge: snapshot files, staged chunks.

``TableSnapshotSink`` pickles into the loader's Spark tasks and writes each
key range through the library's ``SnapshotWriter``, listing the files in a
manifest per range (a retried range's manifest names the files of the attempt
that finished last; the other attempt's files are referenced by nothing).
``TableChunkSink`` stages an incremental snapshot's chunks as the Parquet
target does. ``chunk_effect`` turns a staged chunk into the net effect that
makes the chunk's range of the copy hold exactly the staged rows, except the
keys the stream changed meanwhile, decided by comparing keys as the source
does (``_parquet_chunks.RangeTest``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pgshovel.abc import ChangedKeys, CopyOut
from pgshovel.errors import ConfigurationError
from pgshovel.replication.tables._delta import table_path
from pgshovel.replication.tables._effect import CHANGE_FIELDS, DELETED, effect_schema
from pgshovel.replication.tables._snapshot import SnapshotWriter
from pgshovel.replication.targets import _arrow, _files, _parquet_chunks
from pgshovel.replication.targets._parquet_tables import is_in_keys
from pgshovel.replication.targets._tablefmt_log import write_durably
from pgshovel.source import Checksum, Chunk, KeyRange, TableShape, copytext

__all__ = ["RANGE_TYPES", "TableChunkSink", "TableSnapshotSink", "chunk_effect"]

#: key types the copy orders as the source does (integers; text in byte order, as chunks
#: compare it): a chunk's rows are read by the first key column's bounds
RANGE_TYPES = frozenset({"int2", "int4", "int8", "text", "varchar"})


@dataclass(frozen=True)
class TableSnapshotSink:
    """Writes each snapshot range as Parquet files into its table's data directory and lists
    them in a manifest per range (pickles into Spark tasks; a retried range's manifest names
    the files of the attempt that finished last, the other attempt's files stay orphans)."""

    root: str
    suffix: str
    manifests: str

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        shape = key_range.table
        directory = table_path(self.root, shape.schema, shape.name) + self.suffix
        written = SnapshotWriter(shape, directory).load_range(key_range, copy_out)
        manifest = Path(table_path(self.manifests, shape.schema, shape.name))
        document = json.dumps([asdict(file) for file in written]).encode("utf-8")
        write_durably(manifest / f"{key_range.index:06d}.json", document)
        return sum(file.rows for file in written)


@dataclass(frozen=True)
class TableChunkSink:
    """Stages incremental snapshot chunks as Parquet files (as the Parquet target does)."""

    path: str
    kind: str

    def stage_rows(
        self, attempt: str, table: TableShape, copy_out: CopyOut, *, selected: bool = False
    ) -> int:
        if selected:
            raise ConfigurationError(
                f"table {table.qualified!r}: the {self.kind} target cannot re-snapshot with "
                "--where; re-snapshot the whole table ('pgshovel-admin set resnapshot' without "
                "--where)"
            )
        data = io.BytesIO()
        copy_out(data)
        rows = [copytext.decode_line(line) for line in data.getvalue().decode().splitlines()]
        target = _parquet_chunks.staged_rows_path(Path(self.path), attempt)
        _files.write_parquet(_arrow.text_rows_to_arrow(table, rows), target)
        return len(rows)

    def stage_checksums(self, attempt: str, checksums: list[Checksum]) -> None:
        _parquet_chunks.write_sums(Path(self.path), attempt, checksums)


def chunk_effect(
    shape: TableShape, chunk: Chunk, current: pa.Table, staged: pa.Table, changed: ChangedKeys
) -> pa.Table:
    """The net effect that makes the chunk's range hold the staged rows, except changed keys:
    the staged rows written, the range's other rows deleted (change columns null)."""
    test = _parquet_chunks.RangeTest(chunk)
    changed_keys = {tuple(key) for key in changed}
    positions = shape.key_positions

    def key_text(row: Sequence[Any]) -> tuple[str | None, ...]:
        values = _parquet_chunks.texts(shape, row)
        return tuple(values[p] for p in positions)

    keep = [key_text(row) not in changed_keys for row in _parquet_chunks.rows_as_python(staged)]
    upserts = staged.filter(pa.array(keep, pa.bool_())) if keep else staged
    gone = [
        test.holds(row) and key_text(row) not in changed_keys
        for row in _parquet_chunks.rows_as_python(current)
    ]
    candidates = current.filter(pa.array(gone, pa.bool_())) if gone else current
    if candidates.num_rows and upserts.num_rows:
        keys = upserts.select(list(shape.key))
        candidates = candidates.filter(pc.invert(is_in_keys(candidates, keys, shape.key)))
    deletes = pa.Table.from_arrays(
        [
            candidates.column(name)
            if name in shape.key
            else pa.nulls(candidates.num_rows, candidates.schema.field(name).type)
            for name in shape.column_names
        ],
        schema=candidates.schema,
    )
    parts = []
    for rows, deleted in ((upserts.cast(current.schema), False), (deletes, True)):
        for field in CHANGE_FIELDS:
            rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
        flags = pa.array([deleted] * rows.num_rows, pa.bool_())
        parts.append(rows.append_column(pa.field(DELETED, pa.bool_(), nullable=False), flags))
    return pa.concat_tables(parts).cast(effect_schema(shape))
