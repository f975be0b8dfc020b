"""The SCD type 2 versions a net effect closes and opens: the pure part every history shares.

A history holds the table's columns, then ``_pgshovel_start_txid`` and
``_pgshovel_start_time`` (the source transaction and its time that wrote the
version), ``_pgshovel_end_txid`` and ``_pgshovel_end_time`` (the one that
replaced or deleted it; null while current). A micro-batch's net effect closes
the current version of every key it touches with the transaction and time of
the key's change (``closings``) and opens the key's new row unless it was
deleted (``openings``); a TRUNCATE closes every other current version with its
own transaction (``close``). A load closes every current version and opens the
loaded rows at the load's horizon (``load_versions``); an incremental snapshot
chunk opens a version only for a row that differs from the key's current one
(``chunk_effect``). Delta (``_history``: one MERGE) and Iceberg
(``_iceberg_history``: the files holding touched current versions rewritten)
store what these functions say.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pgshovel.errors import ProgrammingError, SchemaError
from pgshovel.replication.tables._effect import (
    DELETED,
    TIMESTAMP,
    TXID,
    NetEffect,
    effect_schema,
)
from pgshovel.replication.targets._arrow import table_schema
from pgshovel.replication.targets._parquet_tables import is_in_keys
from pgshovel.source import TableShape

__all__ = [
    "END_TIME",
    "END_TXID",
    "LOAD",
    "START_TIME",
    "START_TXID",
    "chunk_effect",
    "close",
    "closings",
    "history_schema",
    "horizon_txid",
    "load_versions",
    "openings",
    "truncation",
]

START_TXID, START_TIME = "_pgshovel_start_txid", "_pgshovel_start_time"
END_TXID, END_TIME = "_pgshovel_end_txid", "_pgshovel_end_time"
#: the commit property marking a load's history commit
LOAD = "pgshovel.load"
TIME = pa.timestamp("us", tz="UTC")


def history_schema(shape: TableShape) -> pa.Schema:
    return pa.schema(
        [
            *table_schema(shape),
            pa.field(START_TXID, pa.int64()),
            pa.field(START_TIME, TIME),
            pa.field(END_TXID, pa.int64()),
            pa.field(END_TIME, TIME),
        ]
    )


def horizon_txid(horizon: str) -> int:
    """The ``xmax`` of a ``txid_snapshot`` text: every source transaction before it that is
    not in progress is visible in it."""
    try:
        return int(horizon.split(":")[1])
    except (IndexError, ValueError) as error:
        raise SchemaError(f"not a txid snapshot: {horizon!r}") from error


def _opened(shape: TableShape, rows: pa.Table, txids: pa.Array, times: pa.Array) -> pa.Table:
    count = rows.num_rows
    opened = rows.select(list(shape.column_names))
    opened = opened.append_column(pa.field(START_TXID, pa.int64()), txids)
    opened = opened.append_column(pa.field(START_TIME, TIME), times)
    opened = opened.append_column(pa.field(END_TXID, pa.int64()), pa.nulls(count, pa.int64()))
    opened = opened.append_column(pa.field(END_TIME, TIME), pa.nulls(count, TIME))
    return opened.cast(history_schema(shape))


def closings(effect: NetEffect) -> pa.Table:
    """Every touched key with the transaction and time that end its current version."""
    rows = effect.rows
    closing = rows.select(list(effect.shape.key))
    closing = closing.append_column(pa.field(END_TXID, pa.int64()), rows.column(TXID))
    return closing.append_column(pa.field(END_TIME, TIME), rows.column(TIMESTAMP))


def openings(effect: NetEffect) -> pa.Table:
    """The new current versions: every surviving row from its change's transaction and time."""
    survivors = effect.rows.filter(pc.invert(effect.rows.column(DELETED)))
    return _opened(effect.shape, survivors, survivors.column(TXID), survivors.column(TIMESTAMP))


def truncation(effect: NetEffect) -> tuple[int, int] | None:
    """The TRUNCATE's transaction and time (µs) that end every other current version."""
    if not effect.truncate:
        return None
    if effect.truncate_txid is None or effect.truncate_time is None:
        raise ProgrammingError(
            f"net effect of {effect.shape.qualified!r} truncates without the truncate's "
            "transaction and time, which its history needs"
        )
    return effect.truncate_txid, effect.truncate_time


def _set(rows: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name), values)


def close(
    versions: pa.Table,
    ending: pa.Table,
    key: Sequence[str],
    truncate: tuple[int, int] | None = None,
) -> tuple[pa.Table, int]:
    """``versions`` with the current version of each key in ``ending`` (``closings``) ended by
    its transaction and time, and with ``truncate`` (txid, µs) every other current version;
    and how many versions this ended."""
    current = pc.is_null(versions.column(END_TXID))
    if ending.num_rows:
        matched = pc.and_(current, is_in_keys(versions, ending, key))
    else:
        matched = pa.array([False] * versions.num_rows, pa.bool_())
    rest = versions.filter(pc.invert(matched))
    ended = 0
    if truncate is not None:
        open_rest = pc.is_null(rest.column(END_TXID))
        ended = pc.sum(open_rest.cast(pa.int64())).as_py() or 0
        txid, micros = truncate
        rest = _set(
            rest,
            END_TXID,
            pc.if_else(open_rest, pa.scalar(txid, pa.int64()), rest.column(END_TXID)),
        )
        rest = _set(
            rest, END_TIME, pc.if_else(open_rest, pa.scalar(micros, TIME), rest.column(END_TIME))
        )
    hit = versions.filter(matched)
    if not hit.num_rows:
        return rest, ended
    names = list(key)
    lookup = {
        tuple(row[name] for name in names): (row[END_TXID], row[END_TIME])
        for row in ending.to_pylist()
    }
    ends = [lookup[tuple(row[name] for name in names)] for row in hit.select(names).to_pylist()]
    hit = _set(hit, END_TXID, pa.array([txid for txid, _ in ends], pa.int64()))
    hit = _set(hit, END_TIME, pa.array([micros for _, micros in ends], TIME))
    return pa.concat_tables([rest, hit.cast(rest.schema)]), ended + hit.num_rows


def load_versions(
    shape: TableShape, before: pa.Table, rows: pa.Table, txid: int, micros: int
) -> pa.Table:
    """A load's history: every current version of ``before`` closed, ``rows`` (the loaded
    copy) opened, both at the load's horizon ``txid`` and time ``micros``."""
    schema = history_schema(shape)
    closed, _ = close(before.cast(schema), _no_closings(shape), shape.key, (txid, micros))
    count = rows.num_rows
    opened = _opened(
        shape, rows, pa.array([txid] * count, pa.int64()), pa.array([micros] * count, TIME)
    )
    return pa.concat_tables([closed, opened])


def _no_closings(shape: TableShape) -> pa.Table:
    keys = history_schema(shape)
    return pa.schema(
        [*(keys.field(name) for name in shape.key), keys.field(END_TXID), keys.field(END_TIME)]
    ).empty_table()


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
    rows = _set(rows, TXID, pa.array([txid] * count, pa.int64()))
    rows = _set(rows, TIMESTAMP, pa.array([micros] * count, TIME))
    return NetEffect(effect.shape, rows.cast(effect_schema(shape)))
