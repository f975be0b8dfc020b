"""SQL text of merge predicates for delta-rs (DataFusion), values quoted exactly.

A MERGE matches on every key column. To keep its cost proportional to the
change rather than to the table, the predicate also bounds the first key
column by the net effect's minimum and maximum as literals: delta-rs then
skips every file whose statistics lie outside that range without reading it.
Bounds are written only for types whose statistics prune exactly (integers,
text, dates in the ordinary range); for the others the merge reads all files.
Identifiers are double-quoted with embedded quotes doubled; string literals
are single-quoted the same way.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.compute as pc

from pgshovel.source import TableShape

__all__ = ["identifier", "key_bounds", "literal", "merge_predicate"]


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(value: object, arrow_type: pa.DataType) -> str | None:
    """A DataFusion literal of ``value``, or None when the type is not one bounds are made for."""
    if pa.types.is_integer(arrow_type) and isinstance(value, int):
        return str(value)
    if pa.types.is_string(arrow_type) and isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if pa.types.is_date32(arrow_type) and isinstance(value, datetime.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    return None


def key_bounds(shape: TableShape, keys: pa.Table) -> tuple[str, str] | None:
    """Literals of the first key column's minimum and maximum in ``keys`` (None: no bounds)."""
    if keys.num_rows == 0:
        return None
    column = keys.column(shape.key[0])
    if pa.types.is_date32(column.type):
        # Dates outside Python's range (the infinity sentinels) get no bounds.
        days = pc.min_max(column.cast(pa.int32()))
        if not -719162 <= days["min"].as_py() <= days["max"].as_py() <= 2932896:
            return None
    extremes = pc.min_max(column)
    low = literal(extremes["min"].as_py(), column.type)
    high = literal(extremes["max"].as_py(), column.type)
    if low is None or high is None:
        return None
    return low, high


def merge_predicate(shape: TableShape, keys: pa.Table, target: str = "t", source: str = "s") -> str:
    """``t.k1 = s.k1 AND ... [AND t.k1 >= low AND t.k1 <= high]`` for the keys in ``keys``."""
    parts = [f"{target}.{identifier(name)} = {source}.{identifier(name)}" for name in shape.key]
    bounds = key_bounds(shape, keys)
    if bounds is not None:
        first = f"{target}.{identifier(shape.key[0])}"
        parts += [f"{first} >= {bounds[0]}", f"{first} <= {bounds[1]}"]
    return " AND ".join(parts)
