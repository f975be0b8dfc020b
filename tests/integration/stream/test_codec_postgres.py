"""The codec against a real PostgreSQL: every type's text survives the trip unchanged.

A table with a matrix of types and edge values is read as output-function text
under the capture session settings, each text goes through to_value and
to_text, the result is inserted into a second table, and PostgreSQL compares
the two tables column by column. Random values also check that to_text prints
exactly what PostgreSQL's output functions print.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Iterator

import psycopg2
import psycopg2.extensions
import pytest
from psycopg2 import sql

from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text, to_value

pytestmark = pytest.mark.integration

SESSION_SETTINGS = (
    "SET DateStyle = 'ISO, MDY'",
    "SET IntervalStyle = 'postgres'",
    "SET TimeZone = 'UTC'",
    "SET extra_float_digits = 1",
    "SET bytea_output = 'hex'",
)
SETUP = (
    "CREATE TYPE mood AS ENUM ('happy', 'sad', 'it''s \"complicated\"')",
    "CREATE DOMAIN posint AS int4 CHECK (VALUE > 0)",
    "CREATE TYPE pair AS (n int4, s text)",
)
BIG_NUMERIC = "9" * 1000 + "." + "0" * 999 + "1"

# column, type, values of rows 1..4 (None is NULL; row 3 is all NULL)
MATRIX: list[tuple[str, str, tuple[str | None, ...]]] = [
    ("c_int2", "int2", ("32767", "-32768", None, "0")),
    ("c_int4", "int4", ("-2147483648", "2147483647", None, "42")),
    ("c_int8", "int8", ("9223372036854775807", "-9223372036854775808", None, "-1")),
    ("c_oid", "oid", ("4294967295", "0", None, "1259")),
    ("c_numeric", "numeric", ("NaN", BIG_NUMERIC, None, "1.50")),
    ("c_numeric_inf", "numeric", ("Infinity", "-Infinity", None, "-0.000100")),
    ("c_float4", "float4", ("Infinity", "-0", None, "0.1")),
    ("c_float4_big", "float4", ("3.4028235e+38", "1e-45", None, "1e+06")),
    ("c_float8", "float8", ("-Infinity", "NaN", None, "0.30000000000000004")),
    ("c_float8_tiny", "float8", ("5e-324", "1.7976931348623157e+308", None, "-0")),
    ("c_text", "text", ('tab\there "q" \\ é ✓\nNULL', "", None, "NULL")),
    ("c_varchar", "varchar(20)", ("é✓", " lead and trail ", None, "x")),
    ("c_char", "char(5)", ("ab", "     ", None, "a")),
    ("c_name", "name", ("pg_class", "Mixed Case", None, "x")),
    ("c_qchar", '"char"', ("x", "\\", None, "")),
    ("c_bytea", "bytea", ("\\x00ff10", "\\x", None, "\\x5c78")),
    ("c_bool", "bool", ("t", "f", None, "true")),
    ("c_date", "date", ("4714-11-24 BC", "5874897-12-31", None, "2020-02-29")),
    ("c_date_inf", "date", ("infinity", "-infinity", None, "0044-03-15 BC")),
    ("c_time", "time", ("24:00:00", "00:00:00", None, "12:34:56.789")),
    ("c_timetz", "timetz", ("12:34:56.789+05:53:28", "24:00:00-15:59", None, "00:00:00+00")),
    (
        "c_ts",
        "timestamp",
        ("0044-03-15 00:00:00 BC", "294276-12-31 23:59:59.999999", None, "2020-02-29 12:34:56.5"),
    ),
    (
        "c_ts_edge",
        "timestamp",
        ("4714-11-24 00:00:00 BC", "10000-01-01 00:00:00", None, "infinity"),
    ),
    (
        "c_tstz",
        "timestamptz",
        ("infinity", "0001-12-31 23:59:59.999999+00 BC", None, "2020-01-01 12:00:00+05:30"),
    ),
    (
        "c_tstz_edge",
        "timestamptz",
        ("-infinity", "294276-12-31 23:59:59.999999+00", None, "1880-01-01 00:00:00+05:53:28"),
    ),
    (
        "c_interval",
        "interval",
        (
            # PostgreSQL prints this as '... -2562047788:00:54.775808', which it
            # cannot read back: the codec must print a form it can.
            "-178956970 years -8 mons -2147483648 days -2562047788 hours -54.775808 secs",
            "178956970 years 7 mons 2147483647 days 2562047788:00:54.775807",
            None,
            "1 year 2 mons -3 days +04:05:06.789",
        ),
    ),
    (
        "c_uuid",
        "uuid",
        (
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "00000000-0000-0000-0000-000000000000",
            None,
            "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
        ),
    ),
    ("c_json", "json", ('{ "a":1, "a":2 }', "[1,\n 2.50]", None, '"\\u00e9"')),
    ("c_jsonb", "jsonb", ('{"b": [1, 2.50], "a": null}', "[]", None, '"\\u00e9"')),
    ("c_int_arr", "int4[]", ("[0:1]={1,NULL}", "{{1,2},{3,4}}", None, "{}")),
    (
        "c_text_arr",
        "text[]",
        ('{{"a b",NULL},{"\\"","\\\\"}}', '{"","NULL",null,é}', None, "[-2:-2][3:4]={{x,y}}"),
    ),
    ("c_num_arr", "numeric[]", ("{1.50,NaN,NULL,-Infinity}", "{0}", None, "{}")),
    (
        "c_tstz_arr",
        "timestamptz[]",
        (
            '{"0044-03-15 00:00:00+00 BC",infinity,"294276-12-31 23:59:59.999999+00",NULL}',
            '{"2020-01-01 00:00:00+01"}',
            None,
            "{}",
        ),
    ),
    ("c_bool_arr", "bool[]", ("{t,f,NULL}", "{{t},{f}}", None, "{}")),
    ("c_float_arr", "float8[]", ("{NaN,-0,1e+300,-Infinity}", "{0.1}", None, "{}")),
    ("c_interval_arr", "interval[]", ('{"-1 days +00:00:01",NULL}', "{00:00:00}", None, "{}")),
    ("c_bytea_arr", "bytea[]", ('{"\\\\x00ff",NULL}', "{}", None, '{"\\\\x"}')),
    ("c_char_arr", "char(3)[]", ('{"a  ",NULL}', "{abc}", None, "{}")),
    ("c_mood", "mood", ("happy", 'it\'s "complicated"', None, "sad")),
    ("c_mood_arr", "mood[]", ('{happy,NULL,"it\'s \\"complicated\\""}', "{}", None, "{sad}")),
    ("c_inet", "inet", ("192.168.0.1/24", "::1", None, "10.0.0.1")),
    ("c_inet_arr", "inet[]", ("{10.0.0.1/8,::1,NULL}", "{}", None, "{0.0.0.0/0}")),
    ("c_cidr", "cidr", ("10.0.0.0/8", "::/0", None, "192.168.0.0/16")),
    ("c_posint", "posint", ("42", "2147483647", None, "1")),
    ("c_posint_arr", "posint[]", ("{1,NULL,3}", "{}", None, "{{1},{2}}")),
    ("c_money", "money", ("12.34", "-92233720368547758.08", None, "0")),
    ("c_range", "int4range", ("[1,5)", "empty", None, "(,)")),
    ("c_box_arr", "box[]", ("{(1,1),(0,0);(2,2),(1,1)}", "{}", None, "{(0,0),(0,0)}")),
    ("c_pair", "pair", ('(1,"a b")', "(,)", None, '(-1,"\\"")')),
    ("c_xml", "xml", ("<a>é</a>", "text only", None, "<b/>")),
]
ROWS = 4
# Compared through their text: no equality operator (json, xml), or one that is
# too lenient (box compares areas, float8 equates 0 and -0).
COMPARE_AS_TEXT = {"json", "xml", "box[]", "float4", "float8", "float8[]"}


def _raw_text_casters(connection: psycopg2.extensions.connection, oids: set[int]) -> None:
    """Make psycopg2 return every value of these types as PostgreSQL's output text."""
    raw = psycopg2.extensions.new_type(tuple(oids), "PGSHOVEL_RAW", lambda value, cursor: value)
    psycopg2.extensions.register_type(raw, connection)


