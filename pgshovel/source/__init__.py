"""The source database as every process sees it: connect, the catalog, table shapes, node id.

Admin, relay and worker reach PostgreSQL only through ``connect`` (one set of
session settings, one translation of failures into pgshovel's errors), log in
with the set's DSN plus their own ``source_connection`` (``source_dsn``), read
tables only through ``Catalog`` and describe a captured table only as a
``TableShape``.
"""

from pgshovel.source._catalog import UNKNOWN_TYPE, Catalog, TableInfo, captured_shape
from pgshovel.source._chunks import (
    BUCKETS,
    SELECTED,
    Checksum,
    Chunk,
    StagedChunk,
    Watermarked,
    bucket_expression,
    checksum_query,
    chunk_condition,
    hash_expression,
    output_text,
    read_chunk,
    sample_boundaries,
)
from pgshovel.source._connection import (
    TEXT_SETTINGS,
    connect,
    first_line,
    is_unavailable,
    translate,
    translating,
)
from pgshovel.source._dsn import SourceConnection, source_dsn, with_source_connection
from pgshovel.source._filters import captured_rows, check_filter, check_filter_text
from pgshovel.source._node import NODE_TABLE, node_id, read_node_id
from pgshovel.source._ranges import (
    COLLATABLE,
    key_columns,
    make_ranges,
    own_rows,
    pick_boundaries,
    range_predicate,
)
from pgshovel.source._schema_events import (
    ColumnFacts,
    Interpretation,
    TableFacts,
    cast_is_exact,
    interpret,
    missing_value_text,
)
from pgshovel.source._shape import Column, KeyRange, TableShape
from pgshovel.source._triggers import CapturedTable, captured_tables

__all__ = [
    "BUCKETS",
    "COLLATABLE",
    "NODE_TABLE",
    "SELECTED",
    "TEXT_SETTINGS",
    "UNKNOWN_TYPE",
    "CapturedTable",
    "Catalog",
    "Checksum",
    "Chunk",
    "Column",
    "ColumnFacts",
    "Interpretation",
    "KeyRange",
    "SourceConnection",
    "StagedChunk",
    "TableFacts",
    "TableInfo",
    "TableShape",
    "Watermarked",
    "bucket_expression",
    "captured_rows",
    "captured_shape",
    "captured_tables",
    "cast_is_exact",
    "check_filter",
    "check_filter_text",
    "checksum_query",
    "chunk_condition",
    "connect",
    "first_line",
    "hash_expression",
    "interpret",
    "is_unavailable",
    "key_columns",
    "make_ranges",
    "missing_value_text",
    "node_id",
    "output_text",
    "own_rows",
    "pick_boundaries",
    "range_predicate",
    "read_chunk",
    "read_node_id",
    "sample_boundaries",
    "source_dsn",
    "translate",
    "translating",
    "with_source_connection",
]
