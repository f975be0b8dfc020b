"""The type matrix: captured text -> protocol Value -> text that reads back as the same value."""

from __future__ import annotations

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.stream.codec import to_text
from tests.integration.admin._admin import execute
from tests.integration.capture._capture import captured, install, row

pytestmark = pytest.mark.integration

SETUP = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN positive AS int4 CHECK (VALUE > 0);
CREATE TYPE pair AS (x int, label text);
"""

# column: (type, the protocol kind it must travel as, values to capture)
MATRIX: dict[str, tuple[str, str, list[str]]] = {
    "i2": ("int2", "int64", ["-32768", "32767"]),
    "i4": ("int4", "int64", ["-2147483648", "0"]),
    "i8": ("int8", "int64", ["-9223372036854775808", "9223372036854775807"]),
    "num": ("numeric", "decimal", ["NaN", "1e400", "-0.000000000000000000001", "1.50"]),
    "f4": ("float4", "double", ["Infinity", "-Infinity", "NaN", "3.4028235e38", "1.1"]),
    "f8": ("float8", "double", ["Infinity", "NaN", "-1.7976931348623157e308", "0.1", "-0"]),
    "txt": ("text", "string", ["", 'multi\nline "quoted" \\ é 😀']),
    "vc": ("varchar(20)", "string", ["  spaces  "]),
    "ch": ("char(5)", "string", ["ab"]),
    "bin": ("bytea", "bytes", ["\\x00ff10", "\\x"]),
    "flag": ("bool", "bool", ["true", "false"]),
    "day": ("date", "date", ["2024-02-29", "infinity", "-infinity", "4713-01-01 BC"]),
    "tm": ("time", "time", ["23:59:59.999999", "24:00:00"]),
    "tmz": ("timetz", "time", ["12:34:56.789+05:30", "00:00:00-14"]),
    "ts": ("timestamp", "timestamp", ["2024-01-01 12:00:00.000001", "infinity", "0001-01-01 BC"]),
    "tsz": ("timestamptz", "timestamp", ["2024-06-30 23:59:59.5+02", "-infinity"]),
    "span": ("interval", "interval", ["1 year 2 mons -3 days 04:05:06.789", "-178000000 years"]),
    "id": ("uuid", "uuid", ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]),
    "doc": ("json", "json", ['{"b": 1,  "a": [1, 2.50]}']),
    "docb": ("jsonb", "json", ['{"b": 1, "a": {"x": null}}']),
    "nums": ("int4[]", "array", ["{1,NULL,3}", "{{1,2},{3,4}}", "{}", "[0:1]={5,6}"]),
    "texts": ("text[]", "array", ['{"a,b",NULL,"NULL","\\"q\\"",""}']),
    "feel": ("mood", "other", ["happy"]),
    "addr": ("inet", "other", ["192.168.0.1/24", "::1"]),
    "net": ("cidr", "other", ["10.0.0.0/8"]),
    "pos": ("positive", "int64", ["42"]),
    "tuple": ("pair", "other", ['(1,"a b")', "(,)"]),
}

SETTINGS = (
    "SET datestyle = 'ISO, MDY'; SET intervalstyle = 'postgres'; SET timezone = 'UTC'; "
    "SET extra_float_digits = 1; SET bytea_output = 'hex'"
)


def _rows() -> list[dict[str, str | None]]:
    """One row per value index; columns with fewer values repeat their first; a row of NULLs."""
    depth = max(len(values) for _type, _kind, values in MATRIX.values())
    built: list[dict[str, str | None]] = [
        {column: values[index % len(values)] for column, (_t, _k, values) in MATRIX.items()}
        for index in range(depth)
    ]
    built.append(dict.fromkeys(MATRIX))
    return built


def test_every_type_round_trips_without_loss(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, SETUP)
    definitions = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(type_name))
        for column, (type_name, _kind, _values) in MATRIX.items()
    )
    execute(database, sql.SQL("CREATE TABLE matrix (k serial PRIMARY KEY, {})").format(definitions))
    install(zookeeper, cluster_name, database, [{"name": "matrix"}])
    columns = list(MATRIX)
    insert = sql.SQL("INSERT INTO matrix ({}) VALUES ({})").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )
    for values in _rows():
        execute(database, insert, [values[column] for column in columns])

    mutations = captured(database, cluster_name)
    assert len(mutations) == len(_rows())
    conn = psycopg2.connect(database)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(SETTINGS)
            for mutation in mutations:
                captured_row = row(mutation.new)
                key = captured_row["k"].int64
                for column, (type_name, kind, _values) in MATRIX.items():
                    value = captured_row[column]
                    text = to_text(value)
                    if text is None:
                        assert value.HasField("null"), column
                        cursor.execute(
                            sql.SQL("SELECT {} IS NULL FROM matrix WHERE k = %s").format(
                                sql.Identifier(column)
                            ),
                            (key,),
                        )
                        assert cursor.fetchone() == (True,), column
                        continue
                    assert value.WhichOneof("kind") == kind, (column, value)
                    # Read the protocol's text back as the column's type: the very same value.
                    cursor.execute(
                        sql.SQL(
                            "SELECT {col}::text, (%s::{type})::text FROM matrix WHERE k = %s"
                        ).format(col=sql.Identifier(column), type=sql.SQL(type_name)),
                        (text, key),
                    )
                    original, round_tripped = cursor.fetchone()  # type: ignore[misc]
                    assert round_tripped == original, (column, value)
    finally:
        conn.close()

    by_name = row(mutations[0].new)
    assert by_name["feel"].other.type == "mood"
    assert by_name["addr"].other.type == "inet"
    assert by_name["tuple"].other.type == "pair"
    assert by_name["nums"].array.element_type == "int4"
    assert by_name["i8"].int64 == -9223372036854775808
    assert by_name["num"].decimal == "NaN"