@pytest.fixture
def connection(database: str) -> Iterator[psycopg2.extensions.connection]:
    conn = psycopg2.connect(database)
    with conn.cursor() as cursor:
        for statement in SESSION_SETTINGS:
            cursor.execute(statement)
    conn.commit()
    yield conn
    conn.close()


def _read_texts(
    connection: psycopg2.extensions.connection, table: str
) -> dict[int, tuple[str | None, ...]]:
    query = sql.SQL("SELECT id, {} FROM {} ORDER BY id").format(
        sql.SQL(", ").join(sql.Identifier(column) for column, _, _ in MATRIX),
        sql.Identifier(table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("{} LIMIT 0").format(query))
        columns = cursor.description or ()
        _raw_text_casters(connection, {column.type_code for column in columns[1:]})
        cursor.execute(query)
        # id may come back as text too (int4 columns share its type).
        return {int(row[0]): tuple(row[1:]) for row in cursor.fetchall()}


def _base_type_names(connection: psycopg2.extensions.connection, table: str) -> list[str]:
    """pg_type.typname of each column, domains resolved to their base type."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(base.typname, t.typname) FROM pg_attribute a "
            "JOIN pg_type t ON t.oid = a.atttypid "
            "LEFT JOIN pg_type base ON t.typtype = 'd' AND base.oid = t.typbasetype "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 1 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            (table,),
        )
        return [name for (name,) in cursor.fetchall()]


def _create_tables(connection: psycopg2.extensions.connection) -> None:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(type_sql))
        for column, type_sql, _ in MATRIX
    )
    insert = sql.SQL("INSERT INTO source (id, {}) VALUES ({})").format(
        sql.SQL(", ").join(sql.Identifier(column) for column, _, _ in MATRIX),
        sql.SQL(", ").join(sql.Placeholder() * (len(MATRIX) + 1)),
    )
    with connection.cursor() as cursor:
        for statement in SETUP:
            cursor.execute(statement)
        for table in ("source", "target"):
            cursor.execute(
                sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})").format(
                    sql.Identifier(table), columns
                )
            )
        for row in range(ROWS):
            cursor.execute(insert, [row + 1, *(values[row] for _, _, values in MATRIX)])
    connection.commit()


def test_every_type_survives_text_value_text(connection: psycopg2.extensions.connection) -> None:
    _create_tables(connection)
    type_names = _base_type_names(connection, "source")
    columns = [column for column, _, _ in MATRIX]
    assert type_names[columns.index("c_posint")] == "int4"
    assert type_names[columns.index("c_char_arr")] == "_bpchar"
    captured = _read_texts(connection, "source")

    insert = sql.SQL("INSERT INTO target (id, {}) VALUES ({})").format(
        sql.SQL(", ").join(sql.Identifier(column) for column, _, _ in MATRIX),
        sql.SQL(", ").join(sql.Placeholder() * (len(MATRIX) + 1)),
    )
    with connection.cursor() as cursor:
        for row_id, texts in captured.items():
            values = [to_value(name, text) for name, text in zip(type_names, texts, strict=True)]
            assert all(v.WhichOneof("kind") == "null" for v in values) == (row_id == 3)
            cursor.execute(insert, [row_id, *(to_text(value) for value in values)])
    connection.commit()

    different: list[tuple[object, ...]] = []
    with connection.cursor() as cursor:
        for column, type_sql, _ in MATRIX:
            left = sql.SQL("s.{}").format(sql.Identifier(column))
            right = sql.SQL("t.{}").format(sql.Identifier(column))
            if type_sql in COMPARE_AS_TEXT:
                left = sql.SQL("{}::text").format(left)
                right = sql.SQL("{}::text").format(right)
            cursor.execute(
                sql.SQL(
                    "SELECT s.id FROM source s JOIN target t USING (id) "
                    "WHERE {} IS DISTINCT FROM {} ORDER BY s.id"
                ).format(left, right)
            )
            different.extend((column, row_id) for (row_id,) in cursor.fetchall())
    assert different == []
    assert _read_texts(connection, "target") == captured


def test_native_kinds_carry_the_captured_types(connection: psycopg2.extensions.connection) -> None:
    _create_tables(connection)
    type_names = _base_type_names(connection, "source")
    texts = _read_texts(connection, "source")[1]
    kinds = {
        column: to_value(name, text).WhichOneof("kind")
        for (column, _, _), name, text in zip(MATRIX, type_names, texts, strict=True)
    }
    assert kinds["c_numeric"] == "decimal"
    assert kinds["c_float4"] == "double"
    assert kinds["c_char"] == "string"
    assert kinds["c_ts"] == "timestamp"
    assert kinds["c_interval"] == "interval"
    assert kinds["c_json"] == kinds["c_jsonb"] == "json"
    assert kinds["c_posint"] == "int64"
    assert kinds["c_mood"] == kinds["c_inet"] == kinds["c_box_arr"] == "other"
    assert kinds["c_mood_arr"] == kinds["c_posint_arr"] == kinds["c_int_arr"] == "array"


def _postgres_prints(
    connection: psycopg2.extensions.connection, type_name: str, texts: list[str]
) -> list[str]:
    """PostgreSQL's output text of each input text read as ``type_name``."""
    query = sql.SQL(
        "SELECT x::{} FROM unnest(%s::text[]) WITH ORDINALITY AS u(x, n) ORDER BY n"
    ).format(sql.Identifier(type_name))
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("SELECT NULL::{}").format(sql.Identifier(type_name)))
        assert cursor.description is not None
        _raw_text_casters(connection, {cursor.description[0].type_code})
        cursor.execute(query, (texts,))
        return [text for (text,) in cursor.fetchall()]


