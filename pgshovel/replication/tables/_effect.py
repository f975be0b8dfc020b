"""What one micro-batch commits to one table: the net effect per key and the commit's record.

A ``NetEffect`` is the table's shape, an Arrow table with one row per key the
micro-batch touched (the shape's columns, the change columns, and the boolean
``_pgshovel_deleted``; a deleted key's other columns are null) and whether a
TRUNCATE came first. The change columns hold the source transaction, PgQ
batch, source timestamp and provenance of the change that decided the key's
row: they are stored in every row of the copy, so Delta's change data feed
carries each inserted and updated row with the source transaction that wrote
it. A ``CommitRecord`` is what every table commit of a micro-batch carries: the
micro-batch's counter, the position document after it, the source horizon
(``txid_snapshot`` text of the last batch's end tick) and the batch ids; it
travels as string properties (Delta commit metadata, Iceberg snapshot summary).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pgshovel.errors import CodecError, ProgrammingError, SchemaError
from pgshovel.replication.targets._arrow import table_schema
from pgshovel.replication.targets._parquet_tables import PROVENANCE
from pgshovel.source import TableShape

__all__ = [
    "CHANGE_FIELDS",
    "DELETED",
    "CommitRecord",
    "NetEffect",
    "check_range",
    "effect_schema",
    "stored_schema",
]

#: Prefix of the columns pgshovel adds; a source column may not start with it.
PREFIX = "_pgshovel_"
DELETED = "_pgshovel_deleted"
TXID = "_pgshovel_txid"
BATCH = "_pgshovel_batch"
TIMESTAMP = "_pgshovel_timestamp"
PROVENANCE_COLUMN = "_pgshovel_provenance"
#: The change columns every stored row carries (see the module docstring).
CHANGE_FIELDS = (
    pa.field(TXID, pa.int64()),
    pa.field(BATCH, pa.int64()),
    pa.field(TIMESTAMP, pa.timestamp("us", tz="UTC")),
    pa.field(PROVENANCE_COLUMN, PROVENANCE),
)

_COUNTER = "pgshovel.counter"
_POSITION = "pgshovel.position"
_HORIZON = "pgshovel.horizon"
_BATCHES = "pgshovel.batches"


def _check_names(shape: TableShape) -> None:
    reserved = [name for name in shape.column_names if name.startswith(PREFIX)]
    if reserved:
        raise SchemaError(
            f"table {shape.qualified!r}: columns {reserved!r} start with {PREFIX!r}, which the "
            "table formats reserve for their change columns; rename them in the source or "
            "leave them out of the set's columns"
        )


def stored_schema(shape: TableShape) -> pa.Schema:
    """The Arrow schema of the copy: the shape's columns, then the change columns."""
    _check_names(shape)
    return pa.schema([*table_schema(shape), *CHANGE_FIELDS])


def effect_schema(shape: TableShape) -> pa.Schema:
    """The schema of a ``NetEffect``'s rows: the stored schema and the deleted flag."""
    return stored_schema(shape).append(pa.field(DELETED, pa.bool_(), nullable=False))


@dataclass(frozen=True)
class NetEffect:
    """One table's net effect per key in one micro-batch (see the module docstring)."""

    shape: TableShape
    rows: pa.Table
    truncate: bool = False
    #: the TRUNCATE's source transaction and time (µs since the epoch), for histories
    truncate_txid: int | None = None
    truncate_time: int | None = None

    def __post_init__(self) -> None:
        expected = effect_schema(self.shape)
        if not self.rows.schema.equals(expected):
            raise ProgrammingError(
                f"net effect of {self.shape.qualified!r} has schema {self.rows.schema!r}, "
                f"expected {expected!r}"
            )
        check_range(self.shape, self.rows)
        if not self.shape.key:
            raise ProgrammingError(
                f"net effect of {self.shape.qualified!r}: an unkeyed table has no effect per key"
            )

    @property
    def deleted(self) -> pa.Array:
        return self.rows.column(DELETED).combine_chunks()

    def upserts(self) -> pa.Table:
        """The rows the table holds after the micro-batch for its touched keys (stored schema)."""
        return self.rows.filter(pc.invert(self.deleted)).drop_columns([DELETED])


@dataclass(frozen=True)
class CommitRecord:
    """What each table commit of a micro-batch records (see the module docstring)."""

    counter: int
    position: str
    horizon: str
    batches: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.counter < 1:
            raise ProgrammingError(f"commit counter must be >= 1, got {self.counter!r}")
        json.loads(self.position)  # a position is a JSON document

    def to_properties(self) -> dict[str, str]:
        return {
            _COUNTER: str(self.counter),
            _POSITION: self.position,
            _HORIZON: self.horizon,
            _BATCHES: json.dumps(list(self.batches)),
        }

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> CommitRecord | None:
        """The record in a commit's properties; None for a commit pgshovel did not make."""
        if _COUNTER not in properties:
            return None
        return cls(
            counter=int(str(properties[_COUNTER])),
            position=str(properties[_POSITION]),
            horizon=str(properties[_HORIZON]),
            batches=tuple(json.loads(str(properties.get(_BATCHES) or "[]"))),
        )


# Years 1 to 9999: what the Delta and Iceberg specifications (and Spark) let a date or
# timestamp hold. PostgreSQL's infinity, BC years and years past 9999 are outside.
_FIRST_DAY, _LAST_DAY = -719162, 2932896
_FIRST_MICRO, _LAST_MICRO = _FIRST_DAY * 86_400_000_000, (_LAST_DAY + 1) * 86_400_000_000 - 1


def check_range(shape: TableShape, rows: pa.Table) -> None:
    """Stop with a ``CodecError`` naming table and column for a date or timestamp a table format
    cannot hold (never a silently changed value)."""
    for column in shape.columns:
        if column.name not in rows.column_names:
            continue
        values = rows.column(column.name)
        if pa.types.is_date32(values.type):
            numbers, low, high = values.cast(pa.int32()), _FIRST_DAY, _LAST_DAY
        elif pa.types.is_timestamp(values.type):
            numbers, low, high = values.cast(pa.int64()), _FIRST_MICRO, _LAST_MICRO
        else:
            continue
        extremes = pc.min_max(numbers)
        smallest, largest = extremes["min"].as_py(), extremes["max"].as_py()
        if smallest is None or (low <= smallest and largest <= high):
            continue
        raise CodecError(
            f"table {shape.qualified!r} column {column.name!r} ({column.sql_type}) holds a value "
            "outside years 1 to 9999 (infinity, a BC date or a year past 9999), which Delta Lake "
            "and Iceberg cannot store; leave the column out of the set's columns, or replicate "
            "this table to PostgreSQL or the Parquet target"
        )
