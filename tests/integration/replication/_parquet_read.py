"""Reading the Parquet target back with Spark and printing every value as PostgreSQL would.

Dates and timestamps are read as their integers (``unix_date``/``unix_micros``):
PySpark's ``collect`` turns them into Python ``date``/``datetime`` objects, which
cannot hold BC years, years past 9999 or the ±infinity sentinels.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pgshovel.replication.targets import _arrow
from pgshovel.replication.targets._parquet_chunks import texts
from tests.stored_state import parquet_state


def table_shape(path: str, schema: str, table: str) -> Any:
    state = parquet_state(path)
    shape = None if state is None else state.table(schema, table)
    if shape is None:
        raise AssertionError(f"{schema}.{table} is not in the Parquet target's state")
    return shape


def spark_texts(
    spark: Any, frame: Any, path: str, schema: str, table: str
) -> list[tuple[str | None, ...]]:
    shape = table_shape(path, schema, table)
    expressions = []
    for column in shape.columns:
        name = "`" + column.name.replace("`", "``") + "`"
        kind = _arrow.arrow_type(column)
        if pa.types.is_date32(kind):
            expressions.append(f"unix_date({name})")
        elif pa.types.is_timestamp(kind) and kind.tz is None:
            expressions.append(f"unix_micros(cast({name} AS timestamp))")
        elif pa.types.is_timestamp(kind):
            expressions.append(f"unix_micros({name})")
        else:
            expressions.append(name)
    rows = frame.selectExpr(*expressions).collect()
    plain = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in rows]
    return [tuple(texts(shape, row)) for row in plain]