def test_to_text_prints_what_postgresql_prints(connection: psycopg2.extensions.connection) -> None:
    generator = random.Random(20240229)
    doubles = [struct.unpack("<d", generator.randbytes(8))[0] for _ in range(3000)]
    doubles += [generator.uniform(-1e6, 1e6) for _ in range(1000)]
    doubles += [float(10**e) for e in range(-20, 21)]
    values = {
        "float8": [stream_pb2.Value(double=d) for d in doubles if not math.isnan(d)],
        "timestamptz": [
            stream_pb2.Value(
                timestamp=stream_pb2.Timestamp(
                    micros=generator.randint(-210866803200000000, 2**63 - 1), with_zone=True
                )
            )
            for _ in range(2000)
        ],
        "date": [
            stream_pb2.Value(date=stream_pb2.Date(days=generator.randint(-2440588, 2145042905)))
            for _ in range(2000)
        ],
        "interval": [
            stream_pb2.Value(
                interval=stream_pb2.Interval(
                    months=generator.randint(-(2**31), 2**31 - 1),
                    days=generator.choice([0, generator.randint(-(2**31), 2**31 - 1)]),
                    micros=generator.choice([0, generator.randint(-(2**63), 2**63 - 1)]),
                )
            )
            for _ in range(2000)
        ],
        "timetz": [
            stream_pb2.Value(
                time=stream_pb2.Time(
                    micros=generator.randint(0, 86_400_000_000),
                    with_zone=True,
                    utc_offset=generator.randint(-57599, 57599),
                )
            )
            for _ in range(2000)
        ],
    }
    for type_name, samples in values.items():
        ours = [to_text(value) or "" for value in samples]
        assert _postgres_prints(connection, type_name, ours) == ours, type_name
